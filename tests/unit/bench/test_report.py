"""``bench/report.py``: statistics, number formatting, verdicts and the rendered markdown.

The results dict mirrors what ``python -m bench`` writes (see ``bench/cli.py`` and
``bench/results/latest.json``). Values are chosen so that a wrong median (mean, upper or lower middle
of an even-length list) changes both the printed figure and the verdict.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from bench import report

RESULTS_JSON = Path(report.__file__).resolve().parent / "results" / "latest.json"


def run(scenario: str, size: int | str, metrics: dict[str, float], error: str = "") -> dict[str, Any]:
    return {"scenario": scenario, "size": size, "metrics": metrics, "error": error, "took_s": 1.0}


def data_of(results: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "plan": {"controller_flags": ["--concurrent=20", "--kube-api-qps=-1"], "wait": False},
        "machine": {"nproc": "2", "cpu": "AMD EPYC", "memory": "23.5 GiB", "python": "3.11.7",
                    "platform": "Linux-x86_64", "kubectl": "Client Version: v1.36.3", "loadavg": "0.87 1.68 2.82"},
        "loadavg_end": "2.65 2.58 3.48",
        "started": "2026-11-22 12:58 UTC",
        "duration_s": 1410.0,
        "command": "python -m bench --quick",
        "note": "",
        "results": results,
        **extra,
    }


# Cold start at 100: four runs, an even count. Median 39.0 sits exactly on the target (1.5 × 26 s), so
# "met" needs both the true median and the inclusive comparison; the mean (47) or the upper middle (42)
# would print differently and say "not met".
COLD_100 = [10.0, 36.0, 42.0, 100.0]
NOOP2 = [  # requests, status writes, events per reconcile, in two of the four runs (medians 13, 4, 1)
    {"noop2.requests_per_reconcile": 12.0, "noop2.status_writes_per_reconcile": 3.0, "noop2.POST_per_reconcile": 1.0},
    {"noop2.requests_per_reconcile": 14.0, "noop2.status_writes_per_reconcile": 5.0, "noop2.POST_per_reconcile": 1.0},
]
VERIFIED2 = {"verified_noop2.requests_per_reconcile": 6.0, "verified_noop2.status_writes_per_reconcile": 1.0,
             "verified_noop2.POST_per_reconcile": 1.0}


def full_results() -> list[dict[str, Any]]:
    cold100 = [
        run("cold", 100, {"cold.seconds": COLD_100[0], "cold.peak_rss_mib": 90.0, **NOOP2[0], **VERIFIED2}),
        run("cold", 100, {"cold.seconds": COLD_100[3], "cold.peak_rss_mib": 94.0, **NOOP2[1], **VERIFIED2}),
        run("cold", 100, {"cold.seconds": COLD_100[2], "cold.peak_rss_mib": 91.0}),
        run("cold", 100, {"cold.seconds": COLD_100[1], "cold.peak_rss_mib": 93.0}),
    ]
    return [
        *cold100,
        run("cold", 1000, {"cold.seconds": 61.0, "cold.peak_rss_mib": 149.0}),
        run("cold", 500, {"cold.peak_rss_mib": 80.0}, error="TimeoutError: 500 Kustomizations Ready: not reached"),
        run("cold", 20, {"cold.seconds": 3.0, "cold.peak_rss_mib": 70.0}),
        run("latency", 100, {"latency.start_p99_ms": 80.0, "latency.samples": 100.0}),
        run("big", 1000, {"big1000.build_s": 1.0}),
        run("big", 1000, {"big1000.build_s": 3.0, "big1000.prune_s": 0.5}),
        run("failover", 10, {"failover.sigkill_s": 7.5, "failover.graceful_s": 1.25}),
        run("baseline", 100, {"baseline.serial_s": 50.0}),
        run("baseline", 100, {"baseline.parallel4_s": 20.0}),
        run("baseline", 200, {"baseline.serial_s": 70.0}),
    ]


def row(lines: list[str], start: str) -> str:
    matches = [line for line in lines if line.startswith(start)]
    assert len(matches) == 1, f"expected one row starting {start!r}, got {matches}"
    return matches[0]


# --- helpers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.00"),
        (1.234, "1.23"),
        (9.994, "9.99"),
        (10.0, "10.0"),
        (12.345, "12.3"),
        (99.94, "99.9"),
        (100.0, "100"),
        (123.6, "124"),
        (-12.34, "-12.3"),
        (-150.6, "-151"),
        (-0.5, "-0.50"),
    ],
)
def test_fmt_precision_depends_on_magnitude(value: float, text: str) -> None:
    assert report._fmt(value) == text


def test_stat_empty_is_na() -> None:
    assert report._stat([]) == "n/a"


def test_stat_single_value_has_no_range() -> None:
    assert report._stat([5.0]) == "5.00"


@pytest.mark.parametrize(
    ("values", "text"),
    [
        ([4.0, 1.0, 3.0, 2.0], "2.50 [1.00–4.00]"),  # even length: mean of the two middle values
        ([3.0, 1.0, 2.0], "2.00 [1.00–3.00]"),
        (COLD_100, "39.0 [10.0–100]"),
        ([150.0, 250.0], "200 [150–250]"),
    ],
)
def test_stat_is_median_with_min_and_max(values: list[float], text: str) -> None:
    assert report._stat(values) == text


def test_median_of_table() -> None:
    table = report._collect([run("cold", 100, {"cold.seconds": v}) for v in COLD_100])
    assert report._median(table, ("cold", 100), "cold.seconds") == 39.0
    assert report._median(table, ("cold", 100), "cold.cpu_s") is None
    assert report._median(table, ("cold", 500), "cold.seconds") is None


def test_collect_groups_by_scenario_and_size_and_skips_runs_without_metrics() -> None:
    table = report._collect([
        run("cold", 100, {"cold.seconds": 1}),
        run("cold", "100", {"cold.seconds": 2.5}),  # a size given as a string counts as the same size
        run("cold", 500, {"cold.seconds": 7}),
        {"scenario": "latency", "size": 100, "metrics": None, "error": "boom"},
    ])
    assert {k: dict(v) for k, v in table.items()} == {
        ("cold", 100): {"cold.seconds": [1.0, 2.5]},
        ("cold", 500): {"cold.seconds": [7.0]},
    }


@pytest.mark.parametrize(
    ("value", "target", "verdict"),
    [(None, 1.0, "not measured"), (0.5, 1.0, "met"), (1.0, 1.0, "met"), (1.0001, 1.0, "**not met**")],
)
def test_verdict(value: float | None, target: float, verdict: str) -> None:
    assert report._verdict(value, target) == verdict


# --- summary -------------------------------------------------------------------------------------------


def test_summary_cold_start_rows_use_median_and_targets() -> None:
    lines = report.summary(data_of(full_results()))
    assert lines[0].startswith("| measure | ours: median [min–max] |")
    assert row(lines, "| cold start, 100 Kustomizations ") == (
        "| cold start, 100 Kustomizations × 4 objects, to all Ready (s) | 39.0 [10.0–100] | 26 s / 32-134 MiB | "
        "≤ 1.5× upstream (39 s) | met |"
    )
    assert row(lines, "| controller peak RSS, cold start of 100 (MiB)") == (
        "| controller peak RSS, cold start of 100 (MiB) | 92.0 [90.0–94.0] | see above | — | — |"
    )
    assert row(lines, "| cold start, 1000 Kustomizations") == (
        "| cold start, 1000 Kustomizations × 4 objects, to all Ready (s) | 61.0 | 4m13s / 223 MiB | < 60 s | "
        "**not met** |"
    )
    assert row(lines, "| controller peak RSS, cold start of 1000 (MiB)") == (
        "| controller peak RSS, cold start of 1000 (MiB) | 149 | see above | < 150 MiB | met |"
    )


def test_summary_cold_start_rows_are_sorted_by_size() -> None:
    lines = report.summary(data_of(full_results()))
    sizes = [int(line.split(",")[1].split()[0]) for line in lines if line.startswith("| cold start,")]
    assert sizes == [20, 100, 500, 1000]


def test_summary_partial_run_is_not_measured() -> None:
    lines = report.summary(data_of(full_results()))
    assert row(lines, "| cold start, 500 Kustomizations") == (
        "| cold start, 500 Kustomizations × 4 objects, to all Ready (s) | n/a | 2m0s / 72-183 MiB | "
        "≤ 1.5× upstream (180 s) | not measured |"
    )


def test_summary_size_without_upstream_figure_has_no_target() -> None:
    lines = report.summary(data_of(full_results()))
    assert row(lines, "| cold start, 20 Kustomizations") == (
        "| cold start, 20 Kustomizations × 4 objects, to all Ready (s) | 3.00 | — | — | — |"
    )


def test_summary_requests_per_noop_reconcile() -> None:
    lines = report.summary(data_of(full_results()))
    # medians 13 requests, 4 status writes, 1 event: (13 - 4 - 1) / 4 objects = 2 per object
    assert row(lines, "| API requests per periodic no-op reconcile, 100 Kustomizations, first run") == (
        "| API requests per periodic no-op reconcile, 100 Kustomizations, first run | 13.0 = 2.00 per object × 4 "
        "+ 4.00 status writes + 1.00 event | 2 per object + status writes | ≤ 1 per object + the status write | "
        "objects: **not met**; status: **not met** (4.00 writes) |"
    )
    assert row(lines, "| API requests per periodic no-op reconcile, 100 Kustomizations, after a restart") == (
        "| API requests per periodic no-op reconcile, 100 Kustomizations, after a restart | 6.00 = 1.00 per object "
        "× 4 + 1.00 status writes + 1.00 event | 2 per object + status writes | ≤ 1 per object + the status "
        "write | objects: met; status: met (1.00 writes) |"
    )
    # sizes whose runs have no no-op rounds get no request rows
    assert not [line for line in lines if line.startswith("| API requests") and "1000 Kustomizations" in line]


def test_summary_requests_row_without_status_or_event_metrics_counts_them_as_zero() -> None:
    lines = report.summary(data_of([run("cold", 100, {"noop2.requests_per_reconcile": 4.0})]))
    assert "| 4.00 = 1.00 per object × 4 + 0.00 status writes + 0.00 event |" in row(lines, "| API requests")


def test_summary_latency_big_failover_rows() -> None:
    lines = report.summary(data_of(full_results()))
    assert row(lines, "| revision change → reconcile start") == (
        "| revision change → reconcile start, p99, 100 idle (ms) | 80.0 | — | < 100 ms | met |"
    )
    big = row(lines, "| one Kustomization of 1000 objects")
    assert "| build 2.00 [1.00–3.00]; first apply n/a; " in big
    assert "; prune 0.50; controller to Ready n/a |" in big
    assert row(lines, "| leader fail-over") == (
        "| leader fail-over to the first reconcile (s) | SIGKILL 7.50; graceful 1.25 "
        "| lease 35 s / retry 5 s (same defaults) | measured | — |"
    )


def test_summary_big_rows_judge_the_ratios_to_the_reference_run_by_run() -> None:
    """Issue 36 (bench/big.py): the controller against kubectl of the same directory, each run's ratio."""
    runs = [run("big", 5000, {"big5000.cold_s": cold, "big5000.noop_s": noop, "big5000.reference_s": ref,
                              "big5000.cold_ratio": cold / ref, "big5000.noop_ratio": noop / ref,
                              "big5000.change_s": 9.0, "big5000.cold_cpu_s": 10.0, "big5000.cold_kustomize_cpu_s": 3.0,
                              "big5000.kustomize_cpu_s": 70.0, "big5000.reference_kubectl_cpu_s": 90.0})
            for cold, noop, ref in ((30.0, 5.0, 100.0), (40.0, 4.0, 100.0), (15.0, 9.0, 50.0))]
    lines = report.summary(data_of(runs))
    cold = row(lines, "| one Kustomization of 5000 ConfigMaps, cold start")
    assert cold.endswith("| 30.0 [15.0–40.0]; 0.30 [0.30–0.40] | `kubectl kustomize \\| kubectl apply "
                         "--server-side` 100 [50.0–100] s | ≤ 1/3 of the reference | met |")
    noop = row(lines, "| one Kustomization of 5000 ConfigMaps, no-op")
    assert "| 5.00 [4.00–9.00]; 0.05 [0.04–0.18] |" in noop and noop.endswith("| ≤ 1/10 of the reference | met |")
    assert "| 10.0 [10.0–10.0] + 3.00 [3.00–3.00] | `kubectl kustomize` alone 70.0 [70.0–70.0] s; the " \
        "reference's two kubectl 90.0 [90.0–90.0] s |" in row(lines, "| one Kustomization of 5000 ConfigMaps, CPU cold")
    slow = report.summary(data_of([run("big", 1000, {"big1000.cold_s": 9.0, "big1000.cold_ratio": 2.5})]))
    assert row(slow, "| one Kustomization of 1000 ConfigMaps, cold start").endswith("| **not met** |")


