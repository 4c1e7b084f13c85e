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

Memory: one collector holds every object's state in plain dicts (a histogram is a short list of
counts), ~1 KiB per Kustomization; prometheus_client's labelled children cost ~10 KiB each
Kustomization (an object, a lock and a value per series: 13 for the histogram, 9 for three
conditions), 100 MiB at 10,000 (issue 27). The exposition is the same, byte for byte (a test compares
it with prometheus_client's). Writes come from the event loop, collection from the /metrics worker
thread: both hold the collector's lock, and ``collect`` copies before it formats.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client import utils as prometheus_utils
from prometheus_client.metrics_core import Metric

from kustomize_controller.api.drift import DRIFTED_CONDITION

KIND = "Kustomization"
_STATUSES = ("True", "False", "Unknown")

_DURATION = "gotk_reconcile_duration_seconds"
_CONDITION = "gotk_reconcile_condition"
_SUSPEND = "gotk_suspend_status"
_DRIFT = "gotk_drift_objects"
_PENDING = "gotk_plan_pending"
_HELP = {
    _DURATION: "The duration in seconds of a GitOps Toolkit resource reconciliation.",
    _CONDITION: "The current condition status of a GitOps Toolkit resource reconciliation.",
    _SUSPEND: "The current suspend status of a GitOps Toolkit resource.",
    _DRIFT: "The number of objects drifted from the applied revision and not corrected (drift-detection: warn).",
    _PENDING: "1 while a plan of changes waits for an approval or a sync window, by the reason it waits.",
}

Key = tuple[str, str]  # (namespace, name)
_go_float: Callable[[float], str] = prometheus_utils.floatToGoString  # the "le" label: 0.01, +Inf


def _go_pow_int(x: float, n: int) -> float:
    """Go's ``math.Pow(x, n)`` for a whole ``n >= 0``: repeated squaring of ``x``'s mantissa (``Frexp``),
    which rounds differently from C's ``pow`` in the last bits."""
    if n == 0:
        return 1.0
    if n == 1:
        return x
    a1, ae = 1.0, 0
    x1, xe = math.frexp(x)
    while n:
        if n & 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        n >>= 1
    return math.ldexp(a1, ae)


def exponential_buckets_range(minimum: float, maximum: float, count: int) -> list[float]:
    """Prometheus Go client's ``ExponentialBucketsRange``, bit for bit: the bounds are ``le`` label values,
    so a bound one ulp off is another series (``le="2.1660908555907006"`` instead of Go's
    ``"2.166090855590701"``). The growth factor is ``math.Pow(max/min, 1/(count-1))``; each bound multiplies
    ``min`` by Go's whole power of it."""
    factor = math.pow(maximum / minimum, 1.0 / (count - 1))
    return [minimum * _go_pow_int(factor, i) for i in range(count)]


class GotkMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._bounds = [*exponential_buckets_range(0.01, 1800, 10), float("inf")]
        self._le = [_go_float(b) for b in self._bounds]
        self._lock = threading.Lock()
        # per object, in first-recorded order (the order prometheus_client's children had)
        self._durations: dict[Key, list[float]] = {}  # bucket counts (not cumulative), then the sum
        self._conditions: dict[Key, dict[str, str]] = {}  # type -> current status
        self._suspended: dict[Key, float] = {}
        self._drift: dict[Key, float] = {}
        self._pending: dict[Key, str] = {}  # the reason a plan waits
        registry.register(self)

    # ------------------------------------------------------------------------------------- writes

    def record_duration(self, *, name: str, namespace: str, seconds: float) -> None:
        with self._lock:
            counts = self._durations.get((namespace, name))
            if counts is None:
                counts = self._durations[(namespace, name)] = [0.0] * (len(self._bounds) + 1)
            counts[bisect.bisect_left(self._bounds, seconds)] += 1.0
            counts[-1] += seconds

    def record_suspend(self, *, name: str, namespace: str, suspended: bool) -> None:
        with self._lock:
            self._suspended[(namespace, name)] = 1.0 if suspended else 0.0

    def record_condition(self, *, name: str, namespace: str, type_: str, status: str) -> None:
        with self._lock:
            self._conditions.setdefault((namespace, name), {})[type_] = status

    def record_drift(self, *, name: str, namespace: str, objects: int | None) -> None:
        """Set the drift gauge, or remove its series (``None``: not in warn mode) and those of the
        ``Drifted`` condition, which is gone from the status then."""
        key = (namespace, name)
        with self._lock:
            if objects is None:
                self._drift.pop(key, None)
                conditions = self._conditions.get(key)
                if conditions is not None:
                    conditions.pop(DRIFTED_CONDITION, None)
                return
            self._drift[key] = float(objects)

    def forget_absent_conditions(self, *, name: str, namespace: str, types: tuple[str, ...], present: set[str]) -> None:
        """Remove the condition series of ``types`` no longer in the status (a gate switched off)."""
        with self._lock:
            conditions = self._conditions.get((namespace, name))
            if conditions is not None:
                for type_ in types:
                    if type_ not in present:
                        conditions.pop(type_, None)

    def record_pending(self, *, name: str, namespace: str, reason: str | None) -> None:
        """Set the pending-plan gauge for the hold's ``reason``, or remove the series (``None``)."""
        with self._lock:
            if reason:
                self._pending[(namespace, name)] = reason
            else:
                self._pending.pop((namespace, name), None)

    def delete(self, *, name: str, namespace: str) -> None:
        key = (namespace, name)
        with self._lock:
            for table in (self._durations, self._conditions, self._suspended, self._drift, self._pending):
                table.pop(key, None)

    # ------------------------------------------------------------------------------ the collector

    def describe(self) -> list[Metric]:
        return [Metric(_DURATION, _HELP[_DURATION], "histogram"), Metric(_CONDITION, _HELP[_CONDITION], "gauge"),
                Metric(_SUSPEND, _HELP[_SUSPEND], "gauge"), Metric(_DRIFT, _HELP[_DRIFT], "gauge"),
                Metric(_PENDING, _HELP[_PENDING], "gauge")]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            durations = [(key, list(counts)) for key, counts in self._durations.items()]
            conditions = [(key, list(types.items())) for key, types in self._conditions.items()]
            suspended = list(self._suspended.items())
            drift = list(self._drift.items())
            pending = list(self._pending.items())
        yield self._histogram(durations)
        family = Metric(_CONDITION, _HELP[_CONDITION], "gauge")
        for (namespace, name), types in conditions:
            for type_, current in types:
                for status in _STATUSES:
                    family.add_sample(_CONDITION, {"kind": KIND, "name": name, "namespace": namespace,
                                                   "type": type_, "status": status},
                                      1.0 if status == current else 0.0)
        yield family
        for metric, values in ((_SUSPEND, suspended), (_DRIFT, drift)):
            family = Metric(metric, _HELP[metric], "gauge")
            for (namespace, name), value in values:
                family.add_sample(metric, {"kind": KIND, "name": name, "namespace": namespace}, value)
            yield family
        family = Metric(_PENDING, _HELP[_PENDING], "gauge")
        for (namespace, name), reason in pending:
            family.add_sample(_PENDING, {"kind": KIND, "name": name, "namespace": namespace, "reason": reason}, 1.0)
        yield family

    def _histogram(self, durations: list[tuple[Key, list[float]]]) -> Metric:
        family = Metric(_DURATION, _HELP[_DURATION], "histogram")
        bucket, count, total = f"{_DURATION}_bucket", f"{_DURATION}_count", f"{_DURATION}_sum"
        for (namespace, name), counts in durations:
            cumulative = 0.0
            for le, n in zip(self._le, counts, strict=False):
                cumulative += n
                family.add_sample(bucket, {"kind": KIND, "name": name, "namespace": namespace, "le": le},
                                  cumulative)
            family.add_sample(count, {"kind": KIND, "name": name, "namespace": namespace}, cumulative)
            family.add_sample(total, {"kind": KIND, "name": name, "namespace": namespace}, counts[-1])
        return family
