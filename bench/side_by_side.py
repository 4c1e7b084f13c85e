"""The side-by-side run (issue 36): which scenarios, sizes, controllers and settings, in which order.

For each scenario and size, ``rounds`` rounds; in each round every ``--concurrency`` setting (the
controllers' ``--concurrent``), and at each setting every controller in the order given
(``ours,upstream``: A B A B over the rounds), each run on a fresh cluster (``bench/versus.py``). The
``big`` scenario also runs the ``kubectl`` reference once per round, on a cluster of its own. With
``quiet_load`` every run waits (at most ``quiet_wait`` seconds) for the machine's 1-minute load average
to drop under it, and every result keeps the load average at its start.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from bench import versus_scenarios as vs
from bench.scenarios import Config, Metrics
from bench.versus import Contender, Lab, lab, quiet_enough, wait_quiet

SCENARIOS = ("cold", "latency", "monorepo", "big", "sops", "starvation", "chain")


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def plan(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    wanted = [s for s in (args.scenarios or ",".join(SCENARIOS)).split(",") if s]
    unknown = [s for s in wanted if s not in SCENARIOS]
    if unknown:
        raise SystemExit(f"--controllers runs the scenarios {','.join(SCENARIOS)}; not {','.join(unknown)}")
    return {
        "mode": "versus",
        "cluster": args.cluster,
        "controllers": [c for c in args.controllers.split(",") if c],
        "concurrent": _sizes(args.concurrency),
        "rounds": args.rounds,
        "flags": {"ours": args.ours_flags.split(), "upstream": args.upstream_flags.split()},
        "scenarios": wanted,
        "sizes": {
            "cold": _sizes(args.sizes) if args.sizes else ([20] if quick else [100, 1000]),
            "latency": [args.latency_size or (10 if quick else 100)],
            "monorepo": [args.monorepo_size or (20 if quick else 1000)],
            "big": _sizes(args.big_sizes) if args.big_sizes else ([200] if quick else [1000, 5000]),
            "sops": [args.sops_size or (10 if quick else 100)],
            "starvation": [args.starvation_size or (20 if quick else 100)],
            "chain": [args.chain_depth or (5 if quick else 20)],
        },
        "phases": [x for x in args.phases.split(",") if x] if args.phases else None,
        "cold_limit": args.cold_limit,
        "profile_dir": args.profile_dir,
        "latency_samples": args.latency_samples or (10 if quick else 100),
        "quiet_load": args.quiet_load,
        "quiet_wait": args.quiet_wait,
        "quick": quick,
    }


def _scenario(name: str, size: int, p: dict[str, Any]) -> Callable[[Lab, Contender, Metrics], Awaitable[None]]:
    if name == "cold":
        return lambda lb, c, m: vs.cold(lb, c, size, m)
    if name == "latency":
        return lambda lb, c, m: vs.latency(lb, c, size, m, samples=p["latency_samples"])
    if name == "monorepo":
        return lambda lb, c, m: vs.monorepo(lb, c, size, m)
    if name == "big":
        return lambda lb, c, m: vs.big(lb, c, size, m)
    if name == "sops":
        return lambda lb, c, m: vs.sops(lb, c, size, m)
    if name == "starvation":
        return lambda lb, c, m: vs.starvation(lb, c, m, healthy=size)
    if name == "chain":
        return lambda lb, c, m: vs.chain(lb, c, m, depth=size)
    raise ValueError(name)


async def run(p: dict[str, Any], cfg: Config) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []

    async def record(scenario: str, size: int, controller: str, concurrent: int, round_: int,
                     body: Callable[[Metrics], Awaitable[None]]) -> None:
        load = await wait_quiet(p["quiet_load"], within=p["quiet_wait"]) if p["quiet_load"] else quiet_enough(0)[1]
        what = f"{scenario} size={size} {controller} --concurrent={concurrent} round {round_}"
        print(f"[bench] {what} (load {load}) ...", flush=True)
        started = time.perf_counter()
        m: Metrics = {}
        try:
            await body(m)
            error = ""
        except Exception as err:  # a failed run is reported with what it measured; the others still run
            traceback.print_exc()
            error = f"{type(err).__name__}: {err}"
        took = time.perf_counter() - started
        results.append({"scenario": f"versus-{scenario}", "size": size, "controller": controller,
                        "concurrent": concurrent, "round": round_, "cluster": p["cluster"], "loadavg": load,
                        "metrics": m, "error": error, "took_s": took})
        brief = {k: round(v, 3) for k, v in m.items() if k.endswith((".seconds", ".cpu_s", ".requests_per_ks"))}
        print(f"[bench] {what} took {took:.1f}s {json.dumps(brief)} {error}", flush=True)

    for scenario in p["scenarios"]:
        for size in p["sizes"][scenario]:
            body = _scenario(scenario, size, p)
            for round_ in range(1, p["rounds"] + 1):
                if scenario == "big":
                    await record(scenario, size, "kubectl", 0, round_,
                                 lambda m, size=size: _reference(cfg, p, size, m))
                for concurrent in p["concurrent"]:
                    for name in p["controllers"]:
                        contender = Contender(name, concurrent, tuple(p["flags"].get(name, ())))
                        await record(scenario, size, name, concurrent, round_,
                                     lambda m, c=contender, body=body, s=scenario, n=size: _one(cfg, p, s, n, c, m,
                                                                                               body))
    return results


def phases_for(spec: list[str] | None, scenario: str, size: int) -> list[str] | None:
    """The phases ``--phases`` asks of ``scenario`` at ``size`` (None: all). An item ``SCENARIO@SIZE:phase``
    speaks of that scenario at that size only, and where there is one, only those items do; a plain ``phase``
    of every other scenario and size. So one run can leave out the later rounds of 10,000 Kustomizations
    (``cold@10000:cold``) and keep those of 100 and 1,000."""
    if not spec:
        return None
    scoped = [item.split(":", 1)[1] for item in spec if item.startswith(f"{scenario}@{size}:")]
    if scoped:
        return scoped
    return [item for item in spec if ":" not in item] or None


async def _one(cfg: Config, p: dict[str, Any], scenario: str, size: int, contender: Contender, m: Metrics,
               body: Callable[[Lab, Contender, Metrics], Awaitable[None]]) -> None:
    async with lab(p["cluster"], cfg, f"{scenario}-{size}-{contender.label()}", (contender.user,),
                   phases=phases_for(p.get("phases"), scenario, size), cold_limit=p.get("cold_limit")) as lb:
        await body(lb, contender, m)


async def _reference(cfg: Config, p: dict[str, Any], size: int, m: Metrics) -> None:
    user = "bench-kubectl"
    async with lab(p["cluster"], cfg, f"big-{size}-reference", (user,)) as lb:
        await vs.big_reference(lb, size, m, user=user)
