"""Rendered objects by build inputs: a build whose inputs did not change is not run again.

Contract:

- :func:`build_key` is a sha256 over everything that shapes a build's output: the content key of
  what kustomize can read (:mod:`.reach`), the spec-derived :class:`~.pipeline.BuildOptions`
  (path, every overlay field, postBuild, commonMetadata, remote bases allowed, strict substitution),
  the variables ``postBuild`` resolved to, the identity of the decryption keys, the builder's
  identity (binary, version, file identity) and :data:`PIPELINE_VERSION` (bump it whenever code on
  this path changes what a build returns). A caller that cannot name one of these does not cache.
- :class:`BuildCache` keeps, per key, the final objects (pickled: exact types survive — YAML
  timestamps and binary values included) and their digest; only successful builds are stored. Each
  :meth:`load` returns fresh objects, so a caller may mutate them (the apply path does).
- Memory is bounded by ``max_bytes`` of serialised objects, least recently used first out; an entry
  larger than the bound is not kept. ``max_bytes=0`` disables the cache. Decrypted Secret data is
  held here like it is held by a reconcile in flight; nothing is written to disk.
- :meth:`load` and :meth:`store` (de)serialise a large entry
  (over :data:`OFF_LOOP_BYTES` serialised, or :data:`OFF_LOOP_OBJECTS` objects) in a worker thread —
  ~3 ms each way for 1,000 objects, which would stall every other reconcile — and a small one in
  place, where a thread hop would cost more than the work. The entry table itself is only touched
  on the loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import pickle
from collections.abc import Mapping
from typing import Any

from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.memo import Memo

PIPELINE_VERSION = "1"
DEFAULT_BUILD_CACHE_MAX_BYTES = 16 << 20
_ENTRY_OVERHEAD = 256  # the key, the tuple and the dict slot, counted against the bound
OFF_LOOP_BYTES = 64 << 10  # ~250 small objects: ~1 ms to unpickle
OFF_LOOP_OBJECTS = 250


def build_key(
    *,
    content: str,
    options: Any,
    builder: str,
    variables: Mapping[str, str] | None,
    decryption: str | None,
) -> str:
    """The cache key; ``options`` is a (frozen) dataclass, serialised field by field."""
    material = {
        "pipeline": PIPELINE_VERSION,
        "builder": builder,
        "content": content,
        "options": dataclasses.asdict(options),
        "variables": None if variables is None else sorted(variables.items()),
        "decryption": decryption,
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()


class BuildCache:
    """Last successful builds by key (see module docstring); shared by all reconciles."""

    def __init__(self, *, max_bytes: int = DEFAULT_BUILD_CACHE_MAX_BYTES, metrics: CacheMetrics | None = None) -> None:
        self._max_bytes = max_bytes
        self._metrics = metrics
        self._entries: Memo[str, tuple[bytes, str]] = Memo(
            max_bytes=max_bytes, size=lambda _key, entry: len(entry[0]) + _ENTRY_OVERHEAD)

    @property
    def enabled(self) -> bool:
        return self._max_bytes > 0

    @property
    def bytes(self) -> int:
        return self._entries.bytes

    def __len__(self) -> int:
        return len(self._entries)

    async def load(self, key: str) -> tuple[list[dict[str, Any]], str] | None:
        """``(objects, digest)`` of the build stored under ``key`` (fresh objects), or None; a large
        entry is unpickled in a worker thread."""
        found = self._entries.get(key)
        if found is None:
            return None
        blob, digest = found
        objects = await asyncio.to_thread(_loads, blob) if len(blob) > OFF_LOOP_BYTES else _loads(blob)
        return objects, digest

    async def store(self, key: str, objects: list[dict[str, Any]], digest: str) -> None:
        """Keep ``objects`` and ``digest`` under ``key``; a large build is pickled in a worker thread (the
        caller must not change ``objects`` until this returns)."""
        if not self.enabled:
            return
        blob = await asyncio.to_thread(_dumps, objects) if len(objects) > OFF_LOOP_OBJECTS else _dumps(objects)
        self._entries.put(key, (blob, digest))
        if self._metrics is not None:
            self._metrics.set_build_bytes(self._entries.bytes)

    def record(self, result: str) -> None:
        """Count a lookup: ``hit``, ``miss`` or ``bypass``."""
        if self._metrics is not None:
            self._metrics.build(result)


def _dumps(objects: list[dict[str, Any]]) -> bytes:
    return pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(blob: bytes) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = pickle.loads(blob)  # our own bytes, never external
    return objects
