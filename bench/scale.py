"""Issue 27: thousands of Kustomizations, in one controller process or sharded upstream's way.

``scale(cfg, n, shards=k)`` runs the flux-benchmark workload of ``n`` Kustomizations (× 4 objects, one
GitRepository each) against one controller process (``k`` = 1) or ``k`` shards: every Kustomization is
labelled ``sharding.fluxcd.io/key: shard<i>`` (round robin) and shard ``i`` is its own process with
``--watch-label-selector=sharding.fluxcd.io/key in (shard<i>)`` and leader election on, so that each
shard holds its own lease (the lease name is derived from the selector, as upstream's). It measures the
cold start to all Ready, a new revision of every source and one no-op round, with the same metrics as
the ``cold`` scenario; CPU and requests are the sum over the shards, peak RSS the largest shard's (each
shard's is kept too). ``per_ks`` figures divide by ``n``: flat from 1,000 to 10,000 is linear scaling.

Shards are pinned (``pin``, the default): shard ``i`` runs with an affinity to its share of the driver's
CPUs (:func:`shard_cpus`: CPU ``i mod c`` when there are more shards than CPUs), as ``k`` Deployments with
``resources.limits.cpu`` on one machine would be limited; each then sizes its builder lanes and parallel
builds for its share (``kustomize_controller/runtime/cpus.py``) instead of for the whole machine. The single
process is never pinned. ``cpus_per_process`` records what each process could use.

``running`` < ``k`` starts only the first ``running`` shards (``--scale-shards 4/1``: shard 1 of 4 alone,
layout ``shards4run1``): the cluster holds all ``n`` Kustomizations and sources, the running shards reconcile
theirs, and only the cold start is measured, per Kustomization of theirs. It tells what a shard costs when
it has the machine to itself (as on machines of its own) from what sharing the machine adds.

Nothing is restarted with ``VerifiedApplies`` here (the ``cold`` scenario does that). ``--profile-dir``
runs the single process under py-spy (its CPU and RSS figures then describe py-spy); shards never are.
"""

from __future__ import annotations

import os
import time

from bench.procs import ControllerGroup, metric_sum
from bench.scenarios import Config, Metrics, api_cpu, cluster, controller, revision_and_noop
from bench.workload import FLUX_NS, SHARD_KEY, Tracker, setup, shard_of
from kustomize_controller.app import leader_election_id


def shard_cpus(shards: int, cpus: list[int]) -> list[frozenset[int]]:
    """Each shard's share of ``cpus``: with more shards than CPUs, shard ``i`` gets CPU ``i mod c``; with fewer,
    shard ``i`` gets every CPU ``j`` with ``j mod shards == i`` (as even a split as there is)."""
    ordered = sorted(cpus)
    if shards >= len(ordered):
        return [frozenset({ordered[i % len(ordered)]}) for i in range(shards)]
    return [frozenset(ordered[j] for j in range(len(ordered)) if j % shards == i) for i in range(shards)]


def shard_flags(cfg: Config, shard: str) -> list[str]:
    return [*cfg.flags, "--enable-leader-election", f"--watch-label-selector={SHARD_KEY} in ({shard})"]


def layout(shards: int, running: int | None = None) -> str:
    """The metric prefix of a layout: ``one``, ``shards<k>``, or ``shards<k>run<r>`` for the first r of k alone."""
    if shards == 1:
        return "one"
    started = started_shards(shards, running)
    return f"shards{shards}" if started == shards else f"shards{shards}run{started}"


def started_shards(shards: int, running: int | None) -> int:
    """How many of ``shards`` are started: ``running`` (None: all), at least one, at most all."""
    return shards if running is None else max(1, min(running, shards))


