"""Metrics of the in-process manager (upstream §8): Flux's per-object series with upstream's labels and
buckets, controller-runtime's reconcile counters, and series removal when the object is deleted."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def scrape(env: ControllerEnv) -> dict[str, list[tuple[dict[str, str], float]]]:
    url = await env.metrics_url()
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def values(samples: dict[str, list[tuple[dict[str, str], float]]], metric: str, **labels: str) -> list[float]:
    return [v for lbls, v in samples.get(metric, []) if all(lbls.get(k) == val for k, val in labels.items())]


async def test_flux_and_controller_runtime_series(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"a.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=artifact["revision"])
    me = {"kind": "Kustomization", "name": "app", "namespace": ns}

    samples = await scrape(env)
    buckets = [lbls["le"] for lbls, _ in samples["gotk_reconcile_duration_seconds_bucket"]
               if lbls["name"] == "app"]
    # prometheus.ExponentialBucketsRange(0.01, 1800, 10): 0.01 × (1800/0.01)^(i/9)
    assert [float(b) for b in buckets[:-1]] == pytest.approx(
        [0.01, 0.03836, 0.14718, 0.56462, 2.16608, 8.30975, 31.8788, 122.298, 469.179, 1800.0], rel=1e-4)
    assert buckets[-1] == "+Inf"
    assert values(samples, "gotk_reconcile_duration_seconds_count", **me)[0] >= 2  # finalizer pass + apply
    assert values(samples, "gotk_reconcile_condition", **me, type="Ready", status="True") == [1.0]
    assert values(samples, "gotk_reconcile_condition", **me, type="Ready", status="False") == [0.0]
    assert values(samples, "gotk_suspend_status", **me) == [0.0]
    # controller-runtime's result labels: the finalizer pass requeues, a success is requeued after the interval
    total = "controller_runtime_reconcile_total"
    assert values(samples, total, controller="kustomization", result="requeue") == [1.0]
    assert values(samples, total, controller="kustomization", result="requeue_after")[0] >= 1

    await env.patch_spec({"suspend": True})
    await env.wait_for("app", lambda o: o["status"].get("observedGeneration") == 2)
    for _ in range(100):
        samples = await scrape(env)
        if values(samples, "gotk_suspend_status", **me) == [1.0]:
            break
    assert values(samples, "gotk_suspend_status", **me) == [1.0]

    await env.delete_ks()
    await env.wait_gone()
    for _ in range(100):
        samples = await scrape(env)
        if not values(samples, "gotk_suspend_status", **me):
            break
    for metric in ("gotk_reconcile_duration_seconds_count", "gotk_reconcile_condition", "gotk_suspend_status"):
        assert values(samples, metric, **me) == [], metric
