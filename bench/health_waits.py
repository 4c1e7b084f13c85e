"""The scenarios of issue 15: health waits off the workers, dependents woken by their dependencies.

- ``starvation``: ``--concurrent=4``; 8 Kustomizations wait (``wait: true``, ``timeout: 2m``) on a
  Deployment that never becomes ready, then 100 healthy ones are created: seconds from their creation
  until the last of the 100 is Ready. Three variants: ``released`` (our default), ``no_broken`` (the
  same run without the 8), ``held`` (``HoldWorkerDuringHealthChecks=true``, upstream's behaviour).
- ``chain``: 10 Kustomizations, each ``dependsOn`` the previous one, created at once (dependents
  first) with ``--requeue-dependency=30s``: seconds from their creation until all are Ready, woken by their
  dependencies (``EnableDependencyQueueing``, our default) or polling only (the gate off, upstream).

Each variant starts its own API server and controller (``scenarios.cluster``/``controller``). The
embedded server reports workloads ready at once, except the broken apps' Deployment, annotated
never-ready (on a real cluster without nodes it never becomes available anyway).
"""

from __future__ import annotations

import asyncio
import time

from bench.scenarios import Config, Metrics, cluster, controller
from bench.workload import (
    APPS_NS,
    FLUX_NS,
    KS_API,
    Tracker,
    bounded,
    create_namespaces,
    install_crds,
    kustomization,
    publish,
)
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.testing.apiserver.workloads import NEVER_READY_ANNOTATION
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source

BASE_FLAGS = ["--kube-api-qps=-1", "--kube-api-burst=-1"]
STARVATION_VARIANTS = ("released", "no_broken", "held")
CHAIN_VARIANTS = ("events", "polling")
SLOW = {"held", "polling"}  # upstream's behaviour: minutes per run


def plan_variants(variants: tuple[str, ...], *, quick: bool, repeats: int = 3) -> list[str]:
    """The fast variants ``repeats`` times, interleaved and in alternating order (on a machine whose
    load drifts, a fixed order would favour whichever runs first), then the slow one once (all once
    when quick)."""
    fast = [v for v in variants if v not in SLOW]
    slow = [v for v in variants if v in SLOW]
    rounds = [fast if k % 2 == 0 else fast[::-1] for k in range(1 if quick else repeats)]
    return [v for round_ in rounds for v in round_] + slow


def _broken_files(i: int) -> dict[str, str]:
    deployment = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken-{i}
  namespace: {APPS_NS}
  annotations: {{"{NEVER_READY_ANNOTATION}": "true"}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: broken-{i}}}
  template:
    metadata:
      labels: {{app: broken-{i}}}
    spec:
      containers:
      - name: app
        image: ghcr.io/stefanprodan/podinfo:6.5.0
"""
    return {
        "kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n- deploy.yaml\n",
        "deploy.yaml": deployment,
    }


async def _create_broken(client: KubeClient, artifacts: ArtifactServer, n: int) -> list[str]:
    names = []
    for i in range(n):
        name = f"broken-{i}"
        artifact = await artifacts.publish_files(_broken_files(i), name=name)
        await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name=name, artifact=artifact)
        await client.create({
            "apiVersion": KS_API, "kind": "Kustomization", "metadata": {"name": name, "namespace": FLUX_NS},
            "spec": {"interval": "60m", "retryInterval": "10s", "timeout": "2m", "path": "./", "prune": True,
                     "wait": True, "sourceRef": {"kind": "GitRepository", "name": name}},
        })
        names.append(name)
    return names


async def _waiting(client: KubeClient, names: list[str], *, count: int, within: float = 120.0) -> None:
    """Until ``count`` of the named Kustomizations show their health wait (Healthy=Unknown); with
    worker-held waits only as many as there are workers can."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        items = {o["metadata"]["name"]: o for o in await client.list(KS_API, "Kustomization", FLUX_NS)}
        waiting = [
            n for n in names
            if any(c.get("type") == "Healthy" and c.get("status") == "Unknown"
                   for c in ((items.get(n) or {}).get("status") or {}).get("conditions") or [])
        ]
        if len(waiting) >= count:
            return
        if loop.time() > deadline:
            raise TimeoutError(f"only {len(waiting)} of {count} broken Kustomizations are waiting on health")
        await asyncio.sleep(0.2)


async def starvation(cfg: Config, variant: str, *, healthy: int = 100, broken: int = 8,
                     into: Metrics | None = None) -> Metrics:
    m: Metrics = into if into is not None else {}
    concurrent = 4
    flags = [*BASE_FLAGS, f"--concurrent={concurrent}"]
    if variant == "held":
        flags.append("--feature-gates=HoldWorkerDuringHealthChecks=true")
    async with cluster(cfg, f"starvation-{variant}") as (api, client, artifacts), Tracker(client) as tracker:
        await install_crds(client)
        await create_namespaces(client, FLUX_NS, APPS_NS)
        revisions = await bounded(publish(client, artifacts, i, rev=1) for i in range(healthy))
        expected = {f"app-{i}": rev for i, rev in enumerate(revisions)}
        async with controller(cfg, api, name=f"starvation-{variant}", flags=flags):
            if variant != "no_broken":
                names = await _create_broken(client, artifacts, broken)
                await _waiting(client, names, count=min(broken, concurrent) if variant == "held" else broken)
            started = time.perf_counter()
            await bounded(client.create(kustomization(i, wait=True)) for i in range(healthy))
            ready = await tracker.wait_ready(expected, within=900.0)
            m[f"starvation.{variant}_s"] = ready - started
    return m


async def chain(cfg: Config, variant: str, *, depth: int = 10, into: Metrics | None = None) -> Metrics:
    m: Metrics = into if into is not None else {}
    flags = [*BASE_FLAGS, "--concurrent=4", "--requeue-dependency=30s"]
    if variant == "polling":
        flags.append("--feature-gates=EnableDependencyQueueing=false")
    async with cluster(cfg, f"chain-{variant}") as (api, client, artifacts), Tracker(client) as tracker:
        await install_crds(client)
        await create_namespaces(client, FLUX_NS, APPS_NS)
        revisions = await bounded(publish(client, artifacts, i, rev=1) for i in range(depth))
        expected = {f"app-{i}": rev for i, rev in enumerate(revisions)}
        objs = []
        for i in range(depth):
            obj = kustomization(i, wait=False)
            if i:
                obj["spec"]["dependsOn"] = [{"name": f"app-{i - 1}"}]
            objs.append(obj)
        async with controller(cfg, api, name=f"chain-{variant}", flags=flags):
            started = time.perf_counter()
            for obj in reversed(objs):  # dependents first: each finds its dependency missing or not ready
                await client.create(obj)
            ready = await tracker.wait_ready(expected, within=900.0)
            m[f"chain.{variant}_s"] = ready - started
    return m
