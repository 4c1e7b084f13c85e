"""Safe extraction of a gzip tarball, and the controller-owned temp workspace.

Extraction contract (:func:`extract_tarball`, synchronous — run it in a thread):

- Regular files and directories only. Symlinks and hard links are skipped (as upstream).
  Character/block devices and FIFOs are refused.
- Names are refused when absolute (``/x``, ``C:\\x``) or when any ``..`` component appears; an
  entry can therefore never be written outside the destination (which holds no symlinks, since
  none are ever created).
- Limits: total bytes written (``max_bytes``) and number of entries (``max_entries``) — a gzip
  bomb stops at the first byte over the limit, and nothing is read past it. The data of entries
  that are skipped (links, unknown types) counts too: it still has to be inflated. An entry whose
  header promises more than ``max_bytes`` is refused before anything of it is read.
- Headers are read in bounded time and memory: an extended header (pax, GNU long name/link) may
  hold at most 1 MiB (Go's ``archive/tar`` limit), at most 16 of them may precede one entry, pax
  records are parsed in linear time (Python's own parser before 3.11.10 is quadratic on some
  input, CVE-2024-6232), and sparse files are refused (source-controller never writes them).
  Names holding a NUL byte are illegal.
- Errors are :class:`ExtractError` ("failed to extract archive: ..."), names in them cut to 256
  characters; a partial extraction is left for the workspace to remove.

Workspace contract (:class:`Workspace`): every build works in a fresh ``kustomization-<pid>-*``
directory under a prefix the controller owns; the directory is removed when the ``async with``
block exits, whatever happens. :meth:`Workspace.sweep` (at start-up) removes directories left by
processes that no longer run (a crashed controller), never those of a live process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kustomize_controller.kustomize.errors import ExtractError

DEFAULT_MAX_EXTRACT_BYTES = 1 << 30
DEFAULT_MAX_ENTRIES = 100_000
MAX_EXTENDED_HEADER = 1 << 20
MAX_EXTENDED_HEADERS = 16
_CHUNK = 1 << 20
_NAME_SHOWN = 256
_EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
             tarfile.SOLARIS_XHDTYPE)
_PAX = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)
# kustomization-<pid>-<start>-XXXX; <start> (the process's start time) may be absent (older runs, no /proc)
_DIR_RE = re.compile(r"^kustomization-(\d+)-(?:(\d+)-)?")


def _shown(name: str) -> str:
    return name if len(name) <= _NAME_SHOWN else f"{name[:_NAME_SHOWN]}... ({len(name)} characters)"


def _safe_name(name: str) -> PurePosixPath:
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", name):
        raise ExtractError(f"failed to extract archive: absolute path in archive: '{_shown(name)}'")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or "\x00" in name:
        raise ExtractError(f"failed to extract archive: illegal path in archive: '{_shown(name)}'")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def _pax_records(data: bytes) -> dict[bytes, bytes]:
    """``"<length> <keyword>=<value>\\n"`` records, in one pass (linear in ``len(data)``)."""
    records: dict[bytes, bytes] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b" ", pos, pos + 20)
        digits = data[pos:space]
        if space < 0 or not digits.isdigit():
            raise ExtractError("failed to extract archive: invalid pax header: bad record length")
        end = pos + int(digits)
        record = data[space + 1 : end]
        keyword, eq, value = record.partition(b"=")
        if end > len(data) or end <= space or not eq or not keyword or not record.endswith(b"\n"):
            raise ExtractError("failed to extract archive: invalid pax header: malformed record")
        records[keyword] = value[:-1]
        pos = end
    return records


class _SafeTarInfo(tarfile.TarInfo):
    """Headers read within the bounds of the module contract. ``_proc_member`` is tarfile's hook for a
    TarInfo subclass ("subclass to add custom _proc_*() methods"); only pax parsing is our own."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        assert isinstance(tar, _SafeTarFile)
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise ExtractError(f"failed to extract archive: sparse file in archive: '{_shown(self.name)}'")
        if self.type not in _EXTENDED:
            return self._proc_builtin_member(tar)
        if self.size > MAX_EXTENDED_HEADER:
            raise ExtractError(
                f"failed to extract archive: extended header of {self.size} bytes exceeds the limit of "
                f"{MAX_EXTENDED_HEADER} bytes"
            )
        if tar.extended_depth >= MAX_EXTENDED_HEADERS:
            raise ExtractError(f"failed to extract archive: more than {MAX_EXTENDED_HEADERS} extended headers "
                               "before one entry")
        tar.extended_depth += 1
        tar.consumed += self.size
        try:
            if self.type in _PAX:
                return self._proc_safe_pax(tar)
            return self._proc_builtin_member(tar)
        finally:
            tar.extended_depth -= 1

    def _proc_builtin_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        member: tarfile.TarInfo = super()._proc_member(tar)  # type: ignore[misc]
        return member

    def _proc_safe_pax(self, tar: _SafeTarFile) -> tarfile.TarInfo:
        buf = tar.fileobj.read(self._block(self.size))  # type: ignore[attr-defined]
        records = _pax_records(buf[: self.size])
        if any(k.startswith(b"GNU.sparse.") for k in records):
            raise ExtractError("failed to extract archive: sparse file in archive")
        binary = records.get(b"hdrcharset", tar.pax_headers.get("hdrcharset", "").encode()) == b"BINARY"
        decoded = {
            k.decode("utf-8", "surrogateescape"): v.decode(
                tar.encoding if binary and k in (b"path", b"linkpath", b"uname", b"gname") else "utf-8",
                "surrogateescape",
            )
            for k, v in records.items()
        }
        if self.type == tarfile.XGLTYPE:
            tar.pax_headers = {**tar.pax_headers, **decoded}  # applied to every following entry by tarfile
            return self.fromtarfile(tar)
        headers = {**tar.pax_headers, **decoded}
        try:
            following = self.fromtarfile(tar)
        except tarfile.HeaderError as err:
            raise tarfile.ReadError(str(err)) from None
        following._apply_pax_info(headers, tar.encoding, tar.errors)  # type: ignore[attr-defined]
        following.offset = self.offset
        if "size" in headers:  # the data of the entry starts where it did; its length changed
            offset = following.offset_data
            if following.isreg() or following.type not in tarfile.SUPPORTED_TYPES:
                offset += following._block(following.size)  # type: ignore[attr-defined]
            tar.offset = offset
        return following