def test_summary_latency_over_target_is_not_met() -> None:
    lines = report.summary(data_of([run("latency", 100, {"latency.start_p99_ms": v}) for v in (90.0, 150.0)]))
    assert row(lines, "| revision change") == (
        "| revision change → reconcile start, p99, 100 idle (ms) | 120 [90.0–150] | — | < 100 ms | **not met** |"
    )


def test_summary_baseline_compares_with_the_cold_start_median() -> None:
    lines = report.summary(data_of(full_results()))
    serial = row(lines, "| `kubectl kustomize \\| kubectl apply --server-side`, 100 apps, serial")
    assert serial == (
        "| `kubectl kustomize \\| kubectl apply --server-side`, 100 apps, serial (s) | 50.0 (1.28× the controller's "
        "cold start) | — | controller faster | met |"
    )
    parallel = row(lines, "| `kubectl kustomize \\| kubectl apply --server-side`, 100 apps, parallel4")
    assert parallel.endswith("| 20.0 (0.51× the controller's cold start) | — | controller faster | **not met** |")
    no_cold = row(lines, "| `kubectl kustomize \\| kubectl apply --server-side`, 200 apps, serial")
    assert no_cold.endswith("| 70.0 (no cold run of this size) | — | controller faster | — |")
    assert not [line for line in lines if "200 apps, parallel4" in line]


