from __future__ import annotations

from typing import Any

from kustomize_controller.apply.takeover import (
    CleanupOptions,
    FieldManagerRule,
    cleanup_patch,
    managed_fields_takeover,
    merge_fields,
    takeover_rules,
)


def mf(manager: str, operation: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"manager": manager, "operation": operation, "apiVersion": "v1", "fieldsV1": fields, **extra}


def live(managed: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "d", "managedFields": managed, **meta},
    }


DESIRED = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "d"}}


def test_merge_fields_is_a_union() -> None:
    a = {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}
    b: dict[str, Any] = {"f:data": {"f:b": {}}, ".": {}}
    assert merge_fields(a, b) == {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:x": {}}}, ".": {}}
    assert merge_fields(None, b) == b


def test_kubectl_entries_are_merged_into_our_apply_entry() -> None:
    entries = [
        mf("kustomize-controller", "Apply", {"f:data": {"f:a": {}}}),
        mf("kubectl-edit", "Update", {"f:data": {"f:b": {}}}),
        mf("hpa", "Update", {"f:spec": {"f:replicas": {}}}),
        mf("kubectl-client-side-apply", "Update", {"f:data": {"f:c": {}}}),
        mf("kubectl", "Apply", {"f:data": {"f:d": {}}}),
        mf("kubectl", "Update", {"f:status": {}}, subresource="status"),
    ]
    result = managed_fields_takeover(entries, takeover_rules(), manager="kustomize-controller")
    assert result is not None
    assert [(e["manager"], e["operation"]) for e in result] == [
        ("hpa", "Update"),
        ("kubectl", "Update"),  # subresource entries are never taken over
        ("kustomize-controller", "Apply"),
    ]
    assert result[-1]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}, "f:c": {}, "f:d": {}}}


def test_first_matching_entry_becomes_our_apply_entry_when_missing() -> None:
    entries = [mf("before-first-apply", "Update", {"f:data": {"f:a": {}}}), mf("other", "Apply", {"f:x": {}})]
    result = managed_fields_takeover(entries, takeover_rules(), manager="kustomize-controller")
    assert result == [
        mf("other", "Apply", {"f:x": {}}),
        mf("kustomize-controller", "Apply", {"f:data": {"f:a": {}}}),
    ]


def test_legacy_controller_update_and_override_managers() -> None:
    entries = [
        mf("kustomize-controller", "Update", {"f:a": {}}),
        mf("node-fetch", "Update", {"f:b": {}}),
        mf("node-fetcher", "Apply", {"f:c": {}}),  # prefix match, as upstream
        mf("lens", "Update", {"f:d": {}}),
    ]
    result = managed_fields_takeover(
        entries, takeover_rules(override_managers=["node-fetch"]), manager="kustomize-controller"
    )
    assert result is not None
    assert [e["manager"] for e in result] == ["lens", "kustomize-controller"]
    assert result[-1]["fieldsV1"] == {"f:a": {}, "f:b": {}, "f:c": {}}


def test_no_match_no_patch() -> None:
    entries = [mf("kustomize-controller", "Apply", {}), mf("helm", "Update", {})]
    assert managed_fields_takeover(entries, takeover_rules(), manager="kustomize-controller") is None
    assert cleanup_patch(DESIRED, live(entries), CleanupOptions()) == []


def test_exact_rule() -> None:
    rule = FieldManagerRule("kubectl", "Update", exact=True)
    assert rule.matches(mf("kubectl", "Update", {}))
    assert not rule.matches(mf("kubectl-edit", "Update", {}))
    assert not rule.matches(mf("kubectl", "Apply", {}))


def test_cleanup_patch_removes_legacy_metadata_and_replaces_managed_fields() -> None:
    obj = live(
        [mf("kubectl-edit", "Update", {"f:data": {}})],
        annotations={
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "fluxcd.io/sync-checksum": "x",
            "keep": "me",
        },
        labels={"fluxcd.io/sync-gc-mark": "y", "app": "a"},
    )
    patch = cleanup_patch(DESIRED, obj, CleanupOptions())
    assert patch == [
        {"op": "remove", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"},
        {"op": "remove", "path": "/metadata/annotations/fluxcd.io~1sync-checksum"},
        {"op": "remove", "path": "/metadata/labels/fluxcd.io~1sync-gc-mark"},
        {
            "op": "replace",
            "path": "/metadata/managedFields",
            "value": [mf("kustomize-controller", "Apply", {"f:data": {}})],
        },
    ]


def test_merge_mode_on_desired_or_live_skips_cleanup() -> None:
    obj = live([mf("kubectl", "Update", {})], annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    desired = {**DESIRED, "metadata": {"name": "a", "labels": {"kustomize.toolkit.fluxcd.io/ssa": "Merge"}}}
    assert cleanup_patch(desired, obj, CleanupOptions()) == []
    obj["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/ssa"] = "merge"
    assert cleanup_patch(DESIRED, obj, CleanupOptions()) == []


def test_nothing_for_a_new_object() -> None:
    assert cleanup_patch(DESIRED, None, CleanupOptions()) == []
