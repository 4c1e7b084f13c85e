"""Side by side (issue 36): a scenario run by our controller and by upstream's kustomize-controller.

``--controllers ours,upstream`` runs each scenario of ``bench/versus_scenarios.py`` once with each
controller, one after the other (A B A B over ``--rounds``), at each ``--concurrent`` setting, every run on a
cluster of its own, in the state a fresh one is in:

- ``controlplane``: a real control plane started from ``KUBE_ASSETS`` for each run (etcd, kube-apiserver
  v1.36 with its audit log, kube-controller-manager; ``tests/controlplane``), the same binaries and flags
  every time. Each controller authenticates as a user of its own (``bench-ours``, ``bench-upstream``), so the
  audit log says which requests were whose.
- ``embedded``: the embedded API server (its own process, ``--simulate-workloads``) for each run.
- ``kubeconfig``: the cluster of ``BENCH_KUBECONFIG``, the benchmark's namespaces deleted (and waited for)
  before and after every run; both controllers watch those namespaces only.

Upstream's controller is the ``kustomize-controller`` binary of ``FLUX_ASSETS`` (``tests/flux``), started out
of cluster (``KUBECONFIG``, ``RUNTIME_NAMESPACE``, free loopback ports for metrics and health). Both get the
same workload, the same artifacts (the bench's artifact server: both download ``status.artifact.url``), the
same CRDs, ``--concurrent`` and the same log level (``BENCH_LOG_LEVEL``, default ``error``); every other
flag is each controller's default (``--ours-flags``/``--upstream-flags`` add more).

What a phase of a run costs (``Meter``): wall seconds, from the Kustomizations' status as the driver's watch
sees it (Ready with ``lastAppliedRevision``, or ``lastHandledReconcileAt``: both controllers write them, so
no controller's private metrics decide when a round is done); the controller's CPU with all its descendants
(``procs.tree_cpu_seconds``: our kustomize builds; upstream builds in-process); the CPU of the API server,
etcd and the controller manager (``/proc`` of their processes); the controller's API requests, by kind,
from the audit log (elsewhere from its own ``rest_client_requests_total``, by method, which both export);
and for the run, the controller's peak RSS (``VmHWM``) and two peaks of its whole tree (sampled): the RSS
summed over its processes, and its memory with each page once (``procs.tree_rss_and_memory_mib``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.audit import OTHERS, AuditLog, Requests
from bench.procs import (
    ApiServerProcess,
    ControllerProcess,
    _status_kib,
    cpu_seconds,
    descendants,
    profiled,
    requests_by_method,
    scrape,
    tree_cpu_seconds,
    tree_rss_and_memory_mib,
)
from bench.scenarios import Config, Metrics
from bench.workload import EXTERNAL_KUBECONFIG, FLUX_NS, Tracker, delete_namespaces
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.testing.artifacts import ArtifactServer
from tests.controlplane import ControlPlane, missing_assets
from tests.flux import assets as flux_assets
from tests.flux.process import FluxProcess

CLUSTERS = ("controlplane", "embedded", "kubeconfig")
CONTROLLERS = ("ours", "upstream")
# the API server's audit buffer: at its default (10,000 events) a burst of requests can overflow it, and the
# batch backend drops what does not fit
AUDIT_ARGS = ("--audit-log-batch-buffer-size=1000000",)
# the control plane's processes whose CPU a phase reports, by their short names
PLANE = {"kube-apiserver": "apiserver", "apiserver": "apiserver", "etcd": "etcd", "kube-controller-manager": "kcm"}


@dataclass(frozen=True)
class Contender:
    """One controller at one setting: ``name`` is ``ours`` or ``upstream``."""

    name: str
    concurrent: int
    flags: tuple[str, ...] = ()

    @property
    def user(self) -> str:
        """Its identity on the control plane (the audit log's ``user.username``)."""
        return f"bench-{self.name}"

    def label(self) -> str:
        return f"{self.name}-c{self.concurrent}"


def default_cluster() -> str:
    return "kubeconfig" if EXTERNAL_KUBECONFIG else "embedded"


def missing(cluster: str, controllers: list[str]) -> str:
    """Why the side-by-side run cannot start, in one line; ``""`` when it can."""
    if cluster == "controlplane":
        why = missing_assets(os.environ.get("KUBE_ASSETS"))
        if why:
            return why
    if cluster == "kubeconfig" and not EXTERNAL_KUBECONFIG:
        return "--cluster kubeconfig needs BENCH_KUBECONFIG"
    if cluster != "kubeconfig" and EXTERNAL_KUBECONFIG:
        return f"BENCH_KUBECONFIG is set: use --cluster kubeconfig, not {cluster}"
    unknown = [c for c in controllers if c not in CONTROLLERS]
    if unknown:
        return f"unknown controllers {unknown}: {', '.join(CONTROLLERS)}"
    if "upstream" in controllers:
        return flux_assets.missing([flux_assets.KUSTOMIZE_CONTROLLER])
    return ""


@dataclass
class Site:
    """One cluster for one run: the driver's kubeconfig, one per controller identity, the processes whose CPU
    is measured, and the audit log when there is one."""

    kind: str
    kubeconfig: str
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    audit: AuditLog | None = None

    def kubeconfig_for(self, user: str) -> str:
        return self.kubeconfigs.get(user, self.kubeconfig)

    def cpu(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pid in self.pids.items():
            short = PLANE.get(name, name)
            out[short] = out.get(short, 0.0) + cpu_seconds(pid)[0]
        return out


@contextlib.asynccontextmanager
async def site(kind: str, cfg: Config, label: str, users: tuple[str, ...]) -> AsyncIterator[Site]:
    if kind == "controlplane":
        plane = ControlPlane(assets=Path(os.environ["KUBE_ASSETS"]), users=users, apiserver_args=AUDIT_ARGS)
        await asyncio.to_thread(plane.start)
        try:
            yield Site(kind, str(plane.admin_kubeconfig), {u: str(plane.user_kubeconfig(u)) for u in users},
                       dict(plane.pids()), AuditLog(plane.audit_log, users))
        finally:
            await asyncio.to_thread(plane.stop)
    elif kind == "embedded":
        workdir = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=cfg.workdir))
        async with ApiServerProcess(workdir=workdir) as api:
            yield Site(kind, api.kubeconfig, pids={"apiserver": api.pid})
    elif kind == "kubeconfig":
        yield Site(kind, EXTERNAL_KUBECONFIG)
    else:
        raise ValueError(f"unknown cluster {kind!r}: {', '.join(CLUSTERS)}")


