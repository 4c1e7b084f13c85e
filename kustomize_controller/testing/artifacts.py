"""Source artifacts for tests, ``make run``, e2e and benchmarks: an HTTP artifact server and source publishing.

The counterpart of upstream's ``testserver.ArtifactServer`` plus the part of source-controller that
writes ``status.artifact``. Two halves:

``ArtifactServer`` (``async with ArtifactServer() as server``) serves gzip tarballs over plain HTTP
on ``127.0.0.1`` (a random port unless one is given; ``advertise_host`` names the host written into
URLs when clients reach it by another name) from a temporary directory it owns and removes on exit.
A restarted server keeps its port (URLs stay valid) but not its artifacts.

- ``publish_dir(path, name=...)`` packs a directory, ``publish_files({rel: text|bytes}, name=...)`` packs
  content built in memory, ``publish_archive(data, name=...)`` stores bytes as given (malformed or
  hostile tarballs for extraction tests). Each returns the ``status.artifact`` fields (an
  ``ArtifactFields`` dict: ``path``, ``url``, ``revision``, ``digest``, ``size``, ``lastUpdateTime``,
  ``metadata``).
- Packing is reproducible: entries sorted by path, directories included, mtime 0, uid/gid 0, no user or
  group names, modes normalised to 0644/0755 (0755 when any execute bit is set), gzip header without
  name or time. The same content gives the same bytes, so the same ``digest``. ``.git`` directories
  are left out (as source-controller does); symlinks are stored as symlinks, never followed.
- Files are content addressed: ``<name>/<sha256 hex>.tar.gz``; publishing the same content twice
  gives the same path. The default revision is ``main@sha1:<sha1 of the tarball>`` (the shape of a Git
  revision, stable for the content); a caller may pass its own.
- ``GET`` and ``HEAD`` on ``/<path>`` serve the bytes with ``Content-Type: application/gzip`` and no
  ``Content-Encoding`` (so HTTP clients never decompress on the fly); unknown paths answer 404.
- Faults, for tests (``path=None`` means every path): ``fail(path, status=..., times=...)`` answers
  ``status`` (``times`` requests, or until cleared), ``delay(path, seconds=...)`` waits before the
  headers (through the injected clock), ``corrupt(path)`` serves bytes of the right length whose
  digest does not match, ``unpublish(path)`` removes an artifact, ``clear_faults()`` removes all
  faults. Faults set for the same path combine (a slow 500); a fault for the exact path wins over the
  one for every path; ``times`` counts the requests the whole entry applies to. ``requests`` counts
  requests per path (answered or not); ``request_count(path)`` reads it.

Source publishing, as source-controller would, through any client with ``get``/``create``/``patch``
(``SourceClient``, which ``KubeClient`` satisfies):

- ``publish_source(client, kind=..., namespace=..., name=..., artifact=...)`` creates the
  ``source.toolkit.fluxcd.io/v1`` object when absent (a minimal valid spec with ``suspend: true``, so
  a real source-controller on an e2e cluster leaves it alone), then writes through the ``/status``
  subresource: ``artifact``, ``conditions`` (``Ready`` and ``ArtifactInStorage`` True, reason
  ``Succeeded``, message ``stored artifact for revision '<rev>'``) and ``observedGeneration`` (not for
  ``ExternalArtifact``, whose status has none). ``lastTransitionTime`` moves only when a condition's
  status changes.
- ``set_source_not_ready(...)`` sets ``Ready=False`` and keeps the artifact (source-controller keeps
  the last good artifact on failure); ``remove_artifact(...)`` removes ``status.artifact`` and leaves
  the conditions as they are.

Not promised: TLS, authentication, range requests, persistence across server instances; the status
writes are merge patches (last writer wins, like source-controller's own patcher on conflict-free
fields).
"""

from __future__ import annotations

import asyncio
import collections
import gzip
import hashlib
import io
import os
import shutil
import socket
import stat
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any, Final, Protocol, TypedDict

from aiohttp import web

