"""The projection the source informers cache (``api.source.cached_source``) keeps every field a reader of
a cached source uses: each reader gives the same answer for the cached object as for the full one."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.api.source import CACHED_SOURCE_FIELDS, SourceKind, cached_source, parse_source
from kustomize_controller.reconcile.source import SourceAccess, get_source, origin_revision
from kustomize_controller.reconcile.watches import requests_for_source, source_index_key, source_update_passes
from kustomize_controller.runtime.informer import _strip
from kustomize_controller.runtime.store import Store, object_key, resource_version

REVISION = "main@sha1:abc"


def full_source(kind: str = "GitRepository", *, revision: str = REVISION, ready: str = "True") -> dict[str, Any]:
    """A source as the API server returns it, with every field source-controller sets."""
    spec = {"interval": "1m", "url": "https://example.com/podinfo", "ref": {"branch": "main"},
            "secretRef": {"name": "git-auth"}, "ignore": "/*\n!/deploy\n", "timeout": "60s"}
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": kind,
        "metadata": {
            "name": "podinfo", "namespace": "flux-system", "uid": "0b7f6c1e", "resourceVersion": "4711",
            "generation": 3, "creationTimestamp": "2024-05-01T09:00:00Z",
            "deletionTimestamp": "2024-05-02T09:00:00Z",
            "labels": {"app.kubernetes.io/name": "podinfo", "sharding.fluxcd.io/key": "shard1"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": spec}),
                            "reconcile.fluxcd.io/requestedAt": "2024-05-01T10:00:00Z"},
            "finalizers": ["finalizers.fluxcd.io"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "1"}],
        },
        "spec": spec,
        "status": {
            "observedGeneration": 3,
            "conditions": [
                {"type": "Ready", "status": ready, "observedGeneration": 3, "reason": "Succeeded",
                 "lastTransitionTime": "2024-05-01T10:00:00Z", "message": f"stored artifact for revision '{revision}'"},
                {"type": "ArtifactInStorage", "status": "True", "observedGeneration": 3, "reason": "Succeeded",
                 "lastTransitionTime": "2024-05-01T10:00:00Z", "message": f"stored artifact for revision '{revision}'"},
            ],
            "artifact": {
                "path": "gitrepository/flux-system/podinfo/abc.tar.gz",
                "url": "http://source-controller.flux-system.svc/gitrepository/flux-system/podinfo/abc.tar.gz",
                "revision": revision,
                "digest": "sha256:" + "0" * 64,
                "lastUpdateTime": "2024-05-01T10:00:00Z",
                "size": 1234,
                "metadata": {"org.opencontainers.image.revision": "v1.0.0@sha1:abc"},
            },
            "url": "http://source-controller.flux-system.svc/gitrepository/flux-system/podinfo/latest.tar.gz",
            "lastHandledReconcileAt": "2024-05-01T10:00:00Z",
            "observedIgnore": "/*\n!/deploy\n",
            "includedArtifacts": [{"revision": "x", "digest": "sha256:" + "1" * 64, "path": "p", "url": "u",
                                   "lastUpdateTime": "2024-05-01T10:00:00Z"}],
        },
    }


def ks(*, attempted: str = "", ready: str = "True") -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "apps", "generation": 1},
        "spec": {"interval": "5m", "path": "./deploy", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "podinfo", "namespace": "flux-system"}},
        "status": {"lastAttemptedRevision": attempted,
                   "conditions": [{"type": "Ready", "status": ready, "reason": "x", "message": "",
                                   "lastTransitionTime": "2024-05-01T10:00:00Z"}]},
    }


class _Reader:
    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    def reads_cache(self, kind: str) -> bool:
        return True

    async def get_source(self, *, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.obj


def test_projection_keeps_exactly_the_listed_fields_and_copies_nothing_it_keeps() -> None:
    full = full_source()
    before = copy.deepcopy(full)
    cached = cached_source(full)
    assert full == before  # the decoded object is not changed
    assert set(cached) == set(CACHED_SOURCE_FIELDS)
    for key, sub in CACHED_SOURCE_FIELDS.items():
        if sub is None:
            assert cached[key] == full[key]
        else:
            assert cached[key] == {k: v for k, v in full[key].items() if k in sub}
    assert cached["status"]["artifact"] is full["status"]["artifact"]  # values are shared, not copied
    assert cached_source({"kind": "Bucket", "metadata": {"name": "b"}}) == {"kind": "Bucket", "metadata": {"name": "b"}}


@pytest.mark.parametrize("kind", [k.value for k in SourceKind])
async def test_the_reconciler_reads_the_same_source_from_the_projection(kind: str) -> None:
    kustomization = parse_kustomization(ks())
    full, cached = full_source(kind), _strip(full_source(kind), cached_source)
    access = SourceAccess(allow_external_artifact=True)
    whole = await get_source(kustomization, reader=_Reader(full), access=access)
    trimmed = await get_source(kustomization, reader=_Reader(cached), access=access)
    assert trimmed.get_artifact() == whole.get_artifact() is not None
    assert origin_revision(trimmed) == origin_revision(whole) == "v1.0.0@sha1:abc"
    assert trimmed.ref() == whole.ref() == f"{kind}/flux-system/podinfo"
    # the reconciler goes by the artifact, never by the source's conditions: they are not cached
    assert whole.is_ready() and trimmed.status.conditions == []
    assert trimmed.status.observed_generation == whole.status.observed_generation
    for field in ("name", "namespace", "uid", "resource_version", "generation", "deletion_timestamp"):
        assert getattr(trimmed.metadata, field) == getattr(whole.metadata, field), field
    assert parse_source(cached).kind == kind


def test_the_watches_and_the_store_read_the_same_from_the_projection() -> None:
    old_full, new_full = full_source(revision="main@sha1:abc"), full_source(revision="main@sha1:def")
    old, new = cached_source(old_full), cached_source(new_full)
    assert object_key(new) == object_key(new_full) == "flux-system/podinfo"
    assert resource_version(new) == resource_version(new_full) == "4711"
    assert source_update_passes(old, new) == source_update_passes(old_full, new_full) is True
    assert source_update_passes(new, new) == source_update_passes(new_full, new_full) is False
    no_artifact = full_source()
    del no_artifact["status"]["artifact"]
    assert source_update_passes(old, cached_source(no_artifact)) is False
    kustomizations = [ks(attempted="main@sha1:abc"), ks(attempted="main@sha1:old")]
    assert source_index_key(kustomizations[0], "GitRepository") == object_key(new)
    assert requests_for_source(new, kustomizations) == requests_for_source(new_full, kustomizations)
    assert requests_for_source(old, kustomizations) == requests_for_source(old_full, kustomizations)
    store = Store()
    store.upsert(_strip(full_source(), cached_source))
    assert store.get("flux-system/podinfo") == cached_source(full_source())