@dataclass
class Lab:
    """A cluster with the driver's client, the artifact server and the watch on the Kustomizations."""

    cfg: Config
    site: Site
    client: KubeClient
    artifacts: ArtifactServer
    tracker: Tracker
    phases: frozenset[str] | None = None  # None: every phase of the scenario
    cold_limit: float | None = None  # a cold start still going after this many seconds is cut there

    def wants(self, phase: str) -> bool:
        """Whether to run ``phase`` after the first one (``--phases``; a scenario's first phase always runs)."""
        return self.phases is None or phase in self.phases

    def controller(self, contender: Contender, m: Metrics, *, name: str) -> Running:
        return Running(self, contender, m, name=name)

    def zero(self) -> Snap:
        """Before a controller exists (a cold start's phase begins at its spawn); on the control plane also the
        start of a stretch of the audit log."""
        if self.site.audit is not None:
            self.site.audit.take()
        return Snap((0.0, 0.0), self.site.cpu(), {})


@contextlib.asynccontextmanager
async def lab(kind: str, cfg: Config, label: str, users: tuple[str, ...], *,
              phases: list[str] | None = None, cold_limit: float | None = None) -> AsyncIterator[Lab]:
    async with site(kind, cfg, label, users) as where:
        client = KubeClient(config=await load_kubeconfig(where.kubeconfig), qps=-1, burst=-1)
        try:
            if kind == "kubeconfig":
                await delete_namespaces(client)  # leftovers of an interrupted run
            async with ArtifactServer() as artifacts, Tracker(client) as tracker:
                yield Lab(cfg, where, client, artifacts, tracker, frozenset(phases) if phases else None, cold_limit)
        finally:
            if kind == "kubeconfig":
                with contextlib.suppress(Exception):
                    await delete_namespaces(client)
            await client.close()


