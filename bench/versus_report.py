"""The side-by-side report (issue 36): our controller and upstream's, phase by phase, with ours ÷ upstream.

One table per ``--concurrent`` setting. A row is one phase of one scenario; each cell is
``ours / upstream (ours ÷ upstream)``, the medians over the rounds. Wall seconds; the controller's CPU
seconds with all its descendants; the API server's and etcd's CPU seconds together; the controller's API
requests per Kustomization (per object in ``big``, per revision in ``latency``); its peak RSS (on the
scenario's first row: a run has one): the main process's ``VmHWM``, and two peaks over the process and its
children seen by a sampler every 0.25 s (our kustomize builders; upstream builds in-process): the sum of
their RSS, which counts the builders' shared binary once per builder, and their memory with each page once
(the main process's RSS plus the children's PSS, ``procs.tree_rss_and_memory_mib``). The
``big`` scenario adds the ``kubectl kustomize | kubectl apply --server-side`` reference of the same directory,
and each controller's cold start and no-op round divided by it. ``render`` adds the machine, every metric
side by side and the failed runs.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from bench.report import _fmt

Group = dict[str, list[float]]  # metric -> values over the rounds
SCENARIO_ORDER = ("cold", "latency", "monorepo", "big", "sops", "starvation", "chain")
PHASES = {
    "cold": "cold start", "revision": "new revision", "noop": "no-op round", "one_app": "one app changed",
    "shared_base": "a component of every 10th app changed", "change": "one object changed",
    "healthy": "healthy ones to Ready", "chain": "all Ready", "latency": "all revisions",
}


def _title(scenario: str, size: int) -> str:
    return {
        "cold": f"{size:,} Kustomizations × 4 objects",
        "latency": f"{size:,} idle, one new revision at a time",
        "monorepo": f"monorepo of {size:,} apps",
        "big": f"one Kustomization of {size:,} ConfigMaps",
        "sops": f"{size:,} Kustomizations × 10 SOPS Secrets",
        "starvation": f"{size:,} healthy behind 8 never-healthy (wait: true)",
        "chain": f"dependency chain of {size:,}",
    }.get(scenario, f"{scenario} {size}")


def collect(results: list[dict[str, Any]]) -> dict[tuple[str, int, int, str], Group]:
    """(scenario, size, concurrent, controller) → metric → values; failed runs left out."""
    table: dict[tuple[str, int, int, str], Group] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if not str(r.get("scenario", "")).startswith("versus-") or r.get("error"):
            continue
        key = (r["scenario"].removeprefix("versus-"), int(r["size"]), int(r["concurrent"]), str(r["controller"]))
        group = table[key]
        metrics = r.get("metrics") or {}
        for metric, value in metrics.items():
            group[metric].append(float(value))
        for phase in _phases(metrics):
            plane = [metrics.get(f"{phase}.{p}_cpu_s") for p in ("apiserver", "etcd")]
            if any(v is not None for v in plane):
                group[f"{phase}.plane_cpu_s"].append(sum(v or 0.0 for v in plane))
    return table


def _phases(metrics: dict[str, float]) -> list[str]:
    return [k.removesuffix(".seconds") for k in metrics if k.endswith(".seconds") and "." not in k[:-8]]


def _med(group: Group | None, metric: str) -> float | None:
    values = (group or {}).get(metric)
    return statistics.median(values) if values else None


def pair(ours: float | None, upstream: float | None) -> str:
    """``ours / upstream (ratio×)``; a side not measured is ``—``."""
    if ours is None and upstream is None:
        return "—"
    a = _fmt(ours) if ours is not None else "—"
    b = _fmt(upstream) if upstream is not None else "—"
    ratio = f" ({ours / upstream:.2f}×)" if ours is not None and upstream else ""
    return f"{a} / {b}{ratio}"


def cut_pair(ours: Group | None, upstream: Group | None, phase: str, size: int) -> str:
    """The wall cell of a phase ``--cold-limit`` cut short on one side or both: the cut side as ``> seconds (k of
    n Ready)``, a lower bound, and the ratio as ``<``."""
    def side(group: Group | None) -> tuple[str, float | None, bool]:
        seconds = _med(group, f"{phase}.seconds")
        done = _med(group, f"{phase}.ready_at_limit")
        if seconds is None:
            return "—", None, False
        if done is None:
            return _fmt(seconds), seconds, False
        return f"> {_fmt(seconds)} ({done:,.0f} of {size:,} Ready)", seconds, True
    a, x, cut_a = side(ours)
    b, y, cut_b = side(upstream)
    ratio = f" (< {x / y:.2f}×)" if x is not None and y and cut_b and not cut_a else ""
    return f"{a} / {b}{ratio}"


COLUMNS = (("wall s", "seconds"), ("controller CPU s", "cpu_s"), ("API server + etcd CPU s", "plane_cpu_s"),
           ("requests / Ks", "requests_per_ks"))


MEMORY = ("peak_rss_mib", "tree_peak_rss_mib", "tree_peak_memory_mib")


def tables(data: dict[str, Any]) -> list[str]:
    table = collect(data["results"])
    settings = sorted({k[2] for k in table if k[3] != "kubectl"})
    lines: list[str] = []
    for concurrent in settings:
        lines += ["", f"#### `--concurrent {concurrent}`: ours / upstream (ours ÷ upstream), medians", "",
                  "| scenario | phase | " + " | ".join(label for label, _ in COLUMNS)
                  + " | peak RSS MiB | with children: RSS summed | with children: each page once |",
                  "| --- | --- | " + " | ".join("---" for _ in COLUMNS) + " | --- | --- | --- |"]
        keys = sorted({(k[0], k[1]) for k in table if k[2] == concurrent},
                      key=lambda k: (SCENARIO_ORDER.index(k[0]) if k[0] in SCENARIO_ORDER else 99, k[1]))
        for scenario, size in keys:
            lines += _rows(table, scenario, size, concurrent)
    return lines


def _rows(table: dict[tuple[str, int, int, str], Group], scenario: str, size: int, concurrent: int) -> list[str]:
    ours = table.get((scenario, size, concurrent, "ours"))
    upstream = table.get((scenario, size, concurrent, "upstream"))
    phases: list[str] = []
    for group in (ours, upstream):
        for metric in group or {}:
            phase = metric.removesuffix(".seconds")
            if metric.endswith(".seconds") and "." not in phase and phase not in phases:
                phases.append(phase)
    title = _title(scenario, size)
    rows = []
    for k, phase in enumerate(phases):
        cells = [pair(_med(ours, f"{phase}.{metric}"), _med(upstream, f"{phase}.{metric}")) for _, metric in COLUMNS]
        if any(_med(group, f"{phase}.ready_at_limit") is not None for group in (ours, upstream)):
            cells[0] = cut_pair(ours, upstream, phase, size)
        rss = [pair(_med(ours, m), _med(upstream, m)) if k == 0 else "" for m in MEMORY]
        rows.append(f"| {title if k == 0 else ''} | {PHASES.get(phase, phase)} | " + " | ".join(cells + rss) + " |")
    if scenario == "latency":
        for q in ("p50", "p99"):
            cell = pair(_med(ours, f"latency.ready_{q}_ms"), _med(upstream, f"latency.ready_{q}_ms"))
            rows.append(f"| | revision → Ready, {q} (ms) | {cell} | | | | | | |")
    reference = table.get((scenario, size, 0, "kubectl"))
    if scenario == "big" and reference:
        ref = _med(reference, "reference.seconds")
        rows.append(
            f"| | `kubectl kustomize \\| kubectl apply --server-side` | {_fmt(ref) if ref else '—'} | "
            f"{_fmt(_med(reference, 'reference.cpu_s') or 0.0)} (kubectl) | "
            f"{_fmt(_med(reference, 'reference.plane_cpu_s') or 0.0)} | "
            f"{_fmt(_med(reference, 'reference.requests_per_ks') or 0.0)} | | | |")
        if ref:
            for phase in ("cold", "noop"):
                a, b = _med(ours, f"{phase}.seconds"), _med(upstream, f"{phase}.seconds")
                rows.append(f"| | {PHASES[phase]} ÷ the reference | "
                            f"{_fmt(a / ref) if a is not None else '—'} / {_fmt(b / ref) if b is not None else '—'} "
                            "| | | | | | |")
    return rows


def details(data: dict[str, Any]) -> list[str]:
    table = collect(data["results"])
    lines: list[str] = []
    for scenario, size, concurrent in sorted({k[:3] for k in table}):
        ours = table.get((scenario, size, concurrent, "ours"))
        upstream = table.get((scenario, size, concurrent, "upstream"))
        other = table.get((scenario, size, concurrent, "kubectl"))
        setting = f"--concurrent {concurrent}" if concurrent else "the kubectl reference"
        lines += ["", f"#### {scenario}, size {size}, {setting}", ""]
        if other is not None:
            lines += ["| metric | median [runs] |", "| --- | --- |"]
            lines += [f"| `{k}` | {_fmt(statistics.median(v))} [{len(v)}] |" for k, v in sorted(other.items())]
            continue
        lines += ["| metric | ours / upstream (÷) |", "| --- | --- |"]
        metrics = sorted(set(ours or {}) | set(upstream or {}))
        lines += [f"| `{k}` | {pair(_med(ours, k), _med(upstream, k))} |" for k in metrics]
    return lines


def render(data: dict[str, Any]) -> str:
    m, p = data["machine"], data["plan"]
    loads = [f"{r['controller']} c{r['concurrent']} r{r['round']}: {r.get('loadavg', '?')}"
             for r in data["results"] if r.get("loadavg")]
    lines = [
        "# Side by side: our kustomize-controller and upstream's (issue 36)",
        "",
        f"- started {data.get('started', '?')}, took {data.get('duration_s', 0) / 60:.1f} min; command: "
        f"`{data.get('command', 'python -m bench')}`",
        f"- cluster: {p.get('cluster')}; controllers {', '.join(p.get('controllers', []))}; --concurrent "
        f"{', '.join(str(c) for c in p.get('concurrent', []))}; {p.get('rounds')} round(s), A B A B",
        f"- {m.get('nproc')} CPUs ({m.get('cpu')}), {m.get('memory')} memory, Python {m.get('python')}, "
        f"{m.get('platform')}",
        f"- load average (1/5/15 min) at the start: {m.get('loadavg')}; at the end: {data.get('loadavg_end', '?')}",
    ]
    if data.get("note"):
        lines.append(f"- **conditions:** {data['note']}")
    lines += ["", "### Summary", *tables(data), "", "### Every metric", *details(data)]
    errors = [r for r in data["results"] if r.get("error")]
    if errors:
        lines += ["", "### Failed runs", ""]
        lines += [f"- {r['scenario']} size {r['size']} {r['controller']} --concurrent {r['concurrent']} round "
                  f"{r['round']}: `{r['error'][:300]}`" for r in errors]
    lines += ["", "### Load average at the start of each run", "", *(f"- {x}" for x in loads)]
    return "\n".join(lines) + "\n"
