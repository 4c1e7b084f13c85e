"""One download per artifact: extracted source trees shared by every build that uses them.

Contract:

- An artifact is identified by ``(url, digest)``. :meth:`ArtifactCache.acquire` yields the root of
  its extracted tree; the first caller downloads (``ArtifactFetcher``: retries, digest check, size
  cap) and extracts it (``extract_tarball``: limits, escape checks) exactly as an uncached checkout
  does. Callers arriving while that runs wait for it (single flight) and receive the same outcome:
  the tree, or an error of the same type and message. A loader that is cancelled hands the work
  to the next waiter instead of failing it.
- The tree is **never written** after extraction: builds read it through :mod:`.reach`, which places
  what a build can read into the build's own temp dir (copies when the build decrypts there; hard links
  when nothing but the generated kustomization, a new file, is written there), or through the
  wrappers of a build in parts (:mod:`.split`), which only read. Nothing a build generates, overlays
  or decrypts can reach the shared tree or another build.
- Trees live under one ``kustomization-<pid>-*`` directory of the :class:`~.extract.Workspace`, so
  a crashed controller's cache is removed by ``Workspace.sweep()`` at the next start, with the temp
  dirs; :meth:`close` removes it on shutdown.
- Size bound: when the extracted bytes exceed ``max_bytes``, least recently used trees that no build
  holds are removed. A tree in use is never removed, so the bound can be exceeded while builds hold
  more than it (a single artifact larger than the bound is extracted, used, and dropped at release).
  ``max_bytes=0`` keeps nothing once unused: concurrent builds still share one download.
- A failed download or extraction leaves nothing behind; the next acquire tries again. A tree
  removed from disk by someone else is noticed at the next acquire and extracted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.errors import KustomizeError
from kustomize_controller.kustomize.extract import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_EXTRACT_BYTES,
    Workspace,
    extract_tree,
)
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.settle import run_to_end

DEFAULT_CACHE_MAX_BYTES = 256 << 20


@dataclass(eq=False)
class _Entry:
    name: str
    root: Path | None = None  # set once extracted
    size: int = 0
    users: int = 0
    loading: asyncio.Future[BaseException | None] | None = None


def _unpack(archive: Path, target: Path, *, max_bytes: int, max_entries: int) -> int:
    """Extract ``archive`` into the new directory ``target`` and return its size (the bytes of its files);
    the archive is removed whatever happens, and so is ``target`` when extraction fails."""
    try:
        target.mkdir()
        return extract_tree(archive, target, max_bytes=max_bytes, max_entries=max_entries).bytes
    except BaseException:
        shutil.rmtree(target, True)
        raise
    finally:
        archive.unlink(missing_ok=True)


async def _discard_unpacked(unpack: asyncio.Future[int], target: Path) -> None:
    with contextlib.suppress(Exception):
        await asyncio.shield(unpack)
    await asyncio.to_thread(shutil.rmtree, target, True)


def _copy_error(err: BaseException) -> BaseException:
    """A fresh exception for each waiter (same type, message and attributes), so tracebacks of
    several waiters do not pile up on one object."""
    if isinstance(err, KustomizeError):
        try:
            return copy.copy(err)
        except Exception:  # an exception type that cannot be rebuilt: share the original
            return err
    return err


class ArtifactCache:
    """Extracted artifacts by ``(url, digest)``; shared by all reconciles of one controller."""

    def __init__(
        self,
        *,
        workspace: Workspace,
        fetcher: ArtifactFetcher,
        max_bytes: int = DEFAULT_CACHE_MAX_BYTES,
        max_extract_bytes: int = DEFAULT_MAX_EXTRACT_BYTES,
        max_extract_entries: int = DEFAULT_MAX_ENTRIES,
        metrics: CacheMetrics | None = None,
    ) -> None:
        self._workspace = workspace
        self._fetcher = fetcher
        self._max_bytes = max_bytes
        self._max_extract_bytes = max_extract_bytes
        self._max_extract_entries = max_extract_entries
        self._metrics = metrics
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._base: Path | None = None
        self._base_lock = asyncio.Lock()  # concurrent first downloads must not each create a base
        self._counter = 0
        self._bytes = 0

    @property
    def bytes(self) -> int:
        """Extracted bytes currently on disk."""
        return self._bytes

    @property
    def directory(self) -> Path | None:
        """The directory holding the trees (None until the first download)."""
        return self._base

    def __len__(self) -> int:
        return sum(1 for e in self._entries.values() if e.root is not None)

    async def _ensure_base(self) -> Path:
        async with self._base_lock:
            if self._base is None or not self._base.is_dir():
                self._base = await asyncio.to_thread(self._workspace.create)
            return self._base

    @contextlib.asynccontextmanager
    async def acquire(self, *, url: str, digest: str) -> AsyncIterator[Path]:
        """The extracted tree of the artifact, held (never evicted) until the block exits."""
        key = (url, digest)
        entry = self._entries.get(key)
        if entry is None:
            self._counter += 1
            entry = _Entry(name=f"a{self._counter}")
            self._entries[key] = entry
        entry.users += 1
        try:
            root = await self._ready(key, entry, url, digest)
            self._entries.move_to_end(key)
            yield root
        finally:
            entry.users -= 1
            if entry.root is None and entry.users == 0 and self._entries.get(key) is entry:
                del self._entries[key]  # failed and nobody waits: leave nothing behind
            await self._evict()

    async def _ready(self, key: tuple[str, str], entry: _Entry, url: str, digest: str) -> Path:
        hit = True
        if entry.root is not None and entry.loading is None and not entry.root.is_dir():
            # Removed under us (a /tmp cleaner): forget it and extract again, never report a
            # missing path for an artifact that is fine.
            entry.root = None
            self._bytes -= entry.size
            self._publish()
        while entry.root is None:
            if entry.loading is not None:
                # Single flight: wait for the loader (shielded: our cancellation must not cancel it).
                failure = await asyncio.shield(entry.loading)
                if failure is not None:
                    raise _copy_error(failure)
                continue  # loaded, or the loader was cancelled: look again (maybe load ourselves)
            hit = False
            entry.loading = asyncio.get_running_loop().create_future()
            outcome: BaseException | None = None
            try:
                await self._load(entry, url, digest)
            except asyncio.CancelledError:
                raise
            except BaseException as err:
                outcome = err
                raise
            finally:
                loading, entry.loading = entry.loading, None
                if not loading.done():
                    loading.set_result(outcome)
        if self._metrics is not None:
            self._metrics.artifact("hit" if hit else "miss")
        assert entry.root is not None
        return entry.root

    async def _load(self, entry: _Entry, url: str, digest: str) -> None:
        base = await self._ensure_base()
        target = base / entry.name
        archive = base / f"{entry.name}.tar.gz"
        try:
            await self._fetcher.fetch(url, digest, archive)
        except BaseException:
            await asyncio.to_thread(archive.unlink, True)
            raise
        # one worker-thread hop for the whole unpacking (each hop costs ~50-200 µs of CPU in wake-ups)
        unpack = asyncio.ensure_future(asyncio.to_thread(
            _unpack, archive, target, max_bytes=self._max_extract_bytes, max_entries=self._max_extract_entries
        ))
        try:
            size = await asyncio.shield(unpack)
        except asyncio.CancelledError:
            # the thread unpacks on regardless: the next loader of this entry reuses its name, so wait
            # for the thread and remove what it made before the cancellation goes on
            await run_to_end(_discard_unpacked(unpack, target))
            raise
        entry.root, entry.size = target, size
        self._bytes += size
        self._publish()

    async def _evict(self) -> None:
        while self._bytes > self._max_bytes:
            victim = next(
                ((k, e) for k, e in self._entries.items() if e.root is not None and e.users == 0), None
            )
            if victim is None:
                return
            key, entry = victim
            del self._entries[key]
            root, entry.root = entry.root, None
            assert root is not None
            self._bytes -= entry.size
            self._publish()
            await asyncio.to_thread(shutil.rmtree, root, True)

    def _publish(self) -> None:
        if self._metrics is not None:
            self._metrics.set_artifact_bytes(self._bytes)

    async def close(self) -> None:
        """Remove every tree (call at shutdown, once no build runs)."""
        self._entries.clear()
        self._bytes = 0
        self._publish()
        if self._base is not None:
            await asyncio.to_thread(shutil.rmtree, self._base, True)
            self._base = None
