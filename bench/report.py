"""Render docs/benchmarks.md from the results of ``python -m bench`` (see cli.py for the JSON shape).

The report has: the machine and the command, a summary against upstream's published figures and the
issue's targets (verdicts are computed from the numbers, never written by hand), every metric as
median [min–max] over the runs, and the hand-written analysis kept in ``bench/analysis.md``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import request_counts

ANALYSIS = Path(__file__).resolve().parent / "analysis.md"

UPSTREAM_COLD = {100: (26.0, "26 s / 32-134 MiB"), 500: (120.0, "2m0s / 72-183 MiB"), 1000: (253.0, "4m13s / 223 MiB")}
OBJECTS_PER_KS = 4


def _collect(results: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, list[float]]]:
    table: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for metric, value in (r.get("metrics") or {}).items():
            table[(r["scenario"], int(r["size"]))][metric].append(float(value))
    return table


def _fmt(value: float) -> str:
    # judged on the rounded value, so that 99.96 prints "100", not "100.0"
    if abs(round(value, 1)) >= 100:
        return f"{value:.0f}"
    if abs(round(value, 2)) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _stat(values: list[float]) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return _fmt(med)
    return f"{_fmt(med)} [{_fmt(min(values))}–{_fmt(max(values))}]"


def _median(table: dict[tuple[str, int], dict[str, list[float]]], key: tuple[str, int], metric: str) -> float | None:
    values = table.get(key, {}).get(metric)
    return statistics.median(values) if values else None


def _verdict(value: float | None, target: float, *, strict: bool = False) -> str:
    """``strict``: the target is "under" (``<``), else "at most" (``<=``)."""
    if value is None:
        return "not measured"
    return "met" if (value < target if strict else value <= target) else "**not met**"


def summary(data: dict[str, Any]) -> list[str]:
    table = _collect(data["results"])
    lines = [
        "| measure | ours: median [min–max] | upstream Flux (flux-benchmark) | target (issue 9) | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for size in sorted({k[1] for k in table if k[0] == "cold"}):
        key = ("cold", size)
        seconds = table[key].get("cold.seconds", [])
        rss = table[key].get("cold.peak_rss_mib", [])
        up_s, up_text = UPSTREAM_COLD.get(size, (None, "—"))
        target = "< 60 s" if size == 1000 else (f"≤ 1.5× upstream ({1.5 * up_s:.0f} s)" if up_s else "—")
        goal = 60.0 if size == 1000 else (1.5 * up_s if up_s else None)
        lines.append(
            f"| cold start, {size} Kustomizations × 4 objects, to all Ready (s) | {_stat(seconds)} | {up_text} | "
            f"{target} | {_verdict(_median(table, key, 'cold.seconds'), goal, strict=size == 1000) if goal else '—'} |"
        )
        lines.append(
            f"| controller peak RSS, cold start of {size} (MiB) | {_stat(rss)} | see above | "
            f"{'< 150 MiB' if size == 1000 else '—'} | "
            f"{_verdict(_median(table, key, 'cold.peak_rss_mib'), 150.0, strict=True) if size == 1000 else '—'} |"
        )
    for size in sorted({k[1] for k in table if k[0] == "cold"}):
        key = ("cold", size)
        for label, round_ in (("first run", "noop2"), ("after a restart", "verified_noop2")):
            total = _median(table, key, f"{round_}.requests_per_reconcile")
            if total is None:
                continue
            status = _median(table, key, f"{round_}.status_writes_per_reconcile") or 0.0
            events = _median(table, key, f"{round_}.POST_per_reconcile") or 0.0
            per_object = (total - status - events) / OBJECTS_PER_KS
            lines.append(
                f"| API requests per periodic no-op reconcile, {size} Kustomizations, {label} | "
                f"{_fmt(total)} = {_fmt(per_object)} per object × {OBJECTS_PER_KS} + {_fmt(status)} status "
                f"writes + {_fmt(events)} event | 2 per object + status writes | ≤ 1 per object + the status "
                f"write | objects: {_verdict(per_object, 1.0)}; status: "
                f"{_verdict(status, 1.0)} ({_fmt(status)} writes) |"
            )
    for key in sorted(k for k in table if k[0] == "latency"):
        p99 = table[key].get("latency.start_p99_ms", [])
        lines.append(
            f"| revision change → reconcile start, p99, {key[1]} idle (ms) | {_stat(p99)} | — | < 100 ms | "
            f"{_verdict(_median(table, key, 'latency.start_p99_ms'), 100.0, strict=True)} |"
        )
    for key in sorted(k for k in table if k[0] == "big"):
        lines += _big_rows(table, key)
    for key in sorted(k for k in table if k[0] == "failover"):
        kill, graceful = table[key].get("failover.sigkill_s", []), table[key].get("failover.graceful_s", [])
        lines.append(
            f"| leader fail-over to the first reconcile (s) | SIGKILL {_stat(kill)}; graceful {_stat(graceful)} "
            "| lease 35 s / retry 5 s (same defaults) | measured | — |"
        )
    for key in sorted(k for k in table if k[0] == "baseline"):
        size = key[1]
        cold = _median(table, ("cold", size), "cold.seconds")
        for mode in ("serial", "parallel4"):
            base = _median(table, key, f"baseline.{mode}_s")
            if base is None:
                continue
            ratio = f"{base / cold:.2f}× the controller's cold start" if cold else "no cold run of this size"
            lines.append(
                f"| `kubectl kustomize \\| kubectl apply --server-side`, {size} apps, {mode} (s) | {_fmt(base)} "
                f"({ratio}) | — | controller faster | "
                f"{('met' if cold and base > cold else '**not met**') if cold else '—'} |"
            )
    lines += _cache_rows(table)
    lines += _issue15(table)
    return lines


def _big_rows(table: dict[tuple[str, int], dict[str, list[float]]], key: tuple[str, int]) -> list[str]:
    """One Kustomization of ``key[1]`` objects (issue 36, bench/big.py): the controller against ``kubectl
    kustomize | kubectl apply --server-side`` of the same directory, ratios taken run by run."""
    n = key[1]
    got = table[key]

    def stat(metric: str) -> str:
        return _stat(got.get(f"big{n}.{metric}", []))

    if f"big{n}.cold_s" not in got:  # results of the scenario before issue 36 (the engine in the driver)
        parts = [f"{name} {stat(metric)}" for name, metric in (
            ("build", "build_s"), ("first apply", "first_apply_s"), ("no-op (dry-runs)", "noop_dry_run_s"),
            ("no-op (verified)", "noop_verified_s"), ("prune", "prune_s"),
            ("controller to Ready", "controller_ready_s"))]
        return [f"| one Kustomization of {n} objects (s) | {'; '.join(parts)} | 1,500 objects: 25 s "
                "(kustomize-controller #1428) | measured | — |"]
    reference = f"`kubectl kustomize \\| kubectl apply --server-side` {stat('reference_s')} s"
    return [
        f"| one Kustomization of {n} ConfigMaps, cold start to Ready (s); ÷ the reference | {stat('cold_s')}; "
        f"{stat('cold_ratio')} | {reference} | ≤ 1/3 of the reference | "
        f"{_verdict(_median(table, key, f'big{n}.cold_ratio'), 1 / 3)} |",
        f"| one Kustomization of {n} ConfigMaps, no-op reconcile (s); ÷ the reference | {stat('noop_s')}; "
        f"{stat('noop_ratio')} | {reference} | ≤ 1/10 of the reference | "
        f"{_verdict(_median(table, key, f'big{n}.noop_ratio'), 1 / 10)} |",
        f"| one Kustomization of {n} ConfigMaps, one object changed (s) | {stat('change_s')} | — | measured | — |",
        f"| one Kustomization of {n} ConfigMaps, CPU cold: controller + its kustomize children (s) | "
        f"{stat('cold_cpu_s')} + {stat('cold_kustomize_cpu_s')} | `kubectl kustomize` alone {stat('kustomize_cpu_s')}"
        f" s; the reference's two kubectl {stat('reference_kubectl_cpu_s')} s | measured | — |",
    ]


def _cache_rows(table: dict[tuple[str, int], dict[str, list[float]]]) -> list[str]:
    """Issue 17: periodic no-op rounds and the monorepo scenario (downloads and kustomize runs counted)."""
    lines: list[str] = []
    for size in sorted({k[1] for k in table if k[0] == "cold"}):
        key = ("cold", size)
        seconds = _median(table, key, "noop2.seconds")
        runs = _median(table, key, "noop2.kustomize_runs")
        downloads = _median(table, key, "noop2.downloads")
        if seconds is None or runs is None or downloads is None:
            continue
        goal = "< 10 s, no download, no build" if size == 1000 else "no download, no build"
        ok = runs == 0 and downloads == 0 and (seconds < 10.0 if size == 1000 else True)
        lines.append(
            f"| periodic no-op round, {size} Kustomizations with their own sources (s) | "
            f"{_stat(table[key]['noop2.seconds'])}; {_fmt(downloads)} downloads, {_fmt(runs)} kustomize runs | "
            f"1,000: 37.8 s, 1,000 downloads (issue 17) | {goal} (issue 17) | {'met' if ok else '**not met**'} |"
        )
    for key in sorted(k for k in table if k[0] == "monorepo"):
        n = key[1]

        def med(metric: str, key: tuple[str, int] = key) -> float:
            return _median(table, key, metric) or 0.0

        cold = f"{_stat(table[key].get('cold.seconds', []))} ({_fmt(med('cold.downloads'))} download, " \
            f"{_fmt(med('cold.kustomize_runs'))} kustomize runs, {_fmt(med('cold.peak_rss_mib'))} MiB peak RSS)"
        lines.append(f"| monorepo of {n} apps, cold start to all Ready (s) | {cold} | — | measured | — |")
        one = med("one_app.seconds")
        one_ok = med("one_app.downloads") == 1 and med("one_app.kustomize_runs") == 1 and (n != 1000 or one < 10.0)
        lines.append(
            f"| monorepo of {n} apps, one app changed, to all at the new revision (s) | "
            f"{_stat(table[key].get('one_app.seconds', []))}; {_fmt(med('one_app.downloads'))} download, "
            f"{_fmt(med('one_app.kustomize_runs'))} kustomize run, {_fmt(med('one_app.cpu_s'))} CPU s | "
            f"N = 300: 110 s, 300 downloads (issue 17) | {'< 10 s, ' if n == 1000 else ''}1 download, "
            f"1 kustomize run | {'met' if one_ok else '**not met**'} |"
        )
        dependants = -(-n // 10)
        base_ok = med("shared_base.kustomize_runs") == dependants and med("shared_base.downloads") == 1
        lines.append(
            f"| monorepo of {n} apps, a base shared by {dependants} changed (s) | "
            f"{_stat(table[key].get('shared_base.seconds', []))}; {_fmt(med('shared_base.kustomize_runs'))} "
            f"kustomize runs, {_fmt(med('shared_base.cpu_s'))} CPU s | — | exactly the {dependants} dependants "
            f"rebuild | {'met' if base_ok else '**not met**'} |"
        )
    return lines


def _issue15(table: dict[tuple[str, int], dict[str, list[float]]]) -> list[str]:
    """Starvation and dependency-chain rows (issue 15); verdicts from the medians."""
    lines: list[str] = []
    for key in sorted(k for k in table if k[0] == "starvation"):
        released = _median(table, key, "starvation.released_s")
        clean = _median(table, key, "starvation.no_broken_s")
        held = table[key].get("starvation.held_s", [])
        goal = 1.2 * clean if clean is not None else None
        lines.append(
            f"| {key[1]} healthy Kustomizations to Ready behind 8 broken health waits, --concurrent=4 (s; issue 15) | "
            f"{_stat(table[key].get('starvation.released_s', []))} (no broken ones: "
            f"{_stat(table[key].get('starvation.no_broken_s', []))}) | worker-held (upstream): {_stat(held)} | "
            f"≤ 1.2× no broken ones{f' ({_fmt(goal)} s)' if goal else ''} | "
            f"{_verdict(released, goal) if goal else 'not measured'} |"
        )
    for key in sorted(k for k in table if k[0] == "chain"):
        events = table[key].get("chain.events_s", [])
        polling = table[key].get("chain.polling_s", [])
        lines.append(
            f"| dependency chain of {key[1]} to all Ready, --requeue-dependency=30s (s; issue 15) | {_stat(events)} | "
            f"polling (upstream): {_stat(polling)} | < 10 s | "
            f"{_verdict(_median(table, key, 'chain.events_s'), 10.0, strict=True)} |"
        )
    return lines


# (label, metric suffix, per-Kustomization figure?) of the scale table (issue 27)
_SCALE_COLUMNS = (
    ("CPUs per process", "cpus_per_process"),
    ("cold start (s)", "cold_s"),
    ("cold ms/Ks", "cold_ms_per_ks"),
    ("controller CPU ms/Ks (cold)", "cold_cpu_ms_per_ks"),
    ("kustomize CPU ms/Ks", "cold_kustomize_cpu_ms_per_ks"),
    ("API server CPU ms/Ks", "cold_apiserver_cpu_ms_per_ks"),
    ("requests/Ks (cold)", "cold_requests_per_ks"),
    ("new revision (s)", "revision.seconds"),
    ("requests/Ks (revision)", "revision.requests_per_ks"),
    ("no-op round (s)", "noop1.seconds"),
    ("no-op CPU ms/Ks", "noop1.cpu_ms_per_reconcile"),
    ("peak RSS MiB (largest process)", "peak_rss_mib"),
)


def scale_rows(table: dict[tuple[str, int], dict[str, list[float]]]) -> list[str]:
    """The ``scale`` scenario (issue 27): one row per size and layout, then how each figure grows."""
    sizes = sorted(k[1] for k in table if k[0] == "scale")
    if not sizes:
        return []
    lines = ["| Kustomizations | layout | " + " | ".join(label for label, _ in _SCALE_COLUMNS) + " |",
             "| --- | --- | " + " | ".join("---" for _ in _SCALE_COLUMNS) + " |"]
    layouts = sorted({m.split(".", 1)[0] for size in sizes for m in table[("scale", size)]},
                     key=lambda x: (x != "one", x))
    for size in sizes:
        for layout in layouts:
            metrics = table[("scale", size)]
            if f"{layout}.cold_s" not in metrics:
                continue
            cells = [_stat(metrics.get(f"{layout}.{suffix}", [])) for _, suffix in _SCALE_COLUMNS]
            lines.append(f"| {size:,} | {layout} | " + " | ".join(cells) + " |")
    for layout in layouts:
        measured = [s for s in sizes if _median(table, ("scale", s), f"{layout}.cold_s") is not None]
        if len(measured) < 2:
            continue
        low, high = measured[0], measured[-1]
        lines += ["", f"Growth, {layout}, {low:,} → {high:,} Kustomizations ({high / low:.0f}× the work): "
                  "per-Kustomization figures, ratio high/low (1.0 is linear scaling):", ""]
        for label, suffix in _SCALE_COLUMNS:
            a = _median(table, ("scale", low), f"{layout}.{suffix}")
            b = _median(table, ("scale", high), f"{layout}.{suffix}")
            if a is None or b is None or not a or suffix in ("cold_ms_per_ks", "cpus_per_process"):
                continue
            if suffix == "peak_rss_mib":  # a fixed base plus a slope: give the slope and where it leads
                slope = (b - a) / (high - low)
                lines.append(f"- {label}: {_fmt(a)} → {_fmt(b)}, {_fmt(slope * 1024)} KiB per added Kustomization; "
                             f"{_fmt(b + slope * (10000 - high))} MiB at 10,000 on that slope")
                continue
            per_ks = "/Ks" in label
            ratio = b / a if per_ks else (b / high) / (a / low)
            what = label if per_ks else f"{label} per Kustomization"
            lines.append(f"- {what}: {_fmt(a if per_ks else a / low * 1000)} → "
                         f"{_fmt(b if per_ks else b / high * 1000)}{'' if per_ks else ' (ms)'}, ×{ratio:.2f}")
    return lines


def details(data: dict[str, Any]) -> list[str]:
    table = _collect(data["results"])
    lines: list[str] = []
    for (scenario, size), metrics in sorted(table.items()):
        runs = max(len(v) for v in metrics.values())
        lines += ["", f"### {scenario}, size {size} ({runs} run{'s' if runs != 1 else ''})", "",
                  "| metric | median [min–max] |", "| --- | --- |"]
        lines += [f"| `{metric}` | {_stat(values)} |" for metric, values in sorted(metrics.items())]
    errors = [r for r in data["results"] if r.get("error")]
    if errors:
        lines += ["", "### Failed runs", ""]
        lines += [f"- {r['scenario']} size {r['size']}: `{r['error'][:300]}`" for r in errors]
    return lines


def render(data: dict[str, Any]) -> str:
    m = data["machine"]
    p = data["plan"]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `python -m bench` (`make bench`, `make bench ARGS=--quick`); do not edit by hand — the",
        "analysis section comes from `bench/analysis.md`. Re-render without re-running:",
        "`python -m bench --from-json FILE` (with a file kept by `--json FILE`).",
        "",
        "## Machine and run",
        "",
        f"- started {data.get('started', '?')}, took {data.get('duration_s', 0) / 60:.1f} min; command: "
        f"`{data.get('command', 'python -m bench')}`",
        f"- {m.get('nproc')} CPUs ({m.get('cpu')}), {m.get('memory')} memory, Python {m.get('python')}, "
        f"{m.get('platform')}",
        f"- kubectl: {m.get('kubectl')}",
        f"- load average (1/5/15 min) at the start: {m.get('loadavg')}; at the end: {data.get('loadavg_end', '?')}",
        f"- controller flags: `{' '.join(p['controller_flags'])}`; Kustomizations with "
        f"`wait: {str(p['wait']).lower()}`;"
        " API server, controller and kustomize on the same machine (the API server is the embedded one,"
        " its own process, with `--simulate-workloads`)",
    ]
    if data.get("note"):
        lines.append(f"- **conditions:** {data['note']}")
    lines += ["", "## Summary against upstream and the targets", "", *summary(data), ""]
    table = _collect(data["results"])
    for size in sorted(k[1] for k in table if k[0] == "requests"):
        lines += request_counts.render(table[("requests", size)], size)
    scale_lines = scale_rows(table)
    if scale_lines:
        lines += ["## Thousands of Kustomizations, one process and shards (issue 27)", "", *scale_lines, ""]
    lines += ["## All numbers",
              "", "Median [min–max] over the runs; durations in seconds unless the name says otherwise.",
              *details(data)]
    if ANALYSIS.exists():
        lines += ["", ANALYSIS.read_text().rstrip()]
    return "\n".join(lines) + "\n"
