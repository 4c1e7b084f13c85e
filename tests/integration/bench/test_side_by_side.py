"""The side-by-side bench (issue 36) end to end at a tiny size: a cold start, a new revision and a no-op round of
two Kustomizations, measured as ``make bench ARGS=--controllers ...`` measures them.

On the embedded API server with our controller (CI); with ``KUBE_ASSETS`` on a real control plane, whose audit
log counts the requests, and with ``FLUX_ASSETS`` upstream's controller beside ours.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import cli, side_by_side, versus, versus_report
from bench.scenarios import Config
from tests.controlplane import missing_assets
from tests.flux import assets as flux_assets

pytestmark = [pytest.mark.integration, pytest.mark.builder, pytest.mark.timeout(600)]


async def test_each_controller_gets_every_phase_measured(tmp_path: Path) -> None:
    real = not missing_assets(os.environ.get("KUBE_ASSETS"))
    controllers = ["ours"] + ([] if flux_assets.missing([flux_assets.KUSTOMIZE_CONTROLLER]) else ["upstream"])
    cluster = "controlplane" if real else "embedded"
    p = side_by_side.plan(cli.parse(["--controllers", ",".join(controllers), "--cluster", cluster,
                                     "--scenarios", "cold", "--sizes", "2", "--concurrency", "4", "--rounds", "1"]))
    results = await side_by_side.run(p, Config(workdir=tmp_path, kubectl=cli._kubectl()))
    assert [(r["controller"], r["error"]) for r in results] == [(c, "") for c in controllers]
    for r in results:
        m = r["metrics"]
        for phase in ("cold", "revision", "noop"):
            assert m[f"{phase}.seconds"] > 0
            assert m[f"{phase}.apiserver_cpu_s"] >= 0
            # every reconcile writes the Kustomization's status: the controller's own requests were counted
            assert m[f"{phase}.requests_per_ks"] >= 1
        assert m["cold.cpu_s"] > 0 and m["peak_rss_mib"] > 10 and m["tree_peak_rss_mib"] >= m["peak_rss_mib"] * 0.9
        # each page once: at most the RSS summed, and the main process's RSS at least
        assert m["peak_rss_mib"] * 0.9 <= m["tree_peak_memory_mib"] <= m["tree_peak_rss_mib"]
        assert m["noop.status_writes_per_ks"] >= 0
        if real:  # from the audit log, by kind: the apply's dry-runs and writes of the 4 objects
            assert m["cold.req.patch (dry-run) configmaps"] == 1.0 and m["cold.req.patch configmaps"] == 1.0
            assert m["cold.etcd_cpu_s"] > 0
            # the rest of the API server's clients: the controller manager rolled the Deployments out
            assert m["cold.plane_requests.kube-controller-manager"] > 0 and "cold.plane_requests.others" in m
    table = "\n".join(versus_report.tables({"results": results, "plan": p}))
    assert "| 2 Kustomizations × 4 objects | cold start |" in table
    assert versus.CONTROLLERS == ("ours", "upstream")