# --- details and render --------------------------------------------------------------------------------


def test_details_sections_and_run_counts() -> None:
    lines = report.details(data_of(full_results()))
    headings = [line for line in lines if line.startswith("### ")]
    assert headings == [
        "### baseline, size 100 (1 run)",
        "### baseline, size 200 (1 run)",
        "### big, size 1000 (2 runs)",
        "### cold, size 20 (1 run)",
        "### cold, size 100 (4 runs)",
        "### cold, size 500 (1 run)",
        "### cold, size 1000 (1 run)",
        "### failover, size 10 (1 run)",
        "### latency, size 100 (1 run)",
        "### Failed runs",
    ]
    assert "| `cold.seconds` | 39.0 [10.0–100] |" in lines
    assert "| `noop2.requests_per_reconcile` | 13.0 [12.0–14.0] |" in lines
    assert "| `big1000.prune_s` | 0.50 |" in lines


def test_details_metrics_sorted_within_a_section() -> None:
    lines = report.details(data_of([run("cold", 100, {"z.b": 1.0, "a.c": 2.0, "m.x": 3.0})]))
    assert [line.split("`")[1] for line in lines if line.startswith("| `")] == ["a.c", "m.x", "z.b"]


def test_details_lists_failed_runs_with_truncated_errors() -> None:
    long = "RuntimeError: " + "x" * 400
    lines = report.details(data_of([*full_results(), run("big", 5000, {}, error=long)]))
    failed = lines[lines.index("### Failed runs") + 2:]
    assert failed == [
        "- cold size 500: `TimeoutError: 500 Kustomizations Ready: not reached`",
        f"- big size 5000: `{long[:300]}`",
    ]