class _SafeTarFile(tarfile.TarFile):
    tarinfo = _SafeTarInfo
    extended_depth = 0  # extended headers being processed before the entry they describe
    consumed = 0  # bytes of extended headers read


@dataclass(frozen=True, slots=True)
class Extracted:
    files: int  # regular files written
    bytes: int  # their bytes


def extract_tarball(
    archive: Path,
    dest: Path,
    *,
    max_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> int:
    """Extract ``archive`` (gzip tar) into the existing directory ``dest``; return files written."""
    return extract_tree(archive, dest, max_bytes=max_bytes, max_entries=max_entries).files


def extract_tree(
    archive: Path,
    dest: Path,
    *,
    max_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> Extracted:
    """:func:`extract_tarball`, telling the files and bytes written (the artifact cache's size, without
    walking the tree again).

    The archive is decompressed by :mod:`gzip` and read by :mod:`tarfile` as a plain stream (tarfile's
    own ``r|gz`` keeps its decompressed buffer as one bytes object and copies what is left of it on every
    read, once per 512-byte header, and raises TypeError on a truncated gzip header); reading through
    ``GzipFile`` halves the Python CPU of extracting 5,000 small files. Each file is written with
    ``os.write`` from the member's bytes (no buffered file object per file)."""
    written = 0  # what counts against max_bytes: the files' bytes and skipped entries' data
    stored = 0  # the files' bytes
    entries = 0
    files = 0
    made = {dest}  # directories known to exist: a mkdir is a syscall (~0.1 ms on a VM's disk) per file
    too_much = f"failed to extract archive: extracted size exceeds the limit of {max_bytes} bytes"
    try:
        with gzip.open(archive, "rb") as gz, _SafeTarFile.open(fileobj=gz, mode="r|") as tar:
            assert isinstance(tar, _SafeTarFile)
            for member in tar:
                entries += 1
                if entries > max_entries:
                    raise ExtractError(
                        f"failed to extract archive: more than {max_entries} entries in archive"
                    )
                rel = _safe_name(member.name)
                if member.size > max_bytes:
                    raise ExtractError(f"{too_much} (entry '{_shown(member.name)}' declares {member.size} bytes)")
                if tar.consumed > max_bytes:
                    raise ExtractError(too_much)
                if member.issym() or member.islnk():
                    continue
                if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
                    raise ExtractError(
                        f"failed to extract archive: device or fifo entry in archive: '{_shown(member.name)}'"
                    )
                target = dest.joinpath(*rel.parts) if rel.parts else dest
                if member.isdir():
                    if target not in made:
                        target.mkdir(parents=True, exist_ok=True)
                        made.add(target)
                    continue
                if not member.isfile():
                    if member.type not in tarfile.SUPPORTED_TYPES:  # its data is read to be skipped
                        written += member.size
                        if written > max_bytes:
                            raise ExtractError(too_much)
                    continue
                if target.parent not in made:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    made.add(target.parent)
                src = tar.extractfile(member)
                if src is None:
                    continue
                mode = 0o755 if member.mode & 0o111 else 0o644
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
                try:
                    while chunk := src.read(_CHUNK):
                        written += len(chunk)
                        stored += len(chunk)
                        if written > max_bytes:
                            raise ExtractError(too_much)
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view):]
                finally:
                    os.close(fd)
                files += 1
    except ExtractError:
        raise
    except (tarfile.TarError, zlib.error, EOFError, OSError, ValueError) as err:
        # ValueError: what tarfile's header decoding may still raise on a corrupt archive
        raise ExtractError(f"failed to extract archive: {_shown(str(err))}") from err
    return Extracted(files=files, bytes=stored)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot, ``/proc/<pid>/stat`` field 22): a pid alone
    does not tell a crashed run from this one in a container, where the controller is always pid 1."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rpartition(")")[2].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owner_running(pid: int, started: str | None) -> bool:
    if not _pid_alive(pid):
        return False
    return started is None or _start_time(pid) in (None, int(started))


