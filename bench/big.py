"""Issue 36: one Kustomization of many objects, against the same directory applied by ``kubectl`` alone.

The workload is the one of the issue: ``objects`` ConfigMaps, one file each, listed by one
``kustomization.yaml`` with a ``namespace:`` (kustomize's quadratic case, docs/build.md "Large roots in
parts"). On one API server (the embedded one, or ``BENCH_KUBECONFIG``), in this order:

1. ``kubectl kustomize DIR`` alone (``kustomize_s``, ``kustomize_cpu_s``);
2. the reference: ``kubectl kustomize DIR | kubectl apply --server-side -f -`` into a namespace of its own
   (``reference_s``, the two kubectl processes' CPU, the API server's CPU);
3. the controller: cold start to Ready (``cold_s`` from the process's spawn, its own CPU and its kustomize
   children's, the API server's, requests, peak RSS), then a revision that changes one object
   (``change_*``), then a periodic no-op reconcile (``noop_*``).

``cold_ratio`` and ``noop_ratio`` divide the controller's cold start and no-op round by the reference of
the same run (pairwise: the machine may be shared; the issue's targets are ≤ 1/3 and ≤ 1/10). Every
process the bench starts inherits the driver's ``nice`` level, so both sides run at the same one.
With ``--profile-dir`` each controller phase is profiled by py-spy (``big<N>-<phase>.txt``).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import tempfile
import time
from pathlib import Path

from bench.procs import bench_env, metric_sum, profiled
from bench.scenarios import Cluster, Config, Metrics, _kubectl_apply, _settled, api_cpu, cluster, controller
from bench.workload import (
    APPS_NS,
    EXTERNAL_KUBECONFIG,
    FLUX_NS,
    Tracker,
    create_namespaces,
    install_crds,
    kustomization,
    request_reconcile,
)
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source

REF_NS = f"{APPS_NS}-ref"
NAME = "app-0"  # the Kustomization and its GitRepository (workload.kustomization(0))


def big_files(objects: int, *, namespace: str, changed: bool = False) -> dict[str, str]:
    """``objects`` ConfigMaps, one file each, and the kustomization listing them; ``changed``: the first
    ConfigMap's data differs (the "one object changed" revision)."""
    files = {}
    for i in range(objects):
        revision = 2 if changed and i == 0 else 1
        files[f"cm-{i:05d}.yaml"] = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:05d}\n  namespace: {namespace}\n"
            f"data:\n  revision: \"{revision}\"\n  message: hello from object {i}\n")
    files["kustomization.yaml"] = (
        f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\nresources:\n"
        + "".join(f"- cm-{i:05d}.yaml\n" for i in range(objects)))
    return files


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _kustomize_alone(cfg: Config, directory: Path, m: Metrics, prefix: str) -> None:
    cpu0 = _children_cpu()
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(cfg.kubectl, "kustomize", str(directory),
                                                stdout=asyncio.subprocess.DEVNULL, env=bench_env())
    if await proc.wait() != 0:
        raise RuntimeError(f"kubectl kustomize {directory} failed")
    m[f"{prefix}.kustomize_s"] = time.perf_counter() - started
    m[f"{prefix}.kustomize_cpu_s"] = _children_cpu() - cpu0


async def big(cfg: Config, objects: int, *, into: Metrics | None = None) -> Metrics:
    m: Metrics = into if into is not None else {}
    prefix = f"big{objects}"
    within = max(600.0, objects * 0.2)
    async with cluster(cfg, prefix) as (api, client, artifacts), Tracker(client) as tracker:
        try:
            await _run(cfg, objects, m, prefix, within, api, client, artifacts, tracker)
        finally:
            if EXTERNAL_KUBECONFIG:  # the cluster's own cleanup removes the other two namespaces
                with contextlib.suppress(NotFoundError):
                    await client.delete("v1", "Namespace", REF_NS)
    return m


