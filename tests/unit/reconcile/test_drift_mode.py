"""drift-detection: the mode annotation, the record of what was last applied, the warn policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kustomize_controller.api.drift import DRIFT_DETECTION_ANNOTATION, DriftMode, InvalidDriftModeError, drift_mode
from kustomize_controller.api.meta import Snapshot
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.reconcile.drift_mode import (
    AppliedRecords,
    WarnPolicy,
    desired_fingerprint,
    last_applied_digest,
    next_record,
)
from kustomize_controller.reconcile.history import upsert

T = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def cm(name: str, value: str = "v") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"},
            "data": {"key": value}}


def ref(name: str) -> ObjRef:
    return ObjRef.from_object(cm(name))


@pytest.mark.parametrize(
    ("annotations", "mode"),
    [({}, DriftMode.ENABLED), ({DRIFT_DETECTION_ANNOTATION: "warn"}, DriftMode.WARN),
     ({DRIFT_DETECTION_ANNOTATION: " Warn "}, DriftMode.WARN),
     ({DRIFT_DETECTION_ANNOTATION: "enabled"}, DriftMode.ENABLED)],
)
def test_mode(annotations: dict[str, str], mode: DriftMode) -> None:
    assert drift_mode(annotations) is mode


@pytest.mark.parametrize("value", ["", "disabled", "off", "true"])
def test_unknown_mode_is_an_error_not_a_fallback(value: str) -> None:
    with pytest.raises(InvalidDriftModeError, match="expected 'enabled' or 'warn'"):
        drift_mode({DRIFT_DETECTION_ANNOTATION: value})


def history(*entries: tuple[str, str]) -> list[Snapshot]:
    out: list[Snapshot] = []
    for i, (digest, status) in enumerate(entries):
        upsert(out, digest=digest, now=T + timedelta(minutes=i), duration=1.0, status=status,
               metadata={})
    return out


def test_last_applied_digest_is_the_latest_entry_when_it_applied_everything() -> None:
    assert last_applied_digest([]) is None
    assert last_applied_digest(history(("a", "ReconciliationSucceeded"))) == "a"
    assert last_applied_digest(history(("a", "ReconciliationSucceeded"), ("b", "HealthCheckFailed"))) == "b"
    assert last_applied_digest(history(("a", "ReconciliationSucceeded"), ("b", "PruneFailed"))) == "b"
    # a half-applied build: objects may carry its desired state, the digest proves nothing
    assert last_applied_digest(history(("a", "ReconciliationSucceeded"), ("b", "ReconciliationFailed"))) is None
    # the latest, not an older success
    assert last_applied_digest(history(("a", "ReconciliationSucceeded"), ("b", "ReconciliationSucceeded"),
                                       ("a", "ReconciliationSucceeded"))) == "a"


def test_policy_prefers_the_per_object_record() -> None:
    known = {ref("a"): desired_fingerprint(cm("a")), ref("b"): desired_fingerprint(cm("b", "old"))}
    for build_unchanged in (False, True):
        policy = WarnPolicy(known=known, build_unchanged=build_unchanged)
        assert policy.unchanged(ref("a"), cm("a"))
        assert not policy.unchanged(ref("b"), cm("b"))  # its desired state moved: apply it
        # no record (e.g. after a restart): the build digest decides
        assert policy.unchanged(ref("c"), cm("c")) is build_unchanged


def test_fingerprint_is_order_independent_and_value_sensitive() -> None:
    a = cm("a")
    b = {"data": {"key": "v"}, "metadata": {"namespace": "ns", "name": "a"}, "kind": "ConfigMap", "apiVersion": "v1"}
    assert desired_fingerprint(a) == desired_fingerprint(b)
    assert desired_fingerprint(a) != desired_fingerprint(cm("a", "w"))


def test_next_record_after_success_and_after_a_failed_apply() -> None:
    previous = {ref("a"): b"old-a", ref("b"): b"old-b", ref("gone"): b"x"}
    objects = [cm("a", "new"), cm("b", "new")]
    assert next_record(previous, objects) == {ref("a"): desired_fingerprint(objects[0]),
                                              ref("b"): desired_fingerprint(objects[1])}
    # failed half way: only what was written moves; the rest keeps what was applied before
    assert next_record(previous, objects, written=[ref("a")]) == {
        ref("a"): desired_fingerprint(objects[0]), ref("b"): b"old-b", ref("gone"): b"x"}


def test_records_are_bounded_and_copied() -> None:
    records = AppliedRecords(max_kustomizations=2)
    records.put("k1", {ref("a"): b"1"})
    records.put("k2", {ref("a"): b"2"})
    records.get("k1")  # k1 is now the most recent
    records.put("k3", {ref("a"): b"3"})
    assert records.get("k2") == {}
    assert records.get("k1") == {ref("a"): b"1"}
    got = records.get("k3")
    got.clear()
    assert records.get("k3") == {ref("a"): b"3"}
    records.forget("k3")
    assert records.get("k3") == {}


def test_without_memory_or_digest_the_managed_fields_decide() -> None:
    def obj(value: str, managers: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        out = cm("a", value)
        out["metadata"]["managedFields"] = [{"manager": m, "operation": "Apply" if m == "kustomize-controller"
                                             else "Update", "fieldsV1": f} for m, f in managers]
        return out

    ours = {"f:data": {"f:key": {}}}
    policy = WarnPolicy(known={}, build_unchanged=False)
    # kubectl took data.key: the desired value is still the one we applied
    live = obj("hot", [("kustomize-controller", {}), ("kubectl-edit", ours)])
    assert policy.unchanged(ref("a"), cm("a"), live=live, dry_run=obj("v", [("kustomize-controller", ours)]))
    # we still own data.key and the desired value differs: a change
    live = obj("v", [("kustomize-controller", ours)])
    assert not policy.unchanged(ref("a"), cm("a", "w"), live=live, dry_run=obj("w", [("kustomize-controller", ours)]))
    # nothing to read: not provable
    assert not policy.unchanged(ref("a"), cm("a"), live=None, dry_run=None)
