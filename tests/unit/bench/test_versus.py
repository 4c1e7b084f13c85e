"""The side-by-side bench (issue 36) without a cluster: its plan and order, what it needs, the report's
tables and ratios, and the process-tree readers it measures with."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bench import cli, procs, side_by_side, versus, versus_report


def test_the_plan_runs_every_scenario_at_both_settings_twice() -> None:
    args = cli.parse(["--controllers", "ours,upstream", "--cluster", "controlplane"])
    p = side_by_side.plan(args)
    assert (p["mode"], p["cluster"], p["controllers"], p["concurrent"], p["rounds"]) == (
        "versus", "controlplane", ["ours", "upstream"], [4, 20], 2)
    assert p["scenarios"] == list(side_by_side.SCENARIOS)
    assert p["sizes"] == {"cold": [100, 1000], "latency": [100], "monorepo": [1000], "big": [1000, 5000],
                          "sops": [100], "starvation": [100], "chain": [20]}
    assert p["flags"] == {"ours": [], "upstream": []}


def test_quick_and_chosen_sizes() -> None:
    p = side_by_side.plan(cli.parse(["--quick", "--controllers", "upstream", "--sizes", "10000",
                                     "--concurrency", "20", "--upstream-flags", "--kube-api-qps=-1 --kube-api-burst=-1",
                                     "--scenarios", "cold,big"]))
    assert (p["rounds"], p["concurrent"], p["scenarios"]) == (1, [20], ["cold", "big"])
    assert p["sizes"]["cold"] == [10000] and p["sizes"]["big"] == [200]
    assert p["flags"]["upstream"] == ["--kube-api-qps=-1", "--kube-api-burst=-1"]
    assert p["phases"] is None
    assert side_by_side.plan(cli.parse(["--controllers", "ours", "--phases", "cold,one_app"]))["phases"] == [
        "cold", "one_app"]
    every = versus.Lab(None, None, None, None, None)  # type: ignore[arg-type]
    some = versus.Lab(None, None, None, None, None, frozenset({"cold", "one_app"}))  # type: ignore[arg-type]
    assert every.wants("noop") and some.wants("one_app") and not some.wants("noop")
    with pytest.raises(SystemExit, match="not failover"):
        side_by_side.plan(cli.parse(["--controllers", "ours", "--scenarios", "cold,failover"]))


def test_the_classic_plan_is_unchanged_without_controllers() -> None:
    assert cli.parse([]).cluster is None
    assert cli.plan(cli.parse([]))["scenarios"][0] == "cold"


def test_what_a_run_lacks_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBE_ASSETS", raising=False)
    monkeypatch.setattr(versus, "EXTERNAL_KUBECONFIG", "")
    assert "KUBE_ASSETS is not set" in versus.missing("controlplane", ["ours"])
    assert versus.missing("kubeconfig", ["ours"]) == "--cluster kubeconfig needs BENCH_KUBECONFIG"
    assert versus.missing("embedded", ["ours", "flux"]).startswith("unknown controllers ['flux']")
    monkeypatch.delenv("FLUX_ASSETS", raising=False)
    assert "FLUX_ASSETS is not set" in versus.missing("embedded", ["ours", "upstream"])
    monkeypatch.setenv("FLUX_ASSETS", str(tmp_path))
    assert versus.missing("embedded", ["upstream"]) == f"FLUX_ASSETS={tmp_path}: no kustomize-controller"
    assert versus.missing("embedded", ["ours"]) == ""
    assert cli.main(["--controllers", "ours,upstream", "--cluster", "embedded"]) == 2  # says why, runs nothing


def test_runs_alternate_a_b_a_b_and_big_has_its_reference_per_round(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[tuple[str, int, int]] = []

    async def one(cfg: Any, p: Any, scenario: str, size: int, contender: versus.Contender, m: dict[str, float],
                  body: Any) -> None:
        order.append((contender.name, contender.concurrent, size))
        m["cold.seconds"] = 1.0

    async def reference(cfg: Any, p: Any, size: int, m: dict[str, float]) -> None:
        order.append(("kubectl", 0, size))

    monkeypatch.setattr(side_by_side, "_one", one)
    monkeypatch.setattr(side_by_side, "_reference", reference)
    p = side_by_side.plan(cli.parse(["--controllers", "ours,upstream", "--scenarios", "big", "--big-sizes", "7"]))
    results = asyncio.run(side_by_side.run(p, None))  # type: ignore[arg-type]
    assert order == [("kubectl", 0, 7), ("ours", 4, 7), ("upstream", 4, 7), ("ours", 20, 7), ("upstream", 20, 7)] * 2
    assert [r["round"] for r in results] == [1] * 5 + [2] * 5
    assert all(r["scenario"] == "versus-big" and r["loadavg"] and not r["error"] for r in results)


def run(scenario: str, size: int, controller: str, concurrent: int, metrics: dict[str, float],
        round_: int = 1, error: str = "") -> dict[str, Any]:
    return {"scenario": f"versus-{scenario}", "size": size, "controller": controller, "concurrent": concurrent,
            "round": round_, "metrics": metrics, "error": error, "loadavg": "0.50 0.40 0.30"}


def cold(seconds: float, requests: float, rss: float) -> dict[str, float]:
    return {"cold.seconds": seconds, "cold.cpu_s": seconds / 2, "cold.apiserver_cpu_s": 1.0, "cold.etcd_cpu_s": 0.5,
            "cold.requests_per_ks": requests, "noop.seconds": seconds / 10, "noop.requests_per_ks": 5.0,
            "peak_rss_mib": rss, "tree_peak_rss_mib": rss + 50,
            "tree_peak_memory_mib": rss + 20}


def data_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"plan": {"mode": "versus", "cluster": "controlplane", "controllers": ["ours", "upstream"],
                     "concurrent": [4, 20], "rounds": 3},
            "machine": {"nproc": "2", "cpu": "AMD EPYC", "memory": "23.5 GiB", "python": "3.11.7",
                        "platform": "Linux", "loadavg": "0.50 0.40 0.30"},
            "loadavg_end": "1.0 0.9 0.8", "started": "2026-11-28 12:00 UTC", "duration_s": 600.0,
            "command": "python -m bench --controllers ours,upstream", "note": "", "results": results}


def test_phases_may_be_asked_of_one_scenario_at_one_size() -> None:
    spec = ["cold@10000:cold", "monorepo@1000:cold", "monorepo@1000:one_app", "noop"]
    assert side_by_side.phases_for(spec, "cold", 10000) == ["cold"]
    assert side_by_side.phases_for(spec, "monorepo", 1000) == ["cold", "one_app"]
    assert side_by_side.phases_for(spec, "cold", 1000) == ["noop"]  # the plain items: every other size
    assert side_by_side.phases_for(["cold@10000:cold"], "cold", 100) is None  # nothing plain: every phase
    assert side_by_side.phases_for(None, "cold", 100) is None


def test_a_cold_start_cut_at_the_limit_is_a_lower_bound() -> None:
    results = [run("cold", 10000, "ours", 20, {"cold.seconds": 800.0, "cold.requests_per_ks": 13.0}),
               run("cold", 10000, "upstream", 20, {"cold.seconds": 1800.0, "cold.requests_per_ks": 9.0,
                                                    "cold.ready_at_limit": 4321.0})]
    row = next(line for line in versus_report.tables(data_of(results)) if line.startswith("| 10,000"))
    assert "| 800 / > 1800 (4,321 of 10,000 Ready) (< 0.44×) |" in row
    assert versus_report.cut_pair({"cold.seconds": [900.0], "cold.ready_at_limit": [10.0]}, None, "cold", 20) \
        == "> 900 (10 of 20 Ready) / —"
    assert side_by_side.plan(cli.parse(["--controllers", "ours", "--cold-limit", "1800"]))["cold_limit"] == 1800.0


def test_the_table_gives_medians_side_by_side_and_ours_over_upstream() -> None:
    results = [
        run("cold", 100, "ours", 4, cold(6.0, 9.0, 80.0)), run("cold", 100, "ours", 4, cold(8.0, 9.0, 90.0), 2),
        run("cold", 100, "ours", 4, cold(30.0, 9.0, 85.0), 3),  # a median, not a mean
        run("cold", 100, "upstream", 4, cold(20.0, 12.0, 170.0)),
        run("cold", 100, "upstream", 4, cold(99.0, 12.0, 170.0), 2, error="TimeoutError: x"),  # left out
        run("big", 50, "kubectl", 0, {"reference.seconds": 4.0, "reference.cpu_s": 1.0,
                                      "reference.apiserver_cpu_s": 2.0, "reference.etcd_cpu_s": 1.0,
                                      "reference.requests_per_ks": 1.0}),
        run("big", 50, "ours", 20, {"cold.seconds": 2.0, "noop.seconds": 0.2, "peak_rss_mib": 90.0}),
        run("big", 50, "upstream", 20, {"cold.seconds": 6.0, "noop.seconds": 1.0, "peak_rss_mib": 150.0}),
    ]
    lines = versus_report.tables(data_of(results))
    text = "\n".join(lines)
    assert "#### `--concurrent 4`" in text and "#### `--concurrent 20`" in text
    row = next(line for line in lines if line.startswith("| 100 Kustomizations × 4 objects | cold start"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:] == ["8.00 / 20.0 (0.40×)", "4.00 / 10.0 (0.40×)", "1.50 / 1.50 (1.00×)", "9.00 / 12.0 (0.75×)",
                         "85.0 / 170 (0.50×)", "135 / 220 (0.61×)", "105 / 190 (0.55×)"]
    def columns(line: str) -> int:
        return line.replace("\\|", "").count("|")
    assert all(columns(line) == columns(row) for line in lines if line.startswith("|"))  # every row as wide
    assert any(line.startswith("|  | no-op round | 0.80 / 2.00 (0.40×)") for line in lines)
    assert any("`kubectl kustomize \\| kubectl apply --server-side` | 4.00 | 1.00 (kubectl) | 3.00 | 1.00" in line
               for line in lines)
    assert any(line.startswith("| | cold start ÷ the reference | 0.50 / 1.50") for line in lines)
    assert any(line.startswith("| | no-op round ÷ the reference | 0.05 / 0.25") for line in lines)
    full = versus_report.render(data_of(results))
    assert "TimeoutError: x" in full and "upstream c4 r2: 0.50 0.40 0.30" in full
    assert "| `cold.requests_per_ks` | 9.00 / 12.0 (0.75×) |" in full


def test_a_side_not_measured_is_a_dash() -> None:
    assert versus_report.pair(2.0, None) == "2.00 / —"
    assert versus_report.pair(None, 3.0) == "— / 3.00"
    assert versus_report.pair(None, None) == "—"
    assert versus_report.pair(1.0, 0.0) == "1.00 / 0.00"  # no ratio by zero


def test_tree_cpu_counts_live_children_while_they_run() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.3: pass\nimport sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while procs.cpu_seconds(child.pid)[0] < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        own, children = procs.tree_cpu_seconds(os.getpid())
        assert children >= procs.cpu_seconds(child.pid)[0] >= 0.3  # not reaped yet, counted anyway
        assert abs(own - procs.cpu_seconds(os.getpid())[0]) < 0.5
        own_rss = procs._status_kib(os.getpid(), "VmRSS") / 1024
        rss, memory = procs.tree_rss_and_memory_mib(os.getpid())
        assert rss > own_rss
        # The child maps the interpreter this process maps: each page once counts less than RSS summed.
        child_rss = procs._status_kib(child.pid, "VmRSS")
        assert 0 < procs.pss_kib(child.pid) < child_rss
        assert own_rss < memory < rss
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