async def _run(cfg: Config, objects: int, m: Metrics, prefix: str, within: float, api: Cluster, client: KubeClient,
               artifacts: ArtifactServer, tracker: Tracker) -> None:
    await install_crds(client)
    await create_namespaces(client, FLUX_NS, APPS_NS, REF_NS)
    root = Path(tempfile.mkdtemp(prefix="big-src-", dir=cfg.workdir))
    reference = root / "reference"
    for rel, text in big_files(objects, namespace=REF_NS).items():
        (reference / rel).parent.mkdir(parents=True, exist_ok=True)
        (reference / rel).write_text(text)

    await _kustomize_alone(cfg, reference, m, prefix)
    api0, cpu0 = api_cpu(api), _children_cpu()
    started = time.perf_counter()
    await _kubectl_apply(cfg, reference, api.kubeconfig, root / "kube-cache")
    m[f"{prefix}.reference_s"] = time.perf_counter() - started
    m[f"{prefix}.reference_kubectl_cpu_s"] = _children_cpu() - cpu0
    if api.pid:
        m[f"{prefix}.reference_apiserver_cpu_s"] = api_cpu(api) - api0

    artifact = await artifacts.publish_files(big_files(objects, namespace=APPS_NS), name=NAME)
    await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name=NAME, artifact=artifact)
    ks = kustomization(0, wait=False)
    ks["spec"]["timeout"] = "30m"  # the whole build of 5,000 objects took 90-140 s on 2 shared cores
    await client.create(ks)

    api0 = api_cpu(api)
    started = time.perf_counter()
    ctrl = controller(cfg, api, name=prefix)
    async with ctrl:
        profile = cfg.profile_dir
        async with profiled(ctrl.pid, profile / f"{prefix}-cold.txt" if profile else None):
            ready = await tracker.wait_ready({NAME: str(artifact["revision"])}, within=within)
        m[f"{prefix}.cold_s"] = ready - started
        after = await _settled(ctrl)
        stats = ctrl.stats()
        m[f"{prefix}.cold_cpu_s"] = stats.cpu_s
        m[f"{prefix}.cold_kustomize_cpu_s"] = stats.children_cpu_s
        m[f"{prefix}.cold_requests"] = metric_sum(after, "rest_client_requests_total")
        m[f"{prefix}.builder_processes"] = metric_sum(after, "kustomize_controller_builder_processes_total")
        if api.pid:
            m[f"{prefix}.cold_apiserver_cpu_s"] = api_cpu(api) - api0
        assert ctrl.sampler is not None
        m[f"{prefix}.kustomize_max_rss_mib"] = ctrl.sampler.max_child_mib

        before, cpu0, kcpu0, api0 = after, stats.cpu_s, stats.children_cpu_s, api_cpu(api)
        started = time.perf_counter()
        changed = await artifacts.publish_files(big_files(objects, namespace=APPS_NS, changed=True), name=NAME)
        await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name=NAME, artifact=changed)
        async with profiled(ctrl.pid, profile / f"{prefix}-change.txt" if profile else None):
            ready = await tracker.wait_ready({NAME: str(changed["revision"])}, within=within)
        m[f"{prefix}.change_s"] = ready - started
        after = await _settled(ctrl)
        stats = ctrl.stats()
        m[f"{prefix}.change_cpu_s"] = stats.cpu_s - cpu0
        m[f"{prefix}.change_kustomize_cpu_s"] = stats.children_cpu_s - kcpu0
        m[f"{prefix}.change_requests"] = (metric_sum(after, "rest_client_requests_total")
                                          - metric_sum(before, "rest_client_requests_total"))
        if api.pid:
            m[f"{prefix}.change_apiserver_cpu_s"] = api_cpu(api) - api0

        before, cpu0, api0 = after, stats.cpu_s, api_cpu(api)
        token = f"bench-big-{time.time_ns()}"
        started = time.perf_counter()
        await request_reconcile(client, [NAME], token)
        async with profiled(ctrl.pid, profile / f"{prefix}-noop.txt" if profile else None):
            handled = await tracker.wait_handled([NAME], token, within=within)
        m[f"{prefix}.noop_s"] = handled - started
        after = await _settled(ctrl)
        m[f"{prefix}.noop_cpu_s"] = ctrl.stats().cpu_s - cpu0
        m[f"{prefix}.noop_requests"] = (metric_sum(after, "rest_client_requests_total")
                                        - metric_sum(before, "rest_client_requests_total"))
        if api.pid:
            m[f"{prefix}.noop_apiserver_cpu_s"] = api_cpu(api) - api0
        m[f"{prefix}.controller_peak_rss_mib"] = ctrl.stats().peak_rss_mib
    m[f"{prefix}.cold_ratio"] = m[f"{prefix}.cold_s"] / m[f"{prefix}.reference_s"]
    m[f"{prefix}.noop_ratio"] = m[f"{prefix}.noop_s"] / m[f"{prefix}.reference_s"]
