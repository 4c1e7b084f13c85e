"""The process's Prometheus metrics: our own registry, names/labels/buckets as controller-runtime.

Contract:
- ``RuntimeMetrics`` owns one ``CollectorRegistry`` (never the global default) holding the
  ``controller_runtime_*``, ``workqueue_*``, ``leader_election_master_status`` and
  ``rest_client_requests_total`` families, plus process/platform collectors. The REST counter is the
  one the ``KubeClient`` counts into: pass ``rest=client.rest_metrics`` (the manager does), or build
  the client with ``metrics=runtime_metrics.rest``.
- ``exposition()`` renders the text format without ``*_created`` series (Go's client has none);
  it filters them itself, so it does not depend on the process-wide
  ``prometheus_client.disable_created_metrics()`` switch (the manager still calls it, for any other
  exporter in the process). The renderer (``render_text``) is ours: byte-identical to
  ``prometheus_client.generate_latest`` for legacy metric and label names (a test compares them),
  about 2.5 times faster, which matters because the per-Kustomization ``gotk_*`` series make the
  page ~2.7 MB at 1,000 Kustomizations. Names outside the legacy character set are refused.
- ``exposition(names)`` renders only the families holding those sample names (prometheus_client's
  ``name[]`` filter, served as ``/metrics?name[]=…``); collectors of other families are not called.
- ``controller(name)`` pre-sets ``controller_runtime_reconcile_total{result=…}`` to 0 for the four
  results, as controller-runtime does when a controller starts.
- ``queue(name, controller)`` returns the ``QueueMetrics`` a ``WorkQueue`` reports to;
  ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds`` are
  computed from the clock when scraped (client-go recomputes them every 500 ms).

Not promised: Flux's ``gotk_*`` families live with the domain code, not here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from decimal import Decimal
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client import utils as prometheus_utils
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.runtime.clock import Clock

RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0,
    30.0, 40.0, 50.0, 60.0,
)  # fmt: skip
def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus Go client's ``ExponentialBuckets``: each bound the previous one times ``factor``, so the
    bounds round as Go's do (``9.999999999999999e-06``, not ``1e-05``): they are ``le`` label values."""
    bounds = []
    for _ in range(count):
        bounds.append(start)
        start *= factor
    return tuple(bounds)


WORKQUEUE_BUCKETS = exponential_buckets(10e-9, 10, 12)  # client-go's workqueue metrics
RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")


_LEGACY_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LEGACY_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# OpenMetrics-only samples, which the text format lists as gauges after their family
_TRAILING_SUFFIXES = ("_gsum", "_gcount")
_go_float: Callable[[float], str] = prometheus_utils.floatToGoString  # Go's formatting: +Inf, 1e+21
_BOUND_LABELS = ("le", "quantile")


