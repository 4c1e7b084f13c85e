"""The scenarios of issue 9. Each returns ``{metric: value}`` for one run; ``cli`` repeats and aggregates.

Every scenario starts its own API server process (a cold, empty cluster) and stops everything it
started before it returns. Durations are wall-clock seconds measured in the driver with
``time.perf_counter()``; "seen" times come from the driver's watch, so they include one watch delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.procs import (
    ApiServerProcess,
    ControllerProcess,
    Controllers,
    bench_env,
    cpu_seconds,
    metric_sum,
    requests_by_method,
    scrape,
)
from bench.workload import (
    APPS_NS,
    EXTERNAL_KUBECONFIG,
    FLUX_NS,
    Tracker,
    app_files,
    bounded,
    create_namespaces,
    delete_namespaces,
    publish,
    request_reconcile,
    setup,
    write_app_dir,
)
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source

DEFAULT_FLAGS = ["--concurrent=20", "--kube-api-qps=-1", "--kube-api-burst=-1"]
Metrics = dict[str, float]


@dataclass
class Config:
    workdir: Path
    flags: list[str] = field(default_factory=lambda: list(DEFAULT_FLAGS))
    wait: bool = False
    kubectl: str = "kubectl"
    profile_dir: Path | None = None


class ExternalCluster:
    """A real cluster from ``BENCH_KUBECONFIG``: nothing to start, and no API server process to measure."""

    pid: int | None = None

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig


Cluster = ApiServerProcess | ExternalCluster


def api_cpu(api: Cluster) -> float:
    return cpu_seconds(api.pid)[0] if api.pid else 0.0


@contextlib.asynccontextmanager
async def cluster(cfg: Config, label: str, *, api_args: tuple[str, ...] = ()
                  ) -> AsyncIterator[tuple[Cluster, KubeClient, ArtifactServer]]:
    if EXTERNAL_KUBECONFIG:
        external = ExternalCluster(EXTERNAL_KUBECONFIG)
        client = KubeClient(config=await load_kubeconfig(external.kubeconfig), qps=-1, burst=-1)
        try:
            await delete_namespaces(client)  # leftovers of an interrupted run
            async with ArtifactServer() as artifacts:
                yield external, client, artifacts
        finally:
            with contextlib.suppress(Exception):
                await delete_namespaces(client)
            await client.close()
        return
    workdir = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=cfg.workdir))
    async with ApiServerProcess(workdir=workdir, extra_args=api_args) as api:
        client = KubeClient(config=await load_kubeconfig(api.kubeconfig), qps=-1, burst=-1)
        try:
            async with ArtifactServer() as artifacts:
                yield api, client, artifacts
        finally:
            await client.close()


def controller(cfg: Config, api: Cluster, *, name: str, flags: list[str] | None = None,
               module: str = "kustomize_controller", profile: bool = False,
               cpus: frozenset[int] | None = None) -> ControllerProcess:
    """The controller process for ``api`` (on ``cpus`` only, if given); on a real cluster it watches only the
    benchmark's namespace."""
    extra = ["--watch-all-namespaces=false"] if EXTERNAL_KUBECONFIG else []
    return ControllerProcess(kubeconfig=api.kubeconfig, flags=[*(flags or cfg.flags), *extra], workdir=cfg.workdir,
                             name=name, runtime_namespace=FLUX_NS, module=module,
                             profile_dir=cfg.profile_dir if profile else None, cpus=cpus)


Samples = dict[tuple[str, str], float]