def test_details_without_failures_has_no_failed_section() -> None:
    assert "### Failed runs" not in report.details(data_of([run("cold", 100, {"cold.seconds": 1.0})]))


def test_render_machine_summary_details_and_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    analysis = tmp_path / "analysis.md"
    analysis.write_text("## Analysis\n\nhand-written words\n\n")
    monkeypatch.setattr(report, "ANALYSIS", analysis)
    text = report.render(data_of(full_results(), note="a busy machine"))
    assert text.startswith("# Benchmarks\n")
    assert text.endswith("## Analysis\n\nhand-written words\n")
    assert "- started 2026-11-22 12:58 UTC, took 23.5 min; command: `python -m bench --quick`\n" in text
    assert "- 2 CPUs (AMD EPYC), 23.5 GiB memory, Python 3.11.7, Linux-x86_64\n" in text
    assert "- load average (1/5/15 min) at the start: 0.87 1.68 2.82; at the end: 2.65 2.58 3.48\n" in text
    assert "- controller flags: `--concurrent=20 --kube-api-qps=-1`; Kustomizations with `wait: false`;" in text
    assert "- **conditions:** a busy machine\n" in text
    summary_at, numbers_at = text.index("## Summary against upstream"), text.index("## All numbers")
    assert summary_at < text.index("| 39.0 [10.0–100] | 26 s / 32-134 MiB |") < numbers_at
    assert numbers_at < text.index("### cold, size 100 (4 runs)") < text.index("## Analysis")


def test_render_without_note_or_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "ANALYSIS", tmp_path / "missing.md")
    data = data_of([run("cold", 100, {"cold.seconds": 1.0})])
    data["plan"]["wait"] = True
    text = report.render(data)
    assert "conditions:" not in text
    assert "`wait: true`" in text
    assert text.endswith("| `cold.seconds` | 1.00 |\n")