def go_label_float(value: float) -> str:
    """A bound as Go's client writes it into the ``le``/``quantile`` label (``strconv.FormatFloat(v, 'g',
    -1, 64)``): the shortest digits that read back as ``value``, in exponent form when the exponent is below
    -4 or from 6 on (``1``, ``1000``, ``0.005``, ``1e-08``, ``9.999999999999999e-06``). prometheus_client
    writes ``1.0`` and ``1000.0``: other label values than upstream's, other series to a query."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    _, digit_tuple, exp = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    exponent = int(exp) + len(digits) - 1  # of the first digit
    sign = "-" if value < 0 else ""
    if exponent < -4 or exponent >= 6:
        rest = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{rest}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole = digits[:exponent + 1].ljust(exponent + 1, "0")
    fraction = digits[exponent + 1:]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


_bound_labels: dict[str, str] = {}


def _bound_label(text: str) -> str:
    found = _bound_labels.get(text)
    if found is None:
        found = go_label_float(float(text))
        if len(_bound_labels) < 4096:  # bounds are few and fixed; the cache stays small
            _bound_labels[text] = found
    return found
_TYPE_NAMES = {"info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram", "unknown": "untyped"}


def _escape_value(value: str) -> str:
    if "\\" not in value and "\n" not in value and '"' not in value:
        return value  # the common case, checked without building new strings
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


class _LineRenderer:
    """Formats samples; label names are checked once each, not once per sample."""

    def __init__(self) -> None:
        self._label_names: set[str] = set()

    def line(self, sample: Sample) -> str:
        labels = sample.labels
        if labels:
            parts = []
            for key in sorted(labels):
                if key not in self._label_names:
                    if not _LEGACY_LABEL_NAME.fullmatch(key):
                        raise ValueError(f"label name {key!r} of {sample.name} is not a legacy Prometheus name")
                    self._label_names.add(key)
                value = labels[key]
                if key in _BOUND_LABELS:
                    value = _bound_label(value)
                parts.append(f'{key}="{_escape_value(value)}"')
            head = f"{sample.name}{{{','.join(parts)}}}"
        else:
            head = sample.name
        timestamp = "" if sample.timestamp is None else f" {int(float(sample.timestamp) * 1000):d}"
        return f"{head} {_go_float(sample.value)}{timestamp}\n"


def render_text(families: Iterable[Metric]) -> bytes:
    """The Prometheus text format (0.0.4) of ``families``, leaving out ``*_created`` samples."""
    out: list[str] = []
    renderer = _LineRenderer()
    for family in families:
        base = family.name
        name = base + "_total" if family.type == "counter" else base + "_info" if family.type == "info" else base
        if not _LEGACY_METRIC_NAME.fullmatch(name):
            raise ValueError(f"metric name {name!r} is not a legacy Prometheus name")
        mtype = _TYPE_NAMES.get(family.type, family.type)
        doc = _escape_help(family.documentation)
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {mtype}\n")
        created = base + "_created"
        trailing: dict[str, list[str]] = {}
        for sample in family.samples:
            if sample.name == created:
                continue
            if sample.name.startswith(base) and sample.name[len(base):] in _TRAILING_SUFFIXES:
                trailing.setdefault(sample.name[len(base):], []).append(renderer.line(sample))
            else:
                out.append(renderer.line(sample))
        for suffix, lines in sorted(trailing.items()):
            out.append(f"# HELP {base}{suffix} {doc}\n# TYPE {base}{suffix} gauge\n")
            out.extend(lines)
    return "".join(out).encode("utf-8")


class GoProcessExtras:
    """The three series Go's process collector has and prometheus_client's lacks (client_golang v1.20+):
    ``process_network_receive_bytes_total``/``process_network_transmit_bytes_total`` (the process's network
    namespace, every interface, from ``/proc/self/net/dev``) and ``process_virtual_memory_max_bytes`` (the
    address-space limit; unlimited is the largest uint64, as Go's procfs reads it). Nothing where ``/proc``
    has no answer."""

    def __init__(self, proc: str = "/proc/self") -> None:
        self._proc = proc

    def collect(self) -> Iterable[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        received = sent = None
        try:
            with open(f"{self._proc}/net/dev", encoding="ascii", errors="replace") as dev:
                received = sent = 0.0
                for line in dev.readlines()[2:]:
                    fields = line.split(":", 1)[-1].split()
                    if len(fields) >= 9:
                        received += float(fields[0])
                        sent += float(fields[8])
        except (OSError, ValueError):
            received = sent = None
        if received is not None and sent is not None:
            yield CounterMetricFamily("process_network_receive_bytes",
                                      "Number of bytes received by the process over the network.", value=received)
            yield CounterMetricFamily("process_network_transmit_bytes",
                                      "Number of bytes sent by the process over the network.", value=sent)
        try:
            with open(f"{self._proc}/limits", encoding="ascii", errors="replace") as limits:
                for line in limits:
                    if line.startswith("Max address space"):
                        soft = line[len("Max address space"):].split()[0]
                        limit = float(2**64 - 1) if soft == "unlimited" else float(soft)
                        yield GaugeMetricFamily("process_virtual_memory_max_bytes",
                                                "Maximum amount of virtual memory available in bytes.", value=limit)
                        break
        except (OSError, ValueError):
            pass


class RuntimeMetrics:
    def __init__(
        self, *, clock: Clock, registry: CollectorRegistry | None = None, rest: RestClientMetrics | None = None
    ) -> None:
        self.clock = clock
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors_total = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.terminal_reconcile_errors_total = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_panics_total = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_timeouts_total = Counter(
            "controller_runtime_reconcile_timeouts_total",
            "Total number of reconciliation timeouts per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time_seconds = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_TIME_BUCKETS,
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=r,
        )
        self.detached_reconciles = Gauge(
            "controller_detached_reconciles",
            "Number of reconciles that released their worker and run on (e.g. waiting on health checks) "
            "per controller",
            ["controller"],
            registry=r,
        )
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", ["name", "controller", "priority"], registry=r
        )
        self.workqueue_adds_total = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            ["name", "controller"],
            registry=r,
        )
        self.workqueue_queue_duration_seconds = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name", "controller"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration_seconds = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name", "controller"],
            buckets=WORKQUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_unfinished_work_seconds = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by "
            "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
            "threads by observing the rate at which this increases.",
            ["name", "controller"],
            registry=r,
        )
        self.workqueue_longest_running_processor_seconds = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            ["name", "controller"],
            registry=r,
        )
        self.workqueue_retries_total = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            ["name", "controller"],
            registry=r,
        )
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease. Please make sure to "
            "group by name.",
            ["name"],
            registry=r,
        )
        if rest is not None:
            # the client was built first (it counts from its first request): export its counter here
            for collector in rest.collectors():
                r.register(collector)
            self.rest = rest
        else:
            self.rest = RestClientMetrics(registry=r)
        ProcessCollector(registry=r)
        r.register(GoProcessExtras())
        PlatformCollector(registry=r)

    def controller(self, name: str, *, max_concurrent: int) -> None:
        """Initialise a controller's series (results at 0, gauges set) as controller-runtime does."""
        for result in RECONCILE_RESULTS:
            self.reconcile_total.labels(controller=name, result=result).inc(0)
        for counter in (
            self.reconcile_errors_total,
            self.terminal_reconcile_errors_total,
            self.reconcile_panics_total,
            self.reconcile_timeouts_total,
        ):
            counter.labels(controller=name).inc(0)
        self.max_concurrent_reconciles.labels(controller=name).set(max_concurrent)
        self.active_workers.labels(controller=name).set(0)
        self.detached_reconciles.labels(controller=name).set(0)

    def queue(self, name: str, *, controller: str | None = None) -> WorkqueueMetrics:
        return WorkqueueMetrics(self, name=name, controller=controller or name)

    def exposition(self, names: Iterable[str] = ()) -> bytes:
        """The whole page, or (``names``: sample names such as ``rest_client_requests_total``) only the
        families that have them, without collecting the others: the per-Kustomization ``gotk_*`` families
        cost ~100 µs per Kustomization per scrape, 1.0 s at 10,000, which a reader of a few counters
        (``/metrics?name[]=…``) should not pay."""
        wanted = set(names)
        return render_text(self.registry.restricted_registry(wanted).collect() if wanted else self.registry.collect())


class WorkqueueMetrics:
    """``QueueMetrics`` of one queue (see ``runtime.workqueue``)."""

    def __init__(self, metrics: RuntimeMetrics, *, name: str, controller: str) -> None:
        self._clock = metrics.clock
        labels: dict[str, Any] = {"name": name, "controller": controller}
        self._depth = metrics.workqueue_depth.labels(priority="", **labels)
        self._adds = metrics.workqueue_adds_total.labels(**labels)
        self._queue_duration = metrics.workqueue_queue_duration_seconds.labels(**labels)
        self._work_duration = metrics.workqueue_work_duration_seconds.labels(**labels)
        self._retries = metrics.workqueue_retries_total.labels(**labels)
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        metrics.workqueue_unfinished_work_seconds.labels(**labels).set_function(self.unfinished_work)
        metrics.workqueue_longest_running_processor_seconds.labels(**labels).set_function(self.longest_running)
        self._depth.set(0)

    def add(self, key: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(key, self._clock.monotonic())

    def get(self, key: Hashable) -> None:
        now = self._clock.monotonic()
        self._depth.dec()
        added = self._added_at.pop(key, None)
        if added is not None:
            self._queue_duration.observe(now - added)
        self._started_at[key] = now

    def done(self, key: Hashable) -> None:
        started = self._started_at.pop(key, None)
        if started is not None:
            self._work_duration.observe(self._clock.monotonic() - started)

    def retry(self) -> None:
        self._retries.inc()

    def discard(self, key: Hashable) -> None:
        """A queued key dropped by a shutdown: it leaves the depth without a queue-duration sample."""
        self._depth.dec()
        self._added_at.pop(key, None)

    def unfinished_work(self) -> float:
        now = self._clock.monotonic()
        return sum(now - t for t in self._started_at.values())

    def longest_running(self) -> float:
        if not self._started_at:
            return 0.0
        return self._clock.monotonic() - min(self._started_at.values())
