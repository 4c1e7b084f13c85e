"""``python -m bench``: run the scenarios, keep the raw results as JSON, write docs/benchmarks.md.

Defaults are sized for a 2-core machine (about 15-20 minutes): cold start (+ new revision + no-op
rounds) at 100 (3 runs), 500 (1 run) and 1,000 (1 run) Kustomizations, latency with 100 idle
Kustomizations (100 samples), one big Kustomization of 1,000 and 5,000 objects (cold, one object changed,
no-op, against ``kubectl kustomize | kubectl apply --server-side`` of the same directory; bench/big.py),
leader fail-over, and
the kubectl baseline at 100 (serial and 4 at a time), and the cloud key services' first decryption
(issue 23). ``--quick`` is a few-minute smoke run. Not in the default run: ``--scenarios ui`` (issue 37, the
web UI with 1,000 Kustomizations in headless chromium: bench/ui.py), ``--scenarios scale`` (issue 27),
1,000 to 10,000 Kustomizations in one process and in 4 shards (``--scale-sizes``, ``--scale-shards``;
``4/1``: the first of four shards alone; bench/scale.py), tens of minutes per size at 10,000.
``--from-json FILE`` only re-renders the report from a previous run's results.

``--controllers ours,upstream`` (issue 36) runs instead the side-by-side scenarios of
``bench/versus_scenarios.py`` with our controller and upstream's ``kustomize-controller`` (``FLUX_ASSETS``),
one after the other on fresh clusters (``--cluster controlplane``: a real one from ``KUBE_ASSETS``), at each
``--concurrency`` (4,20), ``--rounds`` times (A B A B), and prints ours / upstream with the ratios
(bench/side_by_side.py, bench/versus.py, bench/versus_report.py; docs/benchmarks.md, issue 36).

Needs Linux (``/proc``) and ``kubectl`` next to the Python interpreter or on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench import (
    big,
    chaos,
    health_waits,
    key_services,
    monorepo,
    report,
    request_counts,
    scale,
    scenarios,
    side_by_side,
    soak,
    ui,
    versus,
    versus_report,
    workload,
)

ALL = (
    "cold", "latency", "big", "failover", "baseline", "requests", "monorepo", "starvation", "chain", "keyservices",
    "chaos",
)
# not in the default run (tens of minutes at 10,000 on 2 cores): ask for it with --scenarios scale
OPTIONAL = ("scale", "ui", "soak")


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _layouts(text: str) -> list[tuple[int, int]]:
    """``1,4,4/1`` → (processes, running): one process, four shards, the first of four shards alone."""
    out = []
    for part in (x.strip() for x in text.split(",")):
        if part:
            shards, _, running = part.partition("/")
            out.append((int(shards), int(running or shards)))
    return out


def _repeats(text: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for part in text.split(","):
        if "=" in part:
            size, count = part.split("=", 1)
            out[int(size)] = int(count)
    return out


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few-minute smoke run (small sizes, one run each)")
    p.add_argument("--scenarios", default=None,
                   help=f"comma-separated subset of {','.join(ALL + OPTIONAL)} (default: all but "
                        f"{','.join(OPTIONAL)}); with --controllers: of {','.join(side_by_side.SCENARIOS)} "
                        "(default: all)")
    p.add_argument("--sizes", default=None, help="Kustomization counts for cold start (default 100,500,1000)")
    p.add_argument("--repeats", default=None, help="runs per size, e.g. 100=3,500=1,1000=1 (others: 1)")
    p.add_argument("--big-sizes", default=None,
                   help="objects of the big Kustomization, one ConfigMap per file (default 1000,5000)")
    p.add_argument("--big-no-reference", action="store_true",
                   help="big: skip kubectl kustomize alone and the kubectl reference (at 5,000 objects each builds "
                        "for 70-100 s of CPU) and so the ratios, e.g. for a profile (--profile-dir)")
    p.add_argument("--latency-size", type=int, default=None, help="idle Kustomizations for latency (100)")
    p.add_argument("--latency-samples", type=int, default=None, help="revision changes measured (100)")
    p.add_argument("--baseline-size", type=int, default=None, help="apps applied by the kubectl baseline (100)")
    p.add_argument("--requests-size", type=int, default=None,
                   help="Kustomizations of the requests-per-phase scenario, default flags (100)")
    p.add_argument("--requests-variants", default="apf,noapf",
                   help="API server variants of that scenario: apf (flow-control headers on), noapf (off)")
    p.add_argument("--monorepo-size", type=int, default=None, help="apps of the monorepo scenario (1000)")
    p.add_argument("--scale-sizes", default=None,
                   help="Kustomizations of the scale scenario (issue 27; default 1000,2000,5000,10000)")
    p.add_argument("--scale-shards", default=None,
                   help="controller processes of the scale scenario: 1 is one process, k > 1 is k shards "
                        "(--watch-label-selector, one lease each), k/r the first r of k shards alone (cold start "
                        "only); default 1,4")
    p.add_argument("--scale-unpinned", action="store_true",
                   help="run the shards of the scale scenario on every CPU (default: each pinned to its share of "
                        "the CPUs, as Deployments with a CPU limit on one machine)")
    p.add_argument("--ui-size", type=int, default=None, help="Kustomizations of the web UI scenario (1000)")
    p.add_argument("--chaos-size", type=int, default=None, help="Kustomizations of the chaos soak (300)")
    p.add_argument("--chaos-duration", type=float, default=None, help="seconds of faults in the chaos soak (120)")
    p.add_argument("--chaos-seed", type=int, default=25, help="seed of the chaos soak's fault schedule (25)")
    p.add_argument("--chaos-throttle-share", type=float, default=0.1,
                   help="share of API requests shed with 429 during the chaos soak (0.1)")
    p.add_argument("--soak-size", type=int, default=None,
                   help="Kustomizations of the soak on a real control plane (issue 38; needs KUBE_ASSETS; 300)")
    p.add_argument("--soak-duration", type=float, default=None, help="seconds of faults in the soak (1800)")
    p.add_argument("--soak-fault-every", type=float, default=None, help="mean seconds between the soak's faults (30)")
    p.add_argument("--soak-seed", type=int, default=38, help="seed of the soak's fault schedule (38)")
    p.add_argument("--wait", action="store_true", help="Kustomizations with spec.wait: true (health checks)")
    p.add_argument("--controller-flags", default=" ".join(scenarios.DEFAULT_FLAGS),
                   help="flags for the controller process (default: %(default)s)")
    p.add_argument("--out", default=None,
                   help="report to write (default docs/benchmarks.md; with --controllers none, the side-by-side "
                        "tables are printed); '-' for none")
    p.add_argument("--json", default=None, help="also keep the raw results here")
    p.add_argument("--from-json", default=None, help="do not run anything: render the report from this file")
    p.add_argument("--note", default="", help="a sentence about the conditions, printed in the report")
    p.add_argument("--profile-dir", default=None,
                   help="run the cold-start controller under py-spy and keep its raw profile here "
                        "(py-spy must be installed; RSS/CPU numbers then describe py-spy); monorepo: py-spy "
                        "attached for each phase after the cold start; with --controllers: attached to our "
                        "controller for each phase, <run>-<phase>.txt")
    p.add_argument("--keep-workdir", action="store_true", help="keep logs and temporary files")
    s = p.add_argument_group("side by side with upstream's kustomize-controller (issue 36; bench/versus.py)")
    s.add_argument("--controllers", default=None,
                   help="run the side-by-side scenarios with these controllers, one after the other on fresh "
                        "clusters: ours, upstream (FLUX_ASSETS/kustomize-controller), e.g. ours,upstream")
    s.add_argument("--cluster", choices=versus.CLUSTERS, default=None,
                   help="controlplane (a real one from KUBE_ASSETS for each run), embedded (the embedded API "
                        "server for each run) or kubeconfig (BENCH_KUBECONFIG, namespaces cleaned between runs); "
                        "default: kubeconfig with BENCH_KUBECONFIG, else embedded")
    s.add_argument("--concurrency", default="4,20", help="--concurrent of both controllers, each in turn (4,20)")
    s.add_argument("--rounds", type=int, default=None, help="runs of each controller per setting, A B A B (2; 1 quick)")
    s.add_argument("--ours-flags", default="", help="more flags for our controller")
    s.add_argument("--upstream-flags", default="", help="more flags for upstream's controller")
    s.add_argument("--phases", default=None,
                   help="only these phases of each scenario, the later ones left out, e.g. cold (10,000) or "
                        "cold,one_app (the monorepo: upstream's round of 1,000 apps costs it ~N² work); an item "
                        "SCENARIO@SIZE:phase is for that scenario and size only (cold@10000:cold); default all")
    s.add_argument("--cold-limit", type=float, default=None,
                   help="cut a cold start still going after this many seconds: its figures until then and how "
                        "many were Ready, shown as a lower bound (upstream at 10,000 takes over an hour)")
    s.add_argument("--sops-size", type=int, default=None, help="Kustomizations of 10 SOPS Secrets each (100)")
    s.add_argument("--starvation-size", type=int, default=None, help="healthy Kustomizations behind 8 broken (100)")
    s.add_argument("--chain-depth", type=int, default=None, help="Kustomizations in the dependency chain (20)")
    s.add_argument("--quiet-load", type=float, default=0.0,
                   help="before each run, wait for the 1-minute load average to drop under this (0: do not)")
    s.add_argument("--quiet-wait", type=float, default=600.0, help="at most this many seconds per wait (600)")
    args = p.parse_args(argv)
    if args.controllers:
        args.cluster = args.cluster or versus.default_cluster()
        args.rounds = args.rounds or (1 if args.quick else 2)
    return args


def plan(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    sizes = _sizes(args.sizes) if args.sizes else ([20, 100] if quick else [100, 500, 1000])
    repeats = {100: 3} if not quick else {}
    repeats.update(_repeats(args.repeats or ""))
    return {
        "scenarios": [s for s in (args.scenarios or ",".join(ALL)).split(",") if s],
        "sizes": sizes,
        "repeats": {s: repeats.get(s, 1) for s in sizes},
        "big_sizes": _sizes(args.big_sizes) if args.big_sizes else ([500] if quick else [1000, 5000]),
        "big_reference": not args.big_no_reference,
        "latency_size": args.latency_size or (20 if quick else 100),
        "latency_samples": args.latency_samples or (20 if quick else 100),
        "baseline_size": args.baseline_size or (20 if quick else 100),
        "requests_size": args.requests_size or (20 if quick else 100),
        "requests_variants": [v for v in args.requests_variants.split(",") if v],
        "monorepo_size": args.monorepo_size or (50 if quick else 1000),
        "scale_sizes": _sizes(args.scale_sizes) if args.scale_sizes else ([100, 200] if quick else
                                                                           [1000, 2000, 5000, 10000]),
        "scale_shards": _layouts(args.scale_shards) if args.scale_shards else [(1, 1), (4, 4)],
        "scale_pin": not args.scale_unpinned,
        "chaos": {
            "size": args.chaos_size or (30 if quick else 300),
            "duration": args.chaos_duration or (30.0 if quick else 120.0),
            "revision_every": 10.0 if quick else 15.0,
            "fault_every": 5.0 if quick else 10.0,
            "throttle_share": args.chaos_throttle_share,
            "seed": args.chaos_seed,
            "converge_within": 300.0 if quick else 900.0,
        },
        "soak": {
            "size": args.soak_size or (30 if quick else 300),
            "duration": args.soak_duration or (120.0 if quick else 1800.0),
            "revision_every": 15.0 if quick else 30.0,
            "fault_every": args.soak_fault_every or (10.0 if quick else 30.0),
            "seed": args.soak_seed,
            "converge_within": 300.0 if quick else 900.0,
        },
        "ui_size": args.ui_size or (100 if quick else 1000),
        "wait": args.wait,
        "controller_flags": args.controller_flags.split(),
        "quick": quick,
        "profile_dir": args.profile_dir,
    }


def _kubectl() -> str:
    return shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl") or "kubectl"


async def run(p: dict[str, Any], workdir: Path) -> list[dict[str, Any]]:
    if p.get("mode") == "versus":
        profile = Path(p["profile_dir"]) if p.get("profile_dir") else None
        return await side_by_side.run(p, scenarios.Config(workdir=workdir, kubectl=_kubectl(), profile_dir=profile))
    cfg = scenarios.Config(workdir=workdir, flags=p["controller_flags"], wait=p["wait"], kubectl=_kubectl(),
                           profile_dir=Path(p["profile_dir"]) if p["profile_dir"] else None)
    results: list[dict[str, Any]] = []

    async def record(scenario: str, size: int, run_: Any) -> None:
        started = time.perf_counter()
        print(f"[bench] {scenario} size={size} ...", flush=True)
        metrics: dict[str, float] = {}
        try:
            await run_(metrics)
            error = ""
        except Exception as err:  # a failed scenario is reported (with what it measured), the others still run
            traceback.print_exc()
            error = f"{type(err).__name__}: {err}"
        took = time.perf_counter() - started
        results.append({"scenario": scenario, "size": size, "metrics": metrics, "error": error, "took_s": took})
        print(f"[bench] {scenario} size={size} took {took:.1f}s {json.dumps(metrics)} {error}", flush=True)

    wanted = p["scenarios"]
    if "cold" in wanted:
        for size in p["sizes"]:
            for _ in range(p["repeats"][size]):
                await record("cold", size, lambda m, size=size: scenarios.cold_start(cfg, size, into=m))
    if "latency" in wanted:
        await record("latency", p["latency_size"],
                     lambda m: scenarios.latency(cfg, p["latency_size"], samples=p["latency_samples"], into=m))
    if "big" in wanted:
        for objects in p["big_sizes"]:
            await record("big", objects, lambda m, objects=objects: big.big(
                cfg, objects, reference=p.get("big_reference", True), into=m))
    if "failover" in wanted:
        await record("failover", 10, lambda m: scenarios.failover(cfg, into=m))
    if "requests" in wanted:
        for variant in p.get("requests_variants", ["apf", "noapf"]):
            if variant == "noapf" and workload.EXTERNAL_KUBECONFIG:
                print("[bench] requests: a real cluster's flow-control headers cannot be turned off; "
                      "skipping the noapf variant", flush=True)
                continue
            await record("requests", p["requests_size"],
                         lambda m, variant=variant: request_counts.request_counts(
                             cfg, p["requests_size"], flow_control_headers=variant == "apf", into=m))
    if "baseline" in wanted:
        for parallel in (1, 4):
            await record("baseline", p["baseline_size"],
                         lambda m, parallel=parallel: _fill(m, scenarios.baseline(cfg, p["baseline_size"],
                                                                                  parallel=parallel)))
    if "monorepo" in wanted:
        size = p.get("monorepo_size", 1000)
        await record("monorepo", size, lambda m: monorepo.monorepo(cfg, size, into=m))
    # issue 15: health waits off the workers, dependents woken by their dependencies. The fast variants
    # run three times, interleaved (a single run is at the mercy of one 5 s health poll); the slow
    # upstream-behaviour variants once.
    if "starvation" in wanted:
        for variant in health_waits.plan_variants(health_waits.STARVATION_VARIANTS, quick=p["quick"]):
            await record("starvation", 100, lambda m, v=variant: health_waits.starvation(cfg, v, into=m))
    if "chain" in wanted:
        for variant in health_waits.plan_variants(health_waits.CHAIN_VARIANTS, quick=p["quick"]):
            await record("chain", 10, lambda m, v=variant: health_waits.chain(cfg, v, into=m))
    # issue 27: thousands of Kustomizations, in one process and sharded; every size in one process,
    # then in shards, so that a run cut short by the deadline still has both at the smaller sizes
    if "scale" in wanted:
        for size in p.get("scale_sizes", []):
            for shards, running in p.get("scale_shards", [(1, 1)]):
                await record("scale", size,
                             lambda m, size=size, shards=shards, running=running: scale.scale(
                                 cfg, size, shards=shards, running=running, pin=p.get("scale_pin", True), into=m))
    # issue 23: the first decryption with each cloud key service (loopback servers), and a controller
    # that never meets a cloud key does not load them
    if "keyservices" in wanted:
        await record("keyservices", len(key_services.PROVIDERS),
                     lambda m: key_services.key_services(workdir, into=m))
    # issue 37: the web UI's first render, memory and batching with 1,000 Kustomizations (needs chromium)
    if "ui" in wanted:
        size = p.get("ui_size", 1000)
        await record("ui", size, lambda m: ui.ui(cfg, size, into=m))
    if "chaos" in wanted:
        plan = chaos.ChaosPlan(**p["chaos"])
        await record("chaos", plan.size,
                     lambda m: chaos.chaos(plan, workdir=workdir, flags=p["controller_flags"], into=m))
    # issue 38: the chaos soak on a real control plane from KUBE_ASSETS (tens of minutes; bench/soak.py)
    if "soak" in wanted:
        soak_plan = soak.SoakPlan(**p.get("soak", {}))
        await record("soak", soak_plan.size, lambda m: soak.soak(soak_plan, workdir=workdir, into=m))
    return results


async def _fill(m: dict[str, float], coro: Any) -> None:
    m.update(await coro)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        if args.controllers:
            why = versus.missing(args.cluster, args.controllers.split(","))
            if why:
                print(f"[bench] cannot run side by side: {why}", file=sys.stderr)
                return 2
        p = side_by_side.plan(args) if args.controllers else plan(args)
        workdir = Path(tempfile.mkdtemp(prefix="bench-"))
        print(f"[bench] plan {json.dumps(p)}; work directory {workdir}", flush=True)
        machine_before = scenarios.machine()
        started = time.time()
        try:
            results = asyncio.run(run(p, workdir))
        finally:
            if not args.keep_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        data = {
            "plan": p,
            "machine": machine_before,
            "loadavg_end": scenarios.machine()["loadavg"],
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "duration_s": time.time() - started,
            "command": "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv),
            "note": args.note,
            "results": results,
        }
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1))
    side = data["plan"].get("mode") == "versus"
    out = args.out or ("-" if side else str(Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"))
    if out != "-":
        Path(out).write_text(versus_report.render(data) if side else report.render(data))
        print(f"[bench] wrote {out}", flush=True)
    if side:
        print("\n".join(versus_report.tables(data)), flush=True)
    failed = [r for r in data["results"] if r.get("error")]
    return 1 if failed else 0
