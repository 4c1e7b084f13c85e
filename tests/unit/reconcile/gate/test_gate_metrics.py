"""gotk_plan_pending follows the hold's reason; the gates' condition series go with their conditions."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from kustomize_controller.reconcile.metrics import GotkMetrics

ME = {"kind": "Kustomization", "name": "web", "namespace": "apps"}


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {**ME, **labels})


def test_pending_gauge_follows_the_reason_and_goes_away() -> None:
    registry = CollectorRegistry()
    gotk = GotkMetrics(registry)
    gotk.record_pending(name="web", namespace="apps", reason="ApprovalRequired")
    assert value(registry, "gotk_plan_pending", reason="ApprovalRequired") == 1.0
    gotk.record_pending(name="web", namespace="apps", reason="SyncWindowClosed")
    assert value(registry, "gotk_plan_pending", reason="ApprovalRequired") is None
    assert value(registry, "gotk_plan_pending", reason="SyncWindowClosed") == 1.0
    gotk.record_pending(name="web", namespace="apps", reason=None)
    assert value(registry, "gotk_plan_pending", reason="SyncWindowClosed") is None
    gotk.record_pending(name="web", namespace="apps", reason="ApprovalRequired")
    gotk.delete(name="web", namespace="apps")
    assert value(registry, "gotk_plan_pending", reason="ApprovalRequired") is None


def test_condition_series_of_a_switched_off_gate_are_removed() -> None:
    registry = CollectorRegistry()
    gotk = GotkMetrics(registry)
    for type_ in ("Ready", "Approved", "SyncAllowed"):
        gotk.record_condition(name="web", namespace="apps", type_=type_, status="True")
    gotk.forget_absent_conditions(name="web", namespace="apps", types=("Approved", "SyncAllowed"),
                                  present={"Ready", "SyncAllowed"})
    assert value(registry, "gotk_reconcile_condition", type="Approved", status="True") is None
    assert value(registry, "gotk_reconcile_condition", type="SyncAllowed", status="True") == 1.0
    assert value(registry, "gotk_reconcile_condition", type="Ready", status="True") == 1.0
