from typing import Any

import pytest

from kustomize_controller.reconcile.ordering import CircularDependencyError, ObjectKey
from kustomize_controller.reconcile.watches import (
    config_map_index_keys,
    config_update_passes,
    kustomization_update_passes,
    requests_for_config,
    requests_for_source,
    secret_index_keys,
    source_index_key,
    source_update_passes,
)


def ks(name: str, *, gen: int = 1, annotations: dict[str, str] | None = None, source: dict[str, Any] | None = None,
       deps: list[str] | None = None, status: dict[str, Any] | None = None, spec: dict[str, Any] | None = None,
       labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "apps", "generation": gen, "annotations": annotations or {},
                     "labels": labels or {}},
        "spec": {"sourceRef": source or {"kind": "GitRepository", "name": "repo"},
                 "dependsOn": [{"name": d} for d in deps or []], **(spec or {})},
        "status": status or {},
    }


def ready(revision: str, cond: str = "Ready") -> dict[str, Any]:
    return {"lastAttemptedRevision": revision, "conditions": [{"type": cond, "status": "True"}]}


def test_kustomization_predicate() -> None:
    base = ks("a")
    assert not kustomization_update_passes(base, ks("a", labels={"x": "y"}))
    assert not kustomization_update_passes(base, ks("a", status={"lastAttemptedRevision": "r"}))
    assert kustomization_update_passes(base, ks("a", gen=2))
    assert kustomization_update_passes(base, ks("a", annotations={"reconcile.fluxcd.io/requestedAt": "now"}))
    deleting = ks("a")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert kustomization_update_passes(base, deleting)


def test_source_index_key_defaults_namespace_and_filters_kind() -> None:
    assert source_index_key(ks("a"), "GitRepository") == "apps/repo"
    assert source_index_key(ks("a"), "OCIRepository") is None
    other = ks("a", source={"kind": "Bucket", "name": "b", "namespace": "flux-system"})
    assert source_index_key(other, "Bucket") == "flux-system/b"


def src(revision: str | None) -> dict[str, Any]:
    return {"status": {"artifact": {"revision": revision}} if revision is not None else {}}


def test_source_predicate() -> None:
    assert source_update_passes(src(None), src("r1"))
    assert source_update_passes(src("r1"), src("r2"))
    assert not source_update_passes(src("r1"), src("r1"))
    assert not source_update_passes(src("r1"), src(None))
    assert not source_update_passes(src(None), src(None))


def test_source_mapping_skips_already_attempted_and_sorts() -> None:
    items = [
        ks("app", deps=["infra"], status=ready("r1")),
        ks("infra", status=ready("r2")),
        ks("busy", status=ready("r2", cond="Reconciling")),
        ks("failed", status={"lastAttemptedRevision": "r2", "conditions": [{"type": "Ready", "status": "False"}]}),
    ]
    assert [str(k) for k in requests_for_source(src("r2"), items)] == ["apps/infra", "apps/app", "apps/failed"]
    assert requests_for_source(src(None), items) == []


def test_source_mapping_cycle_raises() -> None:
    with pytest.raises(CircularDependencyError):
        requests_for_source(src("r"), [ks("a", deps=["b"]), ks("b", deps=["a"])])


def test_config_indexes_and_mapping() -> None:
    spec = {
        "kubeConfig": {"secretRef": {"name": "kc"}},
        "decryption": {"provider": "sops", "secretRef": {"name": "sops-keys"}},
        "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"},
                                         {"kind": "Secret", "name": "secret-vars", "optional": True}]},
    }
    obj = ks("a", spec=spec)
    assert config_map_index_keys(obj) == ["apps/vars"]
    assert secret_index_keys(obj) == ["apps/sops-keys", "apps/kc", "apps/secret-vars"]
    assert config_map_index_keys(ks("b", spec={"kubeConfig": {"configMapRef": {"name": "wi"}}})) == ["apps/wi"]
    assert [str(k) for k in requests_for_config([ks("x", deps=["y"]), ks("y")])] == ["apps/y", "apps/x"]
    assert config_update_passes({"metadata": {"resourceVersion": "1"}}, {"metadata": {"resourceVersion": "2"}})
    assert not config_update_passes({"metadata": {"resourceVersion": "1"}}, {"metadata": {"resourceVersion": "1"}})


def test_drift_detection_annotation_change_enqueues() -> None:
    key = "kustomize.toolkit.fluxcd.io/drift-detection"
    warn = ks("a", annotations={key: "warn"})
    assert kustomization_update_passes(ks("a"), warn)
    assert kustomization_update_passes(warn, ks("a", annotations={key: "enabled"}))
    assert not kustomization_update_passes(warn, ks("a", annotations={key: "warn", "other": "x"}))


@pytest.mark.parametrize("key", ["kustomize.toolkit.fluxcd.io/approval", "kustomize.toolkit.fluxcd.io/approved-plan",
                                 "kustomize.toolkit.fluxcd.io/sync-windows"])
def test_change_management_annotation_changes_enqueue(key: str) -> None:
    before = ks("a", annotations={key: "one"})
    assert kustomization_update_passes(ks("a"), before)
    assert kustomization_update_passes(before, ks("a", annotations={key: "two"}))
    assert not kustomization_update_passes(before, ks("a", annotations={key: "one", "other": "x"}))


def test_dependencies_in_other_namespaces_come_first_and_nameless_entries_are_passed_over() -> None:
    app = ks("app", spec={"dependsOn": [{"name": "base", "namespace": "infra"}, {"namespace": "infra"}]})
    base = {**ks("base"), "metadata": {"name": "base", "namespace": "infra"},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "repo"}, "dependsOn": [{"name": "core"}]}}
    assert requests_for_config([app, base]) == [
        ObjectKey("infra", "core"), ObjectKey("infra", "base"), ObjectKey("apps", "app")]