async def scale(cfg: Config, n: int, *, shards: int = 1, running: int | None = None, pin: bool = True,
                into: Metrics | None = None) -> Metrics:
    m: Metrics = into if into is not None else {}
    machine = sorted(os.sched_getaffinity(0))
    pinned = shard_cpus(shards, machine) if shards > 1 and pin else [None] * shards
    prefix = layout(shards, running)
    launched = started_shards(shards, running)
    labelled = shards if shards > 1 else 0
    async with cluster(cfg, f"scale-{n}-{prefix}") as (api, client, artifacts), Tracker(client) as tracker:
        setup_started = time.perf_counter()
        expected = await setup(client, artifacts, n, wait=cfg.wait, shards=labelled)
        m[f"{prefix}.setup_s"] = time.perf_counter() - setup_started
        if launched < shards:  # app i belongs to shard_of(i): keep the running shards' own
            ours = {shard_of(k, shards) for k in range(launched)}
            expected = {name: rev for i, (name, rev) in enumerate(expected.items()) if shard_of(i, shards) in ours}
        names = list(expected)
        owned = len(expected)  # the per-Kustomization figures divide by the Kustomizations reconciled
        members = (
            [controller(cfg, api, name=f"scale-{n}", profile=True)] if shards == 1 else
            [controller(cfg, api, name=f"scale-{n}-{shard_of(k, shards)}", flags=shard_flags(cfg, shard_of(k, shards)),
                        cpus=pinned[k])
             for k in range(launched)]
        )
        m[f"{prefix}.cpus_per_process"] = float(min(len(cpus) if cpus else len(machine) for cpus in pinned))
        api0 = api_cpu(api)
        started = time.perf_counter()
        async with ControllerGroup(members) as group:
            ready = await tracker.wait_ready(expected, within=max(300.0, n * 1.0))
            samples = await group.samples()
            stats = group.stats()
            m[f"{prefix}.cold_s"] = ready - started
            m[f"{prefix}.first_ready_s"] = tracker.first_ready(expected) - started
            m[f"{prefix}.cold_ms_per_ks"] = (ready - started) * 1000 / owned
            m[f"{prefix}.cold_cpu_s"] = stats.cpu_s
            m[f"{prefix}.cold_cpu_ms_per_ks"] = stats.cpu_s * 1000 / owned
            m[f"{prefix}.cold_kustomize_cpu_ms_per_ks"] = stats.children_cpu_s * 1000 / owned
            if api.pid:
                m[f"{prefix}.cold_apiserver_cpu_ms_per_ks"] = (api_cpu(api) - api0) * 1000 / owned
            m[f"{prefix}.cold_requests_per_ks"] = metric_sum(samples, "rest_client_requests_total") / owned
            m[f"{prefix}.cold_peak_rss_mib"] = stats.peak_rss_mib
            m[f"{prefix}.cold_builder_processes"] = metric_sum(samples, "kustomize_controller_builder_processes_total")
            m[f"{prefix}.cold_builds_shared"] = metric_sum(samples, "kustomize_controller_builds_shared_total")
            if shards > 1:
                leases = await client.list("coordination.k8s.io/v1", "Lease", FLUX_NS)
                wanted = {leader_election_id(f"{SHARD_KEY} in ({shard_of(k, shards)})")
                          for k in range(launched)}
                m[f"{prefix}.leases"] = float(len(wanted & {lease["metadata"]["name"] for lease in leases}))
            if launched < shards:
                m[f"{prefix}.peak_rss_mib"] = stats.peak_rss_mib
                return m  # the new revision publishes every app's source: a whole layout's measure only
            cold_cpu = stats.cpu_s
            sub: Metrics = {}
            # a new revision, then one no-op round (a second one at 10,000 would add minutes, not information)
            await revision_and_noop(cfg, sub, group, api, client, artifacts, tracker, names, objects=4, rounds=1)
            for key, value in sub.items():
                m[f"{prefix}.{key}"] = value
            m[f"{prefix}.revision_ms_per_ks"] = sub["revision.seconds"] * 1000 / n
            m[f"{prefix}.revision_cpu_ms_per_ks"] = sub["revision.cpu_s"] * 1000 / n
            end = group.stats()
            m[f"{prefix}.peak_rss_mib"] = end.peak_rss_mib
            m[f"{prefix}.total_cpu_ms_per_ks"] = end.cpu_s * 1000 / n
            m[f"{prefix}.steady_cpu_s"] = end.cpu_s - cold_cpu
            if shards > 1:
                for k, each in enumerate(group.shard_stats()):
                    m[f"{prefix}.shard{k + 1}_peak_rss_mib"] = each.peak_rss_mib
    return m