def test_render_the_stored_results() -> None:
    """The JSON the suite last wrote renders, with one section per (scenario, size) whose run count is
    the most runs any of its metrics has (the serial and parallel baselines are two records of one run)."""
    data = json.loads(RESULTS_JSON.read_text())
    text = report.render(data)
    per_metric: dict[tuple[str, int], dict[str, int]] = {}
    for r in data["results"]:
        counts = per_metric.setdefault((r["scenario"], int(r["size"])), {})
        for metric in r.get("metrics") or {}:
            counts[metric] = counts.get(metric, 0) + 1
    for (scenario, size), counts in per_metric.items():
        if not counts:
            continue
        count = max(counts.values())
        assert f"### {scenario}, size {size} ({count} run{'s' if count != 1 else ''})" in text
    seconds = [r["metrics"]["cold.seconds"] for r in data["results"]
               if r["scenario"] == "cold" and int(r["size"]) == 100 and "cold.seconds" in r["metrics"]]
    if seconds:
        assert f"| `cold.seconds` | {report._stat(seconds)} |" in text
        assert report._fmt(statistics.median(seconds)) in row(text.splitlines(), "| cold start, 100 Kustomizations ")


@pytest.mark.parametrize(
    ("result", "start"),
    [
        (run("cold", 1000, {"cold.seconds": 60.0}), "| cold start, 1000 Kustomizations "),
        (run("cold", 1000, {"cold.peak_rss_mib": 150.0}), "| controller peak RSS, cold start of 1000 (MiB)"),
        (run("latency", 100, {"latency.start_p99_ms": 100.0}), "| revision change → reconcile start"),
    ],
)
def test_strict_targets_are_not_met_on_the_boundary(result: dict[str, Any], start: str) -> None:
    line = row(report.summary(data_of([result])), start)
    assert line.endswith("| **not met** |"), line


@pytest.mark.parametrize(("value", "text"), [(99.96, "100"), (9.996, "10.0"), (99.94, "99.9"), (-99.96, "-100")])
def test_fmt_chooses_decimals_after_rounding(value: float, text: str) -> None:
    assert report._fmt(value) == text


def test_summary_starvation_and_chain_rows_judge_the_medians() -> None:
    results = [
        run("starvation", 100, {"starvation.released_s": 13.0}),
        run("starvation", 100, {"starvation.released_s": 11.0}),
        run("starvation", 100, {"starvation.no_broken_s": 10.0}),
        run("starvation", 100, {"starvation.held_s": 250.0}),
        run("chain", 10, {"chain.events_s": 4.0, "chain.polling_s": 270.0}),
    ]
    lines = report.summary(data_of(results))
    starvation = next(line for line in lines if "broken health waits" in line)
    assert "12.0 [11.0–13.0] (no broken ones: 10.0)" in starvation
    assert "worker-held (upstream): 250" in starvation and "(12.0 s)" in starvation
    assert starvation.endswith("| met |")  # 12.0 ≤ 1.2 × 10.0
    chain = next(line for line in lines if "dependency chain of 10" in line)
    assert "| 4.00 | polling (upstream): 270 | < 10 s | met |" in chain
    slow = report.summary(data_of([run("starvation", 100, {"starvation.released_s": 12.5,
                                                           "starvation.no_broken_s": 10.0}),
                                   run("chain", 10, {"chain.events_s": 10.0})]))
    assert all(line.endswith("| **not met** |") for line in slow if "broken" in line or "chain" in line)
    missing = report.summary(data_of([run("starvation", 100, {"starvation.released_s": 12.5})]))
    assert next(line for line in missing if "broken" in line).endswith("| not measured |")


def test_scale_rows_give_a_row_per_layout_and_the_growth_per_kustomization() -> None:
    from bench import report

    def run(size: int, layout: str, cold: float, rss: float) -> dict[str, Any]:
        return {"scenario": "scale", "size": size, "error": "",
                "metrics": {f"{layout}.cold_s": cold, f"{layout}.cold_cpu_ms_per_ks": 30.0,
                            f"{layout}.peak_rss_mib": rss, f"{layout}.cpus_per_process": 2.0}}

    results = [run(1000, "one", 60.0, 120.0), run(1000, "shards4", 55.0, 70.0),
               run(10000, "one", 660.0, 300.0), run(10000, "shards4", 600.0, 100.0)]
    lines = report.scale_rows(report._collect(results))
    rows = [line for line in lines if line.startswith("| 1")]
    assert [r.split(" | ")[1] for r in rows] == ["one", "shards4", "one", "shards4"]
    text = "\n".join(lines)
    assert "cold start (s) per Kustomization: 60.0 → 66.0 (ms), ×1.10" in text
    assert "controller CPU ms/Ks (cold): 30.0 → 30.0, ×1.00" in text
    assert "peak RSS MiB (largest process): 120 → 300, 20.5 KiB per added Kustomization; 300 MiB at 10,000" in text
    assert "CPUs per process" in lines[0] and "CPUs per process" not in text.split("Growth", 1)[1]
    assert report.scale_rows(report._collect([])) == []