async def _settled(ctrl: Controllers, *, quiet: float = 1.0, within: float = 30.0) -> Samples:
    """Metrics once the controller's request counter stopped moving for ``quiet`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last = await ctrl.samples()
    while loop.time() < deadline:
        await asyncio.sleep(quiet)
        now = await ctrl.samples()
        if metric_sum(now, "rest_client_requests_total") == metric_sum(last, "rest_client_requests_total"):
            return now
        last = now
    return last


def _delta_by_method(after: dict[tuple[str, str], float], before: dict[tuple[str, str], float]) -> dict[str, float]:
    a, b = requests_by_method(after), requests_by_method(before)
    return {m: a[m] - b.get(m, 0.0) for m in a if a[m] - b.get(m, 0.0)}


async def cold_start(
    cfg: Config, n: int, *, objects: int = 4, followups: bool = True, into: Metrics | None = None
) -> Metrics:
    """Cold start to all Ready; then (``followups``) a new revision of every source, two no-op rounds, and
    a restart on the variant with ``VerifiedApplies`` wired and two no-op rounds there. Metrics go into
    ``into`` as they are measured, so a failure late in the run keeps the earlier numbers."""
    m: Metrics = into if into is not None else {}
    async with cluster(cfg, f"cold-{n}") as (api, client, artifacts), Tracker(client) as tracker:
        expected = await setup(client, artifacts, n, wait=cfg.wait, objects=objects)
        names = list(expected)
        api_cpu0 = api_cpu(api)
        started = time.perf_counter()
        ctrl = controller(cfg, api, name=f"cold-{n}", profile=True)
        async with ctrl:
            ready = await tracker.wait_ready(expected, within=max(300.0, n * 1.0))
            samples = await scrape(ctrl.metrics_url)
            stats = ctrl.stats()
            seconds = ready - started
            m["cold.seconds"] = seconds
            m["cold.first_ready_s"] = tracker.first_ready(expected) - started
            m["cold.kustomizations_per_s"] = n / seconds
            m["cold.peak_rss_mib"] = stats.peak_rss_mib
            m["cold.cpu_s"] = stats.cpu_s
            m["cold.kustomize_cpu_s"] = stats.children_cpu_s
            m["cold.builder_processes"] = metric_sum(samples, "kustomize_controller_builder_processes_total")
            m["cold.builds_shared"] = metric_sum(samples, "kustomize_controller_builds_shared_total")
            if api.pid:
                m["cold.apiserver_cpu_s"] = api_cpu(api) - api_cpu0
            m["cold.requests"] = metric_sum(samples, "rest_client_requests_total")
            m["cold.requests_per_ks"] = m["cold.requests"] / n
            assert ctrl.sampler is not None
            m["cold.kustomize_max_rss_mib"] = ctrl.sampler.max_child_mib
            m["cold.kustomize_max_parallel"] = ctrl.sampler.max_children
            if not followups:
                return m
            await revision_and_noop(cfg, m, ctrl, api, client, artifacts, tracker, names, objects=objects)
            m["end.peak_rss_mib"] = ctrl.stats().peak_rss_mib
            m["end.rss_mib"] = ctrl.stats().rss_mib
        await restart_with_verified(cfg, m, api, client, tracker, names)
    return m


async def revision_and_noop(
    cfg: Config, m: Metrics, ctrl: Controllers, api: Cluster, client: KubeClient,
    artifacts: ArtifactServer, tracker: Tracker, names: list[str], *, objects: int, rounds: int = 2,
) -> None:
    n = len(names)
    before = await _settled(ctrl)
    cpu0 = ctrl.stats().cpu_s
    started = time.perf_counter()
    revisions = await bounded(publish(client, artifacts, i, rev=2, objects=objects) for i in range(n))
    m["revision.publish_seconds"] = time.perf_counter() - started
    ready = await tracker.wait_ready(dict(zip(names, revisions, strict=True)), within=max(300.0, n * 1.0))
    m["revision.seconds"] = ready - started
    after = await _settled(ctrl)
    m["revision.requests_per_ks"] = (
        metric_sum(after, "rest_client_requests_total") - metric_sum(before, "rest_client_requests_total")
    ) / n
    m["revision.cpu_s"] = ctrl.stats().cpu_s - cpu0
    for round_ in range(1, rounds + 1):
        await noop_round(m, f"noop{round_}", ctrl, api, client, tracker, names)


async def noop_round(
    m: Metrics, key: str, ctrl: Controllers, api: Cluster, client: KubeClient, tracker: Tracker,
    names: list[str],
) -> None:
    """One periodic reconcile of every (unchanged) Kustomization, asked for with ``requestedAt``."""
    n = len(names)
    before = await _settled(ctrl)
    cpu0, api0, modified0 = ctrl.stats().cpu_s, api_cpu(api), tracker.modified
    token = f"bench-{key}-{time.time_ns()}"
    started = time.perf_counter()
    await request_reconcile(client, names, token)
    handled = await tracker.wait_handled(names, token, within=max(120.0, n * 0.5))
    after = await _settled(ctrl)
    m[f"{key}.seconds"] = handled - started
    m[f"{key}.requests_per_reconcile"] = (
        metric_sum(after, "rest_client_requests_total") - metric_sum(before, "rest_client_requests_total")
    ) / n
    for method, count in _delta_by_method(after, before).items():
        m[f"{key}.{method}_per_reconcile"] = count / n
    # every write of a Kustomization is one MODIFIED event; one of them is the driver's requestedAt patch
    m[f"{key}.status_writes_per_reconcile"] = (tracker.modified - modified0) / n - 1
    m[f"{key}.cpu_ms_per_reconcile"] = (ctrl.stats().cpu_s - cpu0) * 1000 / n
    # issue 17: a no-op round should neither download nor build (artifact and build caches)
    downloads = "kustomize_controller_artifact_cache_requests_total"
    builds = "kustomize_controller_build_cache_requests_total"
    m[f"{key}.downloads"] = metric_sum(after, downloads, result="miss") - metric_sum(before, downloads, result="miss")
    m[f"{key}.kustomize_runs"] = sum(
        metric_sum(after, builds, result=r) - metric_sum(before, builds, result=r) for r in ("miss", "bypass")
    )
    if api.pid:
        m[f"{key}.apiserver_cpu_ms_per_reconcile"] = (api_cpu(api) - api0) * 1000 / n


async def restart_with_verified(
    cfg: Config, m: Metrics, api: Cluster, client: KubeClient, tracker: Tracker, names: list[str],
) -> None:
    """Restart the controller: the start-up reconcile of every Kustomization finds an empty
    ``VerifiedApplies`` cache and pays the dry-runs once; the rounds after it skip them."""
    n = len(names)
    ctrl = controller(cfg, api, name=f"verified-{n}")
    started = time.perf_counter()
    async with ctrl:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(120.0, n * 0.5)
        while True:
            samples = await ctrl.wait_metrics()
            if metric_sum(samples, "controller_runtime_reconcile_total") >= n:
                break
            if loop.time() > deadline:
                raise TimeoutError("the restarted controller did not reconcile every Kustomization")
            # a /metrics scrape of 1,000 Kustomizations' series costs the controller tens of ms: poll gently
            await asyncio.sleep(1.0)
        m["restart.seconds_to_all_reconciled"] = time.perf_counter() - started
        samples = await _settled(ctrl)
        m["restart.requests_per_ks"] = metric_sum(samples, "rest_client_requests_total") / n
        for round_ in (1, 2):
            await noop_round(m, f"verified_noop{round_}", ctrl, api, client, tracker, names)
        m["verified.peak_rss_mib"] = ctrl.stats().peak_rss_mib


async def latency(cfg: Config, n: int = 100, *, samples: int = 100, into: Metrics | None = None) -> Metrics:
    """Source revision change → reconcile start → Ready, one Kustomization at a time, the others idle."""
    start_lat: list[float] = []
    ready_lat: list[float] = []
    async with cluster(cfg, f"latency-{n}") as (api, client, artifacts), Tracker(client) as tracker:
        expected = await setup(client, artifacts, n, wait=cfg.wait)
        ctrl = controller(cfg, api, name="latency")
        async with ctrl:
            await tracker.wait_ready(expected, within=max(300.0, n * 1.0))
            await _settled(ctrl, quiet=1.0)
            for k in range(samples):
                i = k % n
                name = f"app-{i}"
                artifact = await artifacts.publish_files(app_files(i, rev=100 + k), name=name)
                revision = str(artifact["revision"])
                t0 = time.perf_counter()
                await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name=name, artifact=artifact)
                await tracker.wait_ready({name: revision}, within=60.0)
                ready_lat.append(tracker.ready_at[(name, revision)] - t0)
                if (name, revision) in tracker.started_at:
                    start_lat.append(tracker.started_at[(name, revision)] - t0)
                await asyncio.sleep(0.05)
    m: Metrics = into if into is not None else {}
    m["latency.samples"] = float(len(ready_lat))
    for label, values in (("start", start_lat), ("ready", ready_lat)):
        if values:
            m[f"latency.{label}_p50_ms"] = percentile(values, 50) * 1000
            m[f"latency.{label}_p99_ms"] = percentile(values, 99) * 1000
            m[f"latency.{label}_max_ms"] = max(values) * 1000
    return m


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


async def _first_reconcile(ctrl: ControllerProcess, *, since: float, within: float = 120.0) -> float:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        with contextlib.suppress(OSError, Exception):
            samples = await scrape(ctrl.metrics_url)
            if metric_sum(samples, "controller_runtime_reconcile_total") > 0:
                return time.perf_counter() - since
        await asyncio.sleep(0.02)
    raise TimeoutError(f"{ctrl.name} did not reconcile within {within:.0f} s")


async def failover(cfg: Config, n: int = 10, *, into: Metrics | None = None) -> Metrics:
    """Seconds from the leader's SIGKILL (then SIGTERM) to the standby's first finished reconcile."""
    m: Metrics = into if into is not None else {}
    flags = [*cfg.flags, "--enable-leader-election"]
    async with cluster(cfg, "failover") as (api, client, artifacts), Tracker(client) as tracker:
        expected = await setup(client, artifacts, n, wait=cfg.wait)
        a = controller(cfg, api, name="leader-a", flags=flags)
        b = controller(cfg, api, name="leader-b", flags=flags)
        c = controller(cfg, api, name="leader-c", flags=flags)
        try:
            await a.start()
            await tracker.wait_ready(expected, within=120.0)
            await b.start()
            await b.wait_metrics()
            await asyncio.sleep(1.0)
            killed = time.perf_counter()
            await a.stop(graceful=False)
            m["failover.sigkill_s"] = await _first_reconcile(b, since=killed)
            await c.start()
            await c.wait_metrics()
            await asyncio.sleep(1.0)
            stopped = time.perf_counter()
            assert b.proc is not None
            b.proc.terminate()
            m["failover.graceful_s"] = await _first_reconcile(c, since=stopped)
        finally:
            for ctrl in (a, b, c):
                await ctrl.stop(graceful=False)
    return m


async def _kubectl_apply(cfg: Config, directory: Path, kubeconfig: str, cache: Path) -> None:
    script = (
        f'"{cfg.kubectl}" kustomize "{directory}" | "{cfg.kubectl}" apply --server-side '
        f'--field-manager=bench-baseline --cache-dir "{cache}" -f - >/dev/null'
    )
    env = {**bench_env(), "KUBECONFIG": kubeconfig}
    proc = await asyncio.create_subprocess_exec("bash", "-o", "pipefail", "-c", script, env=env,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"baseline kubectl failed for {directory}: {err.decode()[-500:]}")


async def baseline(cfg: Config, n: int, *, parallel: int) -> Metrics:
    """``kubectl kustomize DIR | kubectl apply --server-side -f -`` for every app, ``parallel`` at a time."""
    async with cluster(cfg, f"baseline-{n}-{parallel}") as (api, client, _artifacts):
        await create_namespaces(client, APPS_NS)
        root = Path(tempfile.mkdtemp(prefix="baseline-src-", dir=cfg.workdir))
        dirs = [write_app_dir(root, i) for i in range(n)]
        cache = root / "kube-cache"
        api0 = api_cpu(api)
        kubectl0 = _children_cpu()
        started = time.perf_counter()
        await bounded((_kubectl_apply(cfg, d, api.kubeconfig, cache) for d in dirs), limit=parallel)
        seconds = time.perf_counter() - started
        kubectl_cpu = _children_cpu() - kubectl0
        api_cpu_s = api_cpu(api) - api0
    key = "serial" if parallel == 1 else f"parallel{parallel}"
    m = {f"baseline.{key}_s": seconds, f"baseline.{key}_per_s": n / seconds,
         f"baseline.{key}_kubectl_cpu_s": kubectl_cpu}
    if api.pid:
        m[f"baseline.{key}_apiserver_cpu_s"] = api_cpu_s
    return m


def _children_cpu() -> float:
    """CPU seconds of the driver's reaped children (the kubectl processes of the baseline)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine() -> dict[str, str]:
    import platform
    import subprocess

    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=bench_env()).stdout.strip()
        except OSError as err:
            return f"unavailable ({err})"

    mem = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    kubectl = run("kubectl", "version", "--client").replace("\n", "; ")
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu_model,
        "memory": mem,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "kubectl": kubectl,
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }


def summarize(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)
