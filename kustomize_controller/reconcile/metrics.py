"""Flux's per-object metrics (fluxcd/pkg ``runtime/metrics``), on the manager's registry.

- ``gotk_reconcile_duration_seconds{kind,name,namespace}``: histogram of reconcile durations,
  buckets ``ExponentialBucketsRange(0.01, 1800, 10)`` as upstream.
- ``gotk_reconcile_condition{kind,name,namespace,type,status}`` and
  ``gotk_suspend_status{kind,name,namespace}``: removed from upstream kustomize-controller in v1.5
  but still read by community dashboards; we keep them. For a condition all three statuses are
  written, 1 for the current one and 0 for the others.
- ``gotk_drift_objects{kind,name,namespace}``: number of objects left drifted by the last reconcile
  of a Kustomization in ``drift-detection: warn`` mode (docs/drift.md); no series in ``enabled`` mode.
- ``gotk_plan_pending{kind,name,namespace,reason}``: 1 while a Kustomization's plan is held by the
  change gate (``reason``: ``ApprovalRequired``, ``SyncWindowClosed``, ``InvalidSyncWindow``;
  docs/change-management.md); no series when nothing waits. ``sum()`` is the number of pending plans.
- Every series of an object is removed when the object is deleted (finalizer removed or gone).
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Gauge, Histogram

from kustomize_controller.api.drift import DRIFTED_CONDITION

KIND = "Kustomization"
_STATUSES = ("True", "False", "Unknown")


def exponential_buckets_range(minimum: float, maximum: float, count: int) -> list[float]:
    """Prometheus Go client's ``ExponentialBucketsRange``."""
    factor = (maximum / minimum) ** (1.0 / (count - 1))
    return [minimum * factor**i for i in range(count)]


class GotkMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a GitOps Toolkit resource reconciliation.",
            ["kind", "name", "namespace"],
            buckets=exponential_buckets_range(0.01, 1800, 10),
            registry=registry,
        )
        self.condition = Gauge(
            "gotk_reconcile_condition",
            "The current condition status of a GitOps Toolkit resource reconciliation.",
            ["kind", "name", "namespace", "type", "status"],
            registry=registry,
        )
        self.suspend = Gauge(
            "gotk_suspend_status",
            "The current suspend status of a GitOps Toolkit resource.",
            ["kind", "name", "namespace"],
            registry=registry,
        )
        self.drift = Gauge(
            "gotk_drift_objects",
            "The number of objects drifted from the applied revision and not corrected (drift-detection: warn).",
            ["kind", "name", "namespace"],
            registry=registry,
        )
        self.pending = Gauge(
            "gotk_plan_pending",
            "1 while a plan of changes waits for an approval or a sync window, by the reason it waits.",
            ["kind", "name", "namespace", "reason"],
            registry=registry,
        )
        self._conditions_seen: dict[tuple[str, str], set[str]] = {}
        self._pending: dict[tuple[str, str], str] = {}

    def record_duration(self, *, name: str, namespace: str, seconds: float) -> None:
        self.duration.labels(KIND, name, namespace).observe(seconds)

    def record_suspend(self, *, name: str, namespace: str, suspended: bool) -> None:
        self.suspend.labels(KIND, name, namespace).set(1 if suspended else 0)

    def record_condition(self, *, name: str, namespace: str, type_: str, status: str) -> None:
        for candidate in _STATUSES:
            self.condition.labels(KIND, name, namespace, type_, candidate).set(1 if candidate == status else 0)
        self._conditions_seen.setdefault((namespace, name), set()).add(type_)

    def record_drift(self, *, name: str, namespace: str, objects: int | None) -> None:
        """Set the drift gauge, or remove its series (``None``: not in warn mode) and those of the
        ``Drifted`` condition, which is gone from the status then."""
        if objects is None:
            with contextlib.suppress(KeyError):
                self.drift.remove(KIND, name, namespace)
            seen = self._conditions_seen.get((namespace, name), set())
            if DRIFTED_CONDITION in seen:
                seen.discard(DRIFTED_CONDITION)
                for status in _STATUSES:
                    with contextlib.suppress(KeyError):
                        self.condition.remove(KIND, name, namespace, DRIFTED_CONDITION, status)
            return
        self.drift.labels(KIND, name, namespace).set(objects)

    def forget_absent_conditions(self, *, name: str, namespace: str, types: tuple[str, ...], present: set[str]) -> None:
        """Remove the condition series of ``types`` no longer in the status (a gate switched off)."""
        seen = self._conditions_seen.get((namespace, name), set())
        for type_ in types:
            if type_ in seen and type_ not in present:
                seen.discard(type_)
                for status in _STATUSES:
                    with contextlib.suppress(KeyError):
                        self.condition.remove(KIND, name, namespace, type_, status)

    def record_pending(self, *, name: str, namespace: str, reason: str | None) -> None:
        """Set the pending-plan gauge for the hold's ``reason``, or remove the series (``None``)."""
        before = self._pending.pop((namespace, name), None)
        if before is not None and before != reason:
            with contextlib.suppress(KeyError):
                self.pending.remove(KIND, name, namespace, before)
        if reason:
            self._pending[(namespace, name)] = reason
            self.pending.labels(KIND, name, namespace, reason).set(1)

    def delete(self, *, name: str, namespace: str) -> None:
        self.record_pending(name=name, namespace=namespace, reason=None)
        for metric in (self.duration, self.suspend, self.drift):
            with contextlib.suppress(KeyError):
                metric.remove(KIND, name, namespace)
        for type_ in self._conditions_seen.pop((namespace, name), set()):
            for status in _STATUSES:
                with contextlib.suppress(KeyError):
                    self.condition.remove(KIND, name, namespace, type_, status)