class Workspace:
    """Owner of the temp directories builds run in (``<base>/kustomization-<pid>-<start>-XXXX``)."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = base or Path(tempfile.gettempdir()) / "kustomize-controller"
        self._resolved: Path | None = None
        started = _start_time(os.getpid())
        self._prefix = f"kustomization-{os.getpid()}-" + (f"{started}-" if started is not None else "")

    def _ensure_base(self) -> Path:
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        return Path(os.path.realpath(self.base))

    def sweep(self) -> list[Path]:
        """Remove directories of processes that are gone (a pid now held by another process, e.g. pid 1
        of a restarted container, counts as gone); return what was removed."""
        removed: list[Path] = []
        if not self.base.is_dir():
            return removed
        for entry in self.base.iterdir():
            m = _DIR_RE.match(entry.name)
            if not m or _owner_running(int(m.group(1)), m.group(2)):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
        return removed

    def create(self) -> Path:
        prefix = self._prefix
        if self._resolved is not None:
            try:
                return Path(tempfile.mkdtemp(prefix=prefix, dir=self._resolved))
            except FileNotFoundError:
                pass  # the base was removed under us (a /tmp cleaner): create it again
        self._resolved = self._ensure_base()
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self._resolved))

    @contextlib.asynccontextmanager
    async def tempdir(self) -> AsyncIterator[Path]:
        """A fresh directory, removed on exit. Creation and removal run in a worker thread: removing
        a checkout is a burst of unlink/rmdir syscalls that would otherwise stall the event loop."""
        path = await asyncio.to_thread(self.create)
        try:
            yield path
        finally:
            await asyncio.to_thread(shutil.rmtree, path, ignore_errors=True)
