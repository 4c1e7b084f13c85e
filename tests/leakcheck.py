"""Leaving a cluster as it was found: which test left which cluster-scoped object behind.

The ``cluster`` fixture takes a snapshot of the cluster-scoped kinds tests create (``TRACKED``: namespaces,
CRDs, ClusterRoles, ClusterRoleBindings, PriorityClasses, StorageClasses) when a test starts, and another
once the test and its teardown are done and the test namespace is deleted. What is new, and the test
namespace, is the test's:

- on the embedded server deletion is synchronous, so what is still there is a leak at once: the test's
  teardown fails, naming it (``raise_if_left``). Tests that called ``cluster.require_server()`` are
  exempt: they never run on a real cluster, and their server goes away with them;
- on a real cluster a namespace controller takes seconds, so the names go to the session's
  ``LeakTracker``; at the session's end (after the CRDs the session installed were deleted) it waits up
  to ``WAIT_SECONDS`` for all of them to be gone, then fails naming each one left with the test that made
  it and what holds it (a namespace's ``NamespaceContentRemaining``/``NamespaceFinalizersRemaining``
  conditions, a CRD's ``Terminating`` condition).

Cost: the embedded server is read in process (no requests); a real cluster gets one metadata-only list
per tracked kind per snapshot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import ClusterHandle

# (apiVersion, plural, kind)
TRACKED: tuple[tuple[str, str, str], ...] = (
    ("v1", "namespaces", "Namespace"),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding"),
    ("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass"),
    ("storage.k8s.io/v1", "storageclasses", "StorageClass"),
)
WAIT_SECONDS = 60.0  # within pytest-timeout (120 s), which counts the last test's teardown
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
# conditions that say why a namespace or a CRD is not gone yet
HOLDING_CONDITIONS = ("NamespaceContentRemaining", "NamespaceFinalizersRemaining", "NamespaceDeletionContentFailure",
                      "Terminating")

Ref = tuple[str, str]  # (kind, name)


def _path(api_version: str, plural: str, name: str = "") -> str:
    base = f"/api/{api_version}/{plural}" if api_version == "v1" else f"/apis/{api_version}/{plural}"
    return f"{base}/{name}" if name else base


async def snapshot(handle: ClusterHandle) -> set[Ref]:
    """Every object of the tracked kinds, as (kind, name)."""
    if handle.server is not None:
        return {(kind, name) for api_version, _, kind in TRACKED
                for name in handle.server.object_names(api_version, kind)}
    refs: set[Ref] = set()
    async with handle.session(headers={"Accept": METADATA_ONLY}) as http:
        for api_version, plural, kind in TRACKED:
            async with http.get(_path(api_version, plural)) as resp:
                if resp.status == 404:  # a kind this cluster does not serve
                    continue
                resp.raise_for_status()
                body = await resp.json()
            refs.update((kind, str(item["metadata"]["name"])) for item in body.get("items") or [])
    return refs


async def describe(handle: ClusterHandle, refs: Iterable[Ref]) -> list[str]:
    """``Kind/name (Terminating: what holds it)`` for each object still there."""
    paths = {kind: (api_version, plural) for api_version, plural, kind in TRACKED}
    lines = []
    async with handle.session() as http:
        for kind, name in sorted(refs):
            async with http.get(_path(*paths[kind], name)) as resp:
                if resp.status == 404:
                    continue
                obj: dict[str, Any] = await resp.json()
            state = "Terminating" if obj["metadata"].get("deletionTimestamp") else "never deleted"
            holds = [str(c.get("message") or c.get("reason")) for c in (obj.get("status") or {}).get("conditions") or []
                     if c.get("type") in HOLDING_CONDITIONS and c.get("status") == "True"]
            finalizers = obj["metadata"].get("finalizers") or []
            if finalizers:
                holds.append(f"finalizers {finalizers}")
            if handle.server is not None and kind == "Namespace":
                holds += [f"held by {held}" for held in handle.server.finalized_objects(name)]
            lines.append(f"{kind}/{name} ({state}{': ' + '; '.join(holds) if holds else ''})")
    return lines


async def raise_if_left(handle: ClusterHandle, test: str, before: set[Ref]) -> None:
    """Embedded server: fail now if the test left anything (module docstring)."""
    left = (await snapshot(handle)) - (before - {("Namespace", handle.namespace)})
    if left:
        lines = await describe(handle, left)
        raise AssertionError(f"{test} left behind (it must remove what it creates, also when it fails half-way):\n"
                             + "\n".join(f"  {line}" for line in lines))


@dataclass
class LeakTracker:
    """The session's record of what each test created on a real cluster (module docstring)."""

    created: dict[Ref, str] = field(default_factory=dict)  # (kind, name) -> creator

    def record(self, creator: str, refs: Iterable[Ref]) -> None:
        for ref in refs:
            self.created.setdefault(ref, creator)

    async def leftovers(self, handle: ClusterHandle, wait: float = WAIT_SECONDS) -> list[str]:
        """What is still there after up to ``wait`` seconds, one line per object with its creator."""
        deadline = time.monotonic() + wait
        remaining = set(self.created)
        while remaining:
            remaining &= await snapshot(handle)
            if not remaining or time.monotonic() >= deadline:
                break
            await asyncio.sleep(1.0)
        lines = await describe(handle, remaining)
        creators = {f"{kind}/{name}": self.created[(kind, name)] for kind, name in remaining}
        return [f"{line}, left by {creators[line.split(' ', 1)[0]]}" for line in lines]