@dataclass
class Snap:
    """What has been spent up to one moment: the controller tree's CPU (own, children), the control plane's
    CPU by process, and the controller's own request counters by method."""

    ctrl: tuple[float, float]
    plane: dict[str, float]
    by_method: dict[str, float]


class Running:
    """One controller process of a run (``async with``): started on entry (``spawned`` is when), its tree's RSS
    sampled while it runs, its peak RSS written into the run's metrics and the process stopped on exit."""

    def __init__(self, lab: Lab, contender: Contender, m: Metrics, *, name: str) -> None:
        self.lab = lab
        self.contender = contender
        self.m = m
        self.name = name
        self.pid = 0
        self.metrics_url = ""
        self.spawned = 0.0
        self.tree_peak_mib = 0.0
        self.tree_memory_peak_mib = 0.0
        self.max_children = 0
        self._ours: ControllerProcess | None = None
        self._upstream: FluxProcess | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._spy = contextlib.AsyncExitStack()  # py-spy attached for one phase (``Config.profile_dir``)

    def _flags(self) -> list[str]:
        c = self.contender
        extra = ["--watch-all-namespaces=false"] if self.lab.site.kind == "kubeconfig" else []
        return [f"--concurrent={c.concurrent}", *extra, *c.flags]

    async def __aenter__(self) -> Running:
        kubeconfig = self.lab.site.kubeconfig_for(self.contender.user)
        workdir = self.lab.cfg.workdir
        self.spawned = time.perf_counter()
        if self.contender.name == "ours":
            self._ours = ControllerProcess(kubeconfig=kubeconfig, flags=self._flags(), workdir=workdir,
                                           name=self.name, runtime_namespace=FLUX_NS)
            await self._ours.start()
            self.pid, self.metrics_url = self._ours.pid, self._ours.metrics_url
        else:
            level = os.environ.get("BENCH_LOG_LEVEL", "error")
            self._upstream = FluxProcess(
                binary=flux_assets.binary(flux_assets.KUSTOMIZE_CONTROLLER), kubeconfig=kubeconfig,
                log_path=workdir / f"{self.name}.log", args=[f"--log-level={level}", *self._flags()],
                runtime_namespace=FLUX_NS)
            await self._upstream.start(ready_within=120.0)
            assert self._upstream.pid is not None
            self.pid, self.metrics_url = self._upstream.pid, self._upstream.metrics_url
        self._sampler = asyncio.create_task(self._sample())
        await self._profile("cold")
        return self

    async def _profile(self, key: str) -> None:
        """With ``--profile-dir``, py-spy attached to our controller until the phase ends (``<name>-<key>.txt``);
        upstream's is a Go binary, which py-spy does not read."""
        await self._spy.aclose()
        directory = self.lab.cfg.profile_dir
        if directory is not None and self._ours is not None:
            await self._spy.enter_async_context(profiled(self.pid, directory / f"{self.name}-{key}.txt"))

    async def _sample(self) -> None:
        while True:
            rss, memory = tree_rss_and_memory_mib(self.pid)
            self.tree_peak_mib = max(self.tree_peak_mib, rss)
            self.tree_memory_peak_mib = max(self.tree_memory_peak_mib, memory)
            self.max_children = max(self.max_children, len(descendants(self.pid)))
            await asyncio.sleep(0.25)

    async def __aexit__(self, *exc: object) -> None:
        await self._spy.aclose()
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        if self.pid:
            peak = _status_kib(self.pid, "VmHWM") / 1024
            if peak:
                self.m["peak_rss_mib"] = peak
            self.m["tree_peak_rss_mib"] = self.tree_peak_mib
            self.m["tree_peak_memory_mib"] = self.tree_memory_peak_mib
            self.m["max_children"] = float(self.max_children)
        if self._ours is not None:
            await self._ours.stop()
        if self._upstream is not None:
            await self._upstream.stop()

    async def requests_counter(self) -> dict[str, float]:
        """The controller's own ``rest_client_requests_total`` by method (both controllers export it)."""
        try:
            return requests_by_method(await scrape(self.metrics_url, names=("rest_client_requests_total",)))
        except OSError:
            return {}

    async def snap(self, key: str = "") -> Snap:
        """Now; on the control plane also the start of a stretch of the audit log (what came before is read
        and dropped); with ``--profile-dir`` the start of phase ``key``'s profile."""
        if key:
            await self._profile(key)
        by_method = await self.requests_counter()
        if self.lab.site.audit is not None:
            self.lab.site.audit.take()
        return Snap(tree_cpu_seconds(self.pid) if self.pid else (0.0, 0.0), self.lab.site.cpu(), by_method)

    async def settle(self, *, quiet: float = 1.0, within: float = 30.0) -> None:
        """Until the controller's request counter has stood still for ``quiet`` seconds (the events and status
        writes that follow the last Ready belong to the phase)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        last = sum((await self.requests_counter()).values())
        while loop.time() < deadline:
            await asyncio.sleep(quiet)
            now = sum((await self.requests_counter()).values())
            if now == last:
                return
            last = now

    async def phase(self, key: str, before: Snap, seconds: float, *, per: int, settle: bool = True) -> None:
        """Write the phase's figures into the run's metrics: ``<key>.seconds``, ``.cpu_s`` (the controller's
        tree), ``.children_cpu_s``, ``.<apiserver|etcd|kcm>_cpu_s``, ``.requests`` and, per Kustomization
        (``per``), ``.requests_per_ks`` and ``.req.<kind>``. ``settle=False`` takes them at once (a phase cut
        short, whose controller is still busy)."""
        if settle:
            await self.settle()
        await self._spy.aclose()
        m = self.m
        m[f"{key}.seconds"] = seconds
        own, children = tree_cpu_seconds(self.pid)
        m[f"{key}.cpu_s"] = own + children - sum(before.ctrl)
        m[f"{key}.children_cpu_s"] = children - before.ctrl[1]
        for name, value in self.lab.site.cpu().items():
            m[f"{key}.{name}_cpu_s"] = value - before.plane.get(name, 0.0)
        own = Requests()  # the controller's own count, by method
        for method, count in (await self.requests_counter()).items():
            delta = int(count - before.by_method.get(method, 0.0))
            own.total += delta
            own.by_kind[method.lower()] += delta
        if self.lab.site.audit is not None:
            stretch = self.lab.site.audit.take()
            requests = stretch[self.contender.user]
            for other in OTHERS:  # what else the API server served in the phase (the breakdown at 10,000)
                m[f"{key}.plane_requests.{other}"] = float(stretch[other].total)
            # a cross-check of the audit log (whose buffer could drop events) against what the controller counted
            m[f"{key}.requests_self_reported"] = float(own.total)
        else:
            requests = own
        m[f"{key}.requests"] = float(requests.total)
        m[f"{key}.requests_per_ks"] = requests.total / per
        for kind, count in requests.by_kind.items():
            if count:
                m[f"{key}.req.{kind}"] = count / per
        for code, count in requests.by_code.items():
            if code >= 400:
                m[f"{key}.code.{code}"] = float(count)


def quiet_enough(threshold: float) -> tuple[bool, str]:
    """Whether the 1-minute load average is under ``threshold``; and the load average as text."""
    load = Path("/proc/loadavg").read_text().split()[:3]
    return float(load[0]) < threshold, " ".join(load)


async def wait_quiet(threshold: float, *, within: float, every: float = 60.0) -> str:
    """Wait (at most ``within`` seconds) for the machine to be quiet; returns the load average seen last."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        ok, load = quiet_enough(threshold)
        if ok or loop.time() >= deadline:
            return load
        print(f"[bench] load average {load}: waiting for < {threshold}", flush=True)
        await asyncio.sleep(min(every, max(1.0, deadline - loop.time())))

