from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.kube.metrics import RestClientMetrics
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.metrics import (
    RECONCILE_TIME_BUCKETS,
    WORKQUEUE_BUCKETS,
    RuntimeMetrics,
    render_text,
)


def test_bucket_layouts_match_controller_runtime() -> None:
    assert len(RECONCILE_TIME_BUCKETS) == 40
    assert RECONCILE_TIME_BUCKETS[0] == 0.005 and RECONCILE_TIME_BUCKETS[-1] == 60
    assert len(WORKQUEUE_BUCKETS) == 12
    assert WORKQUEUE_BUCKETS[0] == 1e-8 and abs(WORKQUEUE_BUCKETS[-1] - 1e3) < 1e-9


def test_exposition_has_no_created_series_and_preset_results() -> None:
    metrics = RuntimeMetrics(clock=FakeClock(), registry=CollectorRegistry())
    metrics.controller("kustomization", max_concurrent=4)
    metrics.reconcile_total.labels(controller="kustomization", result="success").inc()
    text = metrics.exposition().decode()
    assert "_created" not in text
    assert 'controller_runtime_reconcile_total{controller="kustomization",result="success"} 1.0' in text
    assert 'controller_runtime_reconcile_total{controller="kustomization",result="requeue"} 0.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="kustomization"} 0.0' in text


async def test_workqueue_metrics_follow_the_queue() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(clock=clock, registry=registry)
    q = metrics.queue("kustomization")
    labels = {"name": "kustomization", "controller": "kustomization"}
    q.add("a")
    q.add("b")
    assert registry.get_sample_value("workqueue_depth", {**labels, "priority": ""}) == 2
    await clock.advance(2)
    q.get("a")
    assert registry.get_sample_value("workqueue_depth", {**labels, "priority": ""}) == 1
    assert registry.get_sample_value("workqueue_queue_duration_seconds_sum", labels) == 2
    await clock.advance(3)
    assert registry.get_sample_value("workqueue_unfinished_work_seconds", labels) == 3
    assert registry.get_sample_value("workqueue_longest_running_processor_seconds", labels) == 3
    q.done("a")
    assert registry.get_sample_value("workqueue_work_duration_seconds_sum", labels) == 3
    assert registry.get_sample_value("workqueue_unfinished_work_seconds", labels) == 0
    q.retry()
    assert registry.get_sample_value("workqueue_retries_total", labels) == 1
    assert registry.get_sample_value("workqueue_adds_total", labels) == 2


def test_client_counter_is_exported_in_the_runtime_registry() -> None:
    rest = RestClientMetrics()
    rest.observe(code=200, method="get", host="h:1")
    registry = CollectorRegistry()
    RuntimeMetrics(clock=FakeClock(), registry=registry, rest=rest)
    assert registry.get_sample_value("rest_client_requests_total", {"code": "200", "method": "GET", "host": "h:1"}) == 1
    rest.observe(code=None, method="GET", host="h:1")
    assert (
        registry.get_sample_value("rest_client_requests_total", {"code": "<error>", "method": "GET", "host": "h:1"})
        == 1
    )


async def test_discarded_keys_leave_the_depth() -> None:
    from kustomize_controller.runtime.workqueue import WorkQueue

    clock = FakeClock()
    registry = CollectorRegistry()
    metrics = RuntimeMetrics(clock=clock, registry=registry)
    q: WorkQueue[str] = WorkQueue(clock=clock, metrics=metrics.queue("k"))
    for key in "abc":
        q.add(key)
    await q.get()
    q.shut_down(discard_queued=True)
    assert registry.get_sample_value("workqueue_depth", {"name": "k", "controller": "k", "priority": ""}) == 0


def _reference_exposition(families: list[Any]) -> bytes:
    """prometheus_client's own renderer over the same families, minus ``*_created`` samples, with the
    bucket bounds written as Go writes them (``le="1"``, not ``"1.0"``)."""
    from prometheus_client import generate_latest
    from prometheus_client.samples import Sample

    from kustomize_controller.runtime.metrics import go_label_float

    def go_bounds(sample: Sample) -> Sample:
        labels = {k: go_label_float(float(v)) if k in ("le", "quantile") else v for k, v in sample.labels.items()}
        return sample._replace(labels=labels)

    class WithoutCreated:
        def collect(self) -> Any:
            for family in families:
                family.samples = [go_bounds(s) for s in family.samples if not s.name.endswith("_created")]
                yield family

    return generate_latest(WithoutCreated())  # type: ignore[arg-type]


def test_exposition_is_byte_identical_to_prometheus_client() -> None:
    from prometheus_client import Counter, Gauge, Histogram, Info, Summary
    from prometheus_client.core import GaugeHistogramMetricFamily

    from kustomize_controller.reconcile.metrics import GotkMetrics

    metrics = RuntimeMetrics(clock=FakeClock())
    gotk = GotkMetrics(metrics.registry)
    tricky = ['plain', 'quote"d', "back\\slash", "new\nline", "ünïcödé", ""]
    for i, name in enumerate(tricky):
        gotk.record_duration(name=name, namespace="ns", seconds=0.001 * 10**i)
        gotk.record_condition(name=name, namespace="ns", type_="Ready", status="True")
        gotk.record_suspend(name=name, namespace="ns", suspended=i % 2 == 0)
    r = metrics.registry
    Counter("odd_total", "help with \\ and\nnewline", ["l"], registry=r).labels(l="x").inc(1e21)
    Gauge("special_values", "inf, nan, big", ["v"], registry=r).labels(v="a").set(float("inf"))
    Gauge("special_neg", "minus inf", registry=r).set(float("-inf"))
    Gauge("special_nan", "nan", registry=r).set(float("nan"))
    Histogram("hist_seconds", "a histogram", buckets=(1e-9, 0.5, 1234567.0), registry=r).observe(3)
    Summary("summ_seconds", "a summary", registry=r).observe(2.5)
    Info("build", "build info", registry=r).info({"version": "v1", "commit": "abc"})

    class GaugeHistograms:
        def collect(self) -> Any:
            yield GaugeHistogramMetricFamily("queue_sizes", "gauge histogram", buckets=[("1", 2.0), ("+Inf", 3.0)],
                                             gsum_value=4.0)

    r.register(GaugeHistograms())  # type: ignore[arg-type]
    metrics.controller("kustomization", max_concurrent=4)
    assert metrics.exposition().startswith(b"# HELP ")
    families = list(r.collect())  # one collection for both renderers: process metrics move between calls
    ours = render_text(families)
    assert ours == _reference_exposition(families)
    assert b"_created" not in ours
    assert b'name="quote\\"d"' in ours and b"+Inf" in ours