from kustomize_controller.api.meta import format_time
from kustomize_controller.kube.errors import AlreadyExistsError, NotFoundError
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.runtime.files import open_off_loop

__all__ = [
    "SOURCE_API_VERSION",
    "ArtifactFields",
    "ArtifactServer",
    "SourceClient",
    "pack_dir",
    "pack_files",
    "publish_source",
    "remove_artifact",
    "set_source_not_ready",
]

SOURCE_API_VERSION: Final = "source.toolkit.fluxcd.io/v1"
_CHUNK: Final = 1 << 16
_SKIPPED_DIRS: Final = frozenset({".git"})


class ArtifactFields(TypedDict):
    """The ``status.artifact`` of a source, as written to the API (JSON field names)."""

    path: str
    url: str
    revision: str
    digest: str
    size: int
    lastUpdateTime: str
    metadata: dict[str, str]


# --------------------------------------------------------------------------------------------- packing


def _tarinfo(name: str, *, kind: bytes, size: int = 0, executable: bool = False, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o755 if kind == tarfile.DIRTYPE or executable else 0o644
    info.linkname = link
    return info


def _check_relative(rel: str) -> str:
    raw = rel.replace("\\", "/")
    posix = PurePosixPath(raw)
    if posix.is_absolute() or not posix.parts or any(p in ("..", ".") for p in raw.split("/")):
        raise ValueError(f"artifact entry {rel!r}: must be a relative path without '.' or '..' components")
    return posix.as_posix()


def _gzip_tar(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=6) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        for info, data in sorted(entries, key=lambda e: e[0].name):
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _parent_dirs(names: list[str]) -> set[str]:
    dirs: set[str] = set()
    for name in names:
        parts = name.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return dirs


def pack_files(files: Mapping[str, str | bytes]) -> bytes:
    """A reproducible gzip tarball of ``{relative path: content}`` (str is UTF-8 encoded).

    Parent directories get entries of their own; a ``ValueError`` names any absolute path or path with
    ``.``/``..`` components (use ``publish_archive`` to serve hostile archives on purpose)."""
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = []
    names: list[str] = []
    for rel, content in files.items():
        name = _check_relative(rel)
        data = content.encode() if isinstance(content, str) else bytes(content)
        entries.append((_tarinfo(name, kind=tarfile.REGTYPE, size=len(data)), data))
        names.append(name)
    if len(set(names)) != len(names):
        raise ValueError("artifact entries: two paths name the same file")
    entries.extend((_tarinfo(d, kind=tarfile.DIRTYPE), None) for d in _parent_dirs(names))
    return _gzip_tar(entries)


def pack_dir(root: Path) -> bytes:
    """A reproducible gzip tarball of the directory ``root`` (its content, not ``root`` itself).

    ``.git`` directories are skipped; symlinks are stored as links (not followed); other special files
    (sockets, FIFOs, devices) raise ``ValueError``."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"artifact source {root}: not a directory")
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        base = Path(dirpath)
        for entry in [*dirnames, *sorted(filenames)]:
            full = base / entry
            name = full.relative_to(root).as_posix()
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                entries.append((_tarinfo(name, kind=tarfile.SYMTYPE, link=os.readlink(full)), None))
            elif stat.S_ISDIR(st.st_mode):
                entries.append((_tarinfo(name, kind=tarfile.DIRTYPE), None))
            elif stat.S_ISREG(st.st_mode):
                data = full.read_bytes()
                executable = bool(st.st_mode & 0o111)
                entries.append((_tarinfo(name, kind=tarfile.REGTYPE, size=len(data), executable=executable), data))
            else:
                raise ValueError(f"artifact source {full}: not a regular file, directory or symlink")
    # os.walk lists a symlink to a directory among dirnames; it is stored as a link and not descended.
    return _gzip_tar(entries)


# ---------------------------------------------------------------------------------------------- server


@dataclass
class _Fault:
    status: int | None = None
    times: int | None = None  # None: until cleared
    delay: float = 0.0
    corrupt: bool = False


class ArtifactServer:
    """Serves published artifacts over HTTP on loopback; see the module docstring for the contract."""

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, advertise_host: str | None = None, clock: Clock | None = None
    ) -> None:
        """``host``/``port``: where to listen (port 0: a free one). ``advertise_host``: the host written
        into artifact URLs when clients reach the server by another name (default: ``host``)."""
        if advertise_host is None and host in ("0.0.0.0", "::"):
            raise ValueError(f"ArtifactServer: listening on {host} needs an advertise_host for artifact URLs")
        self._host = host
        self._advertise = advertise_host or host
        self._port = port
        self._clock: Clock = clock or RealClock()
        self._runner: web.AppRunner | None = None
        self._root: Path | None = None
        self._files: dict[str, Path] = {}
        self._faults: dict[str | None, _Fault] = {}
        self.requests: collections.Counter[str] = collections.Counter()

    # ---------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind the port and create the storage directory (idempotent)."""
        if self._runner is not None:
            return
        sock = socket.socket(socket.AF_INET6 if ":" in self._host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
        except OSError:
            sock.close()
            raise
        self._port = sock.getsockname()[1]
        app = web.Application()
        app.router.add_get("/{path:.+}", self._serve)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
        except BaseException:
            await runner.cleanup()
            sock.close()
            raise
        self._root = Path(tempfile.mkdtemp(prefix="artifacts-"))
        self._runner = runner

    async def stop(self) -> None:
        """Stop serving and remove the storage directory (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        if self._root is not None:
            await asyncio.to_thread(shutil.rmtree, self._root, True)
            self._root = None
        self._files.clear()

    async def __aenter__(self) -> ArtifactServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """``http://host:port`` (no trailing slash)."""
        if self._runner is None:
            raise RuntimeError("ArtifactServer: not started")
        host = f"[{self._advertise}]" if ":" in self._advertise else self._advertise
        return f"http://{host}:{self._port}"

    @property
    def storage(self) -> Path | None:
        """The directory holding the published files (``None`` when stopped)."""
        return self._root

    def url_for(self, path: str) -> str:
        return f"{self.url}/{path}"

    # --------------------------------------------------------------------------------- publishing

    async def publish_dir(
        self, path: str | os.PathLike[str], *, name: str, revision: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ArtifactFields:
        """Pack the directory ``path`` and publish it under ``name``."""
        data = await asyncio.to_thread(pack_dir, Path(path))
        return await self.publish_archive(data, name=name, revision=revision, metadata=metadata)

    async def publish_files(
        self, files: Mapping[str, str | bytes], *, name: str, revision: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ArtifactFields:
        """Pack ``{relative path: content}`` and publish it under ``name``."""
        data = await asyncio.to_thread(pack_files, dict(files))
        return await self.publish_archive(data, name=name, revision=revision, metadata=metadata)

    async def publish_archive(
        self, data: bytes, *, name: str, revision: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> ArtifactFields:
        """Publish ``data`` exactly as given (it need not be a valid tarball)."""
        if self._root is None:
            raise RuntimeError("ArtifactServer: not started")
        prefix = _check_relative(name)
        sha256 = hashlib.sha256(data).hexdigest()
        rel = f"{prefix}/{sha256}.tar.gz"
        target = self._root / rel
        await asyncio.to_thread(_write_file, target, data)
        self._files[rel] = target
        return ArtifactFields(
            path=rel,
            url=self.url_for(rel),
            revision=revision or f"main@sha1:{hashlib.sha1(data).hexdigest()}",
            digest=f"sha256:{sha256}",
            size=len(data),
            lastUpdateTime=format_time(self._clock.now()),
            metadata=dict(metadata or {}),
        )

    def unpublish(self, path: str) -> None:
        """Remove an artifact: its URL answers 404 from now on."""
        target = self._files.pop(path, None)
        if target is None:
            raise KeyError(f"artifact {path!r}: not published")
        target.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------- faults

    def fail(self, path: str | None = None, *, status: int, times: int | None = None) -> None:
        """Answer ``status`` for ``path`` (every path when None), ``times`` times or until cleared."""
        if not 400 <= status <= 599:
            raise ValueError(f"fault status {status}: must be an HTTP error (4xx or 5xx)")
        fault = self._faults.setdefault(path, _Fault())
        fault.status, fault.times = status, times

    def delay(self, path: str | None = None, *, seconds: float) -> None:
        """Wait ``seconds`` (on the server's clock) before answering for ``path``."""
        if seconds < 0:
            raise ValueError(f"fault delay {seconds}: must not be negative")
        self._faults.setdefault(path, _Fault()).delay = seconds

    def corrupt(self, path: str | None = None) -> None:
        """Serve bytes of the published length that do not match the published digest."""
        self._faults.setdefault(path, _Fault()).corrupt = True

    def clear_faults(self) -> None:
        self._faults.clear()

    def request_count(self, path: str | None = None) -> int:
        """Requests received for ``path`` (every path when None), including failed ones."""
        return self.requests[path] if path is not None else sum(self.requests.values())

    def _fault_for(self, path: str) -> _Fault | None:
        key: str | None = path if path in self._faults else None
        fault = self._faults.get(key)
        if fault is None:
            return None
        if fault.times is not None:
            fault.times -= 1
            if fault.times <= 0:
                del self._faults[key]
        return fault

    # ------------------------------------------------------------------------------------ serving

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["path"]
        self.requests[path] += 1
        fault = self._fault_for(path)
        if fault is not None and fault.delay > 0:
            await self._clock.sleep(fault.delay)
        if fault is not None and fault.status is not None:
            return web.Response(status=fault.status, text=f"injected fault for {path}\n")
        target = self._files.get(path)
        if target is None:
            return web.Response(status=404, text=f"artifact {path} not found\n")
        size = (await asyncio.to_thread(target.stat)).st_size
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "application/gzip", "Content-Length": str(size)}
        )
        await resp.prepare(request)
        if request.method == "HEAD":
            return resp
        if fault is not None and fault.corrupt:
            data = await asyncio.to_thread(target.read_bytes)
            await resp.write(bytes(b ^ 0xFF for b in data[:1]) + data[1:])
        else:
            with await open_off_loop(target, "rb") as src:
                while chunk := await asyncio.to_thread(src.read, _CHUNK):
                    await resp.write(chunk)
        await resp.write_eof()
        return resp


def _write_file(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)


# ------------------------------------------------------------------------------------ source objects


class SourceClient(Protocol):
    """What publishing needs of a Kubernetes client (``KubeClient`` has it)."""

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def create(
        self, obj: Mapping[str, Any], *, dry_run: bool = False, field_manager: str | None = None
    ) -> dict[str, Any]: ...

    async def patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, body: Any, *,
        patch_type: Any, field_manager: str | None = None, force: bool | None = None, dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


def minimal_spec(kind: str, *, namespace: str, name: str) -> dict[str, Any]:
    """A valid, suspended spec for a source ``kind`` (the schema's required fields and nothing else)."""
    if kind == "GitRepository":
        return {"interval": "10m", "url": f"https://git.example.invalid/{namespace}/{name}.git",
                "ref": {"branch": "main"}, "suspend": True}
    if kind == "OCIRepository":
        return {"interval": "10m", "url": f"oci://registry.example.invalid/{namespace}/{name}",
                "ref": {"tag": "latest"}, "suspend": True}
    if kind == "Bucket":
        return {"interval": "10m", "bucketName": name, "endpoint": "storage.example.invalid",
                "provider": "generic", "suspend": True}
    if kind == "ExternalArtifact":
        return {}
    raise ValueError(f"{kind}/{namespace}/{name}: not a source kind (GitRepository, OCIRepository, Bucket, "
                     "ExternalArtifact)")


async def _get_or_create(
    client: SourceClient, *, kind: str, namespace: str, name: str, spec: Mapping[str, Any] | None
) -> dict[str, Any]:
    try:
        return await client.get(SOURCE_API_VERSION, kind, name, namespace)
    except NotFoundError:
        pass
    body = {
        "apiVersion": SOURCE_API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(spec) if spec is not None else minimal_spec(kind, namespace=namespace, name=name),
    }
    try:
        return await client.create(body)
    except AlreadyExistsError:
        return await client.get(SOURCE_API_VERSION, kind, name, namespace)


def _condition(
    previous: list[dict[str, Any]], *, type_: str, status: str, reason: str, message: str, generation: int, now: str
) -> dict[str, Any]:
    old = next((c for c in previous if c.get("type") == type_), None)
    since = now
    if old is not None and old.get("status") == status:
        since = old.get("lastTransitionTime") or now
    return {
        "type": type_,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def _merge_conditions(previous: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    replaced = {c["type"] for c in new}
    return new + [c for c in previous if c.get("type") not in replaced]


def _replacing(old: Any, new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch turning ``old`` into exactly ``new`` (keys only in ``old`` become null)."""
    patch: dict[str, Any] = {}
    previous = old if isinstance(old, Mapping) else {}
    for key in previous:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if isinstance(value, Mapping) and isinstance(previous.get(key), Mapping):
            patch[key] = _replacing(previous[key], value)
        else:
            patch[key] = value
    return patch


async def _patch_status(client: SourceClient, obj: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return await client.patch(
        SOURCE_API_VERSION, obj["kind"], meta["name"], meta["namespace"], {"status": status},
        patch_type="merge", subresource="status",
    )


async def publish_source(
    client: SourceClient,
    *,
    kind: str = "GitRepository",
    namespace: str,
    name: str,
    artifact: Mapping[str, Any],
    spec: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
) -> dict[str, Any]:
    """Create the source when absent (``spec`` or a minimal one), then record ``artifact`` as its ready
    artifact; returns the object as the server answered the status write."""
    obj = await _get_or_create(client, kind=kind, namespace=namespace, name=name, spec=spec)
    now = format_time((clock or RealClock()).now())
    generation = int(obj["metadata"].get("generation") or 1)
    previous = list((obj.get("status") or {}).get("conditions") or [])
    message = f"stored artifact for revision '{artifact['revision']}'"
    conditions = [
        _condition(previous, type_=t, status="True", reason="Succeeded", message=message, generation=generation,
                   now=now)
        for t in ("Ready", "ArtifactInStorage")
    ]
    old_artifact = (obj.get("status") or {}).get("artifact")
    status: dict[str, Any] = {
        "artifact": _replacing(old_artifact, artifact),
        "conditions": _merge_conditions(previous, conditions),
    }
    if kind != "ExternalArtifact":
        status["observedGeneration"] = generation
    return await _patch_status(client, obj, status)


async def set_source_not_ready(
    client: SourceClient,
    *,
    kind: str = "GitRepository",
    namespace: str,
    name: str,
    message: str,
    reason: str = "Failed",
    clock: Clock | None = None,
) -> dict[str, Any]:
    """Set ``Ready=False`` with ``reason``/``message`` on an existing source; the artifact stays."""
    obj = await client.get(SOURCE_API_VERSION, kind, name, namespace)
    now = format_time((clock or RealClock()).now())
    generation = int(obj["metadata"].get("generation") or 1)
    previous = list((obj.get("status") or {}).get("conditions") or [])
    ready = _condition(previous, type_="Ready", status="False", reason=reason, message=message,
                       generation=generation, now=now)
    return await _patch_status(client, obj, {"conditions": _merge_conditions(previous, [ready])})


async def remove_artifact(
    client: SourceClient, *, kind: str = "GitRepository", namespace: str, name: str
) -> dict[str, Any]:
    """Remove ``status.artifact`` of an existing source; conditions are left as they are."""
    obj = await client.get(SOURCE_API_VERSION, kind, name, namespace)
    return await _patch_status(client, obj, {"artifact": None})