def test_exposition_refuses_names_outside_the_legacy_character_set() -> None:
    from prometheus_client import Gauge

    metrics = RuntimeMetrics(clock=FakeClock())
    Gauge("fine", "ok", ["bad.label"], registry=metrics.registry).labels(**{"bad.label": "x"}).set(1)
    with pytest.raises(ValueError, match=r"bad\.label"):
        metrics.exposition()


class _CountingCollector:
    """A family that counts how often it is collected (the stand-in for the per-Kustomization gotk_* ones)."""

    def __init__(self) -> None:
        self.collected = 0

    def describe(self) -> list[Any]:
        from prometheus_client.core import GaugeMetricFamily

        return [GaugeMetricFamily("per_object", "one series per object")]

    def collect(self) -> list[Any]:
        from prometheus_client.core import GaugeMetricFamily

        self.collected += 1
        family = GaugeMetricFamily("per_object", "one series per object", labels=["name"])
        family.add_metric(["a"], 1.0)
        return [family]


def test_a_filtered_exposition_does_not_collect_the_other_families() -> None:
    registry = CollectorRegistry(auto_describe=True)
    metrics = RuntimeMetrics(clock=FakeClock(), registry=registry)
    per_object = _CountingCollector()
    registry.register(per_object)  # type: ignore[arg-type]
    metrics.controller("kustomization", max_concurrent=4)
    metrics.reconcile_total.labels(controller="kustomization", result="success").inc()
    text = metrics.exposition(["controller_runtime_reconcile_total"]).decode()
    assert per_object.collected == 0
    assert 'controller_runtime_reconcile_total{controller="kustomization",result="success"} 1.0' in text
    assert "controller_runtime_reconcile_errors_total" not in text
    assert "per_object" in metrics.exposition().decode()
    assert per_object.collected == 1


@pytest.mark.parametrize(
    ("value", "label"),
    [(1.0, "1"), (1000.0, "1000"), (0.005, "0.005"), (1e-08, "1e-08"), (9.999999999999999e-06, "9.999999999999999e-06"),
     (1799.9999999999986, "1799.9999999999986"), (60.0, "60"), (1e6, "1e+06"), (123456.0, "123456"),
     (float("inf"), "+Inf"), (0.0, "0"), (-2.5, "-2.5")],
)
def test_bounds_are_written_as_go_writes_them(value: float, label: str) -> None:
    # strconv.FormatFloat(v, 'g', -1, 64), as kustomize-controller v1.9.4's /metrics shows them
    from kustomize_controller.runtime.metrics import go_label_float

    assert go_label_float(value) == label


def test_workqueue_and_reconcile_buckets_are_upstreams_le_values() -> None:
    # the le values of kustomize-controller v1.9.4's workqueue and reconcile-time histograms (found by the
    # differential run: Go multiplies bound by bound, and writes 1 and 1e-08, not 1.0 and 1e-05)
    from kustomize_controller.runtime.workqueue import WorkQueue

    clock = FakeClock()
    metrics = RuntimeMetrics(clock=clock)
    metrics.controller("kustomization", max_concurrent=4)
    q: WorkQueue[str] = WorkQueue(clock=clock, metrics=metrics.queue("kustomization"))
    q.add("k")
    metrics.reconcile_time_seconds.labels(controller="kustomization").observe(0.2)
    page = metrics.exposition().decode()

    def bounds(name: str) -> list[str]:
        return [line.split('le="')[1].split('"')[0] for line in page.splitlines()
                if line.startswith(f"{name}_bucket")]

    assert bounds("workqueue_queue_duration_seconds") == [
        "1e-08", "1e-07", "1e-06", "9.999999999999999e-06", "9.999999999999999e-05", "0.001", "0.01", "0.1", "1",
        "10", "100", "1000", "+Inf"]
    reconcile = bounds("controller_runtime_reconcile_time_seconds")
    assert reconcile[:3] == ["0.005", "0.01", "0.025"] and reconcile[-5:] == ["30", "40", "50", "60", "+Inf"]


def test_go_process_extras(tmp_path: Any) -> None:
    from kustomize_controller.runtime.metrics import GoProcessExtras

    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "dev").write_text(
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls\n"
        "    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0\n"
        "  eth0:    2000      20    0    0    0     0          0         0      500       5    0    0    0     0\n")
    (tmp_path / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max address space         unlimited            unlimited            bytes     \n")
    samples = {f.name: f.samples[0].value for f in GoProcessExtras(str(tmp_path)).collect()}
    assert samples == {"process_network_receive_bytes": 2100.0, "process_network_transmit_bytes": 600.0,
                       "process_virtual_memory_max_bytes": float(2**64 - 1)}
    assert list(GoProcessExtras(str(tmp_path / "absent")).collect()) == []
