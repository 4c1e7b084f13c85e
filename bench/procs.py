"""The processes a benchmark runs and what it reads about them from ``/proc`` (Linux only).

- ``ApiServerProcess``: the embedded API server as its own process (so its CPU is not the controller's
  or the driver's), with ``--simulate-workloads`` (Deployments report Available as on a real cluster),
  started as ``python -m kustomize_controller.testing.apiserver``.
- ``ControllerProcess``: ``python -m kustomize_controller`` with the flags given (and, with ``cpus``, an
  affinity to those CPUs, set before it starts: what a CPU limit would allow it); ``stats()`` reads
  its peak RSS (``VmHWM``, the kernel's high-water mark of this very process), its own CPU seconds
  and the CPU seconds of its reaped children (the kustomize builds); a ``ChildSampler`` polls the
  RSS of live descendants to report the largest kustomize process.
- ``scrape(url)``: one Prometheus text exposition as ``{(name, labels): value}``.

Every process is stopped by its owner (async context managers); a stop is SIGTERM, then SIGKILL after
``grace`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Protocol
from urllib.parse import urlencode

import aiohttp

from tests.processes import die_with_parent_gently, free_port, terminate

REPO_ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    # BENCH_EXTRA_PYTHONPATH: a directory put before the repository for every process the bench starts,
    # e.g. one with a diagnostic sitecustomize.py (timing the garbage collector)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("BENCH_EXTRA_PYTHONPATH"), str(REPO_ROOT)]))
    return env


def _status_kib(pid: int, field: str, source: str = "status") -> int:
    """A ``field: N kB`` line of ``/proc/PID/<source>``; 0 once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/{source}").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(own user+system, reaped children's user+system) CPU seconds of ``pid``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return (0.0, 0.0)
    fields = raw.rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ((utime + stime) / CLK_TCK, (cutime + cstime) / CLK_TCK)


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    stack = [pid]
    while stack:
        current = stack.pop()
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    children = [int(c) for c in (task / "children").read_text().split()]
                    out.extend(children)
                    stack.extend(children)
    return out


def tree_cpu_seconds(pid: int) -> tuple[float, float]:
    """(own, children) CPU seconds of ``pid`` and its whole tree: children are the reaped ones plus every live
    descendant's own and reaped CPU, so that long-lived helpers (our kustomize builder processes) count while
    they run, not only once they exit. Between two readings the difference is what the tree spent: a
    descendant that exits moves from the live sum into its parent's reaped sum, at least as large."""
    own, reaped = cpu_seconds(pid)
    live = 0.0
    for child in descendants(pid):
        mine, theirs = cpu_seconds(child)
        live += mine + theirs
    return own, reaped + live


def pss_kib(pid: int) -> int:
    """``pid``'s proportional set size (``/proc/PID/smaps_rollup``): its private pages, and each page it shares
    divided by the number of processes mapping it; 0 once it is gone."""
    return _status_kib(pid, "Pss", "smaps_rollup")


def tree_rss_and_memory_mib(pid: int) -> tuple[float, float]:
    """The memory of ``pid`` and its live descendants together, now, twice: their RSS summed, which counts a page
    several of them map (the kustomize builders' binary, ~34 MiB of each) once per process; and each page once,
    ``pid``'s whole RSS (nothing of it discounted, though some pages are shared with processes outside the
    tree) plus its descendants' PSS — our descendants are concurrent builders mapping one binary, whose pages
    their PSS shares out among them, as the kernel and a container's memory limit count them. From one reading
    of ``pid``'s RSS and one list of its descendants, so that the second is never above the first."""
    own = _status_kib(pid, "VmRSS")
    kids = descendants(pid)
    rss = [_status_kib(k, "VmRSS") for k in kids]
    pss = [min(pss_kib(k), r) for k, r in zip(kids, rss, strict=True)]
    return (own + sum(rss)) / 1024, (own + sum(pss)) / 1024


@dataclass
class ProcStats:
    peak_rss_mib: float
    rss_mib: float
    cpu_s: float
    children_cpu_s: float


def proc_stats(pid: int) -> ProcStats:
    own, children = cpu_seconds(pid)
    return ProcStats(
        peak_rss_mib=_status_kib(pid, "VmHWM") / 1024,
        rss_mib=_status_kib(pid, "VmRSS") / 1024,
        cpu_s=own,
        children_cpu_s=children,
    )


class ChildSampler:
    """Polls the RSS of ``pid``'s descendants every ``interval`` s: the largest one and the largest sum."""

    def __init__(self, pid: int, *, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.max_child_mib = 0.0
        self.max_total_mib = 0.0
        self.max_children = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            kids = descendants(self.pid)
            sizes = [_status_kib(k, "VmRSS") / 1024 for k in kids]
            if sizes:
                self.max_child_mib = max(self.max_child_mib, max(sizes))
                self.max_total_mib = max(self.max_total_mib, sum(sizes))
                self.max_children = max(self.max_children, len(sizes))
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


def _pinned(cpus: frozenset[int] | None) -> Callable[[], None]:
    """The child's preexec: die with the parent and, with ``cpus``, run only on those CPUs (the controller
    and the builds it starts inherit the affinity, so it sees as many CPUs as a Deployment limited to that
    many would)."""
    def preexec() -> None:
        die_with_parent_gently()
        if cpus:
            os.sched_setaffinity(0, cpus)

    return preexec


def _log_file(path: Path) -> BinaryIO:
    """A log file handed to a child process (closed by the caller once the child has it)."""
    return path.open("ab")


class ApiServerProcess:
    def __init__(self, *, workdir: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.extra_args = extra_args
        self.kubeconfig = str(workdir / "apiserver.kubeconfig")
        self.url = ""
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> ApiServerProcess:
        log = _log_file(self.workdir / "apiserver.log")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kustomize_controller.testing.apiserver", "--port", "0",
            "--kubeconfig-out", self.kubeconfig, "--simulate-workloads", "--history-size", "200000",
            *self.extra_args, stdout=asyncio.subprocess.PIPE, stderr=log, env=bench_env(), cwd=str(REPO_ROOT),
            preexec_fn=die_with_parent_gently,
        )
        log.close()
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if not line:
            raise RuntimeError(f"API server did not start; see {self.workdir / 'apiserver.log'}")
        self.url = line.decode().strip()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None:
            await terminate(self.proc, grace=10)


class ControllerProcess:
    """``python -m kustomize_controller`` against ``kubeconfig`` with ``flags`` (plus metrics/health ports)."""

    def __init__(self, *, kubeconfig: str, flags: list[str], workdir: Path, name: str = "controller",
                 runtime_namespace: str = "flux-system", module: str = "kustomize_controller",
                 profile_dir: Path | None = None, cpus: frozenset[int] | None = None,
                 log_level: str | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.log_level = log_level or os.environ.get("BENCH_LOG_LEVEL", "error")
        self.cpus = cpus  # None: every CPU of the driver
        self.flags = flags
        self.workdir = workdir
        self.name = name
        self.runtime_namespace = runtime_namespace
        self.module = module
        self.profile_dir = profile_dir  # py-spy flame graphs (then stats() describe py-spy, not the controller)
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.sampler: ChildSampler | None = None
        self._last: ProcStats | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> None:
        env = bench_env()
        env["RUNTIME_NAMESPACE"] = self.runtime_namespace
        tmp = Path(tempfile.mkdtemp(prefix=f"{self.name}-tmp-", dir=self.workdir))
        env["TMPDIR"] = str(tmp)
        log = _log_file(self.workdir / f"{self.name}.log")
        wrapper: list[str] = []
        if self.profile_dir is not None:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            py_spy = str(Path(sys.executable).parent / "py-spy")
            wrapper = [py_spy, "record", "--rate", "200", "--format", "raw", "--nonblocking",
                       "-o", str(self.profile_dir / f"{self.name}.txt"), "--"]
        self.proc = await asyncio.create_subprocess_exec(
            *wrapper, sys.executable, "-m", self.module, "--kubeconfig", self.kubeconfig,
            "--metrics-addr", f"127.0.0.1:{self.metrics_port}", "--health-addr", f"127.0.0.1:{self.health_port}",
            "--webhook-addr", "127.0.0.1:0", "--log-level", self.log_level, *self.flags,
            stdout=log, stderr=log, env=env, cwd=str(REPO_ROOT), preexec_fn=_pinned(self.cpus),
        )
        log.close()
        self.sampler = ChildSampler(self.proc.pid)
        self.sampler.start()

    async def wait_metrics(self, *, within: float = 60.0) -> dict[tuple[str, str], float]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            if self.proc is not None and self.proc.returncode is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.workdir}")
            try:
                return await scrape(self.metrics_url)
            except (aiohttp.ClientError, OSError):
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.05)

    async def samples(self) -> dict[tuple[str, str], float]:
        """The series the scenarios poll (``POLLED``), now; ``ControllerGroup.samples`` sums several.
        Filtered (``/metrics?name[]=…``): the whole page of 10,000 Kustomizations costs the controller
        about 1 s of CPU, and the driver polls every second while it waits for the requests to settle."""
        return await scrape(self.metrics_url, names=POLLED)

    def stats(self) -> ProcStats:
        if self.proc is not None and self.proc.returncode is None:
            self._last = proc_stats(self.proc.pid)
        assert self._last is not None, "no statistics before the process ran"
        return self._last

    async def stop(self, *, graceful: bool = True) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(AssertionError):
            self.stats()
        if self.sampler is not None:
            await self.sampler.stop()
        if self.profile_dir is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT, then stops the child
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 60)
        if graceful:
            await terminate(self.proc, grace=40)
        elif self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()

    async def __aenter__(self) -> ControllerProcess:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class Controllers(Protocol):
    """One controller process, or the shards of one sharded install seen as one (``ControllerGroup``)."""

    async def samples(self) -> dict[tuple[str, str], float]: ...

    def stats(self) -> ProcStats: ...


class ControllerGroup:
    """Several controller processes (the shards of a sharded install) measured as one: their /metrics
    samples summed, their CPU summed, their peak RSS the largest of them (``shard_stats`` has each)."""

    def __init__(self, members: list[ControllerProcess]) -> None:
        self.members = members

    async def samples(self) -> dict[tuple[str, str], float]:
        total: dict[tuple[str, str], float] = {}
        for scraped in await asyncio.gather(*(c.samples() for c in self.members)):
            for key, value in scraped.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def shard_stats(self) -> list[ProcStats]:
        return [c.stats() for c in self.members]

    def stats(self) -> ProcStats:
        each = self.shard_stats()
        return ProcStats(peak_rss_mib=max(s.peak_rss_mib for s in each), rss_mib=max(s.rss_mib for s in each),
                         cpu_s=sum(s.cpu_s for s in each), children_cpu_s=sum(s.children_cpu_s for s in each))

    async def __aenter__(self) -> ControllerGroup:
        for member in self.members:
            await member.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.gather(*(member.stop() for member in self.members))


@contextlib.asynccontextmanager
async def profiled(pid: int, out: Path | None) -> AsyncIterator[None]:
    """py-spy attached to a running process for the body only (``out``: its raw profile; None: no-op).

    For profiling one phase of a scenario (e.g. the monorepo's "one app changed") without the cold
    start that precedes it dominating the samples."""
    if out is None:
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    py_spy = str(Path(sys.executable).parent / "py-spy")
    proc = await asyncio.create_subprocess_exec(
        py_spy, "record", "--rate", "200", "--format", "raw", "--nonblocking", "--pid", str(pid), "-o", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, preexec_fn=die_with_parent_gently,
    )
    try:
        await asyncio.sleep(0.5)  # py-spy attaches
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT and detaches
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 30)
        await terminate(proc, grace=5)


# what the scenarios read from a controller while it runs (requests, reconciles, downloads, builds)
POLLED = (
    "rest_client_requests_total",
    "controller_runtime_reconcile_total",
    "kustomize_controller_artifact_cache_requests_total",
    "kustomize_controller_build_cache_requests_total",
    "kustomize_controller_kube_requests_total",  # requests_by_kind
    "kustomize_controller_kube_client_throttling",  # throttling_mode
    "kustomize_controller_builder_processes_total",  # builds per builder process (scale)
    "kustomize_controller_builds_shared_total",
)


async def scrape(url: str, *, names: tuple[str, ...] = ()) -> dict[tuple[str, str], float]:
    """``names``: only those series (the controller's ``name[]`` filter); all of them by default."""
    if names:
        url = f"{url}?{urlencode([('name[]', name) for name in names])}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http, http.get(url) as resp:
        resp.raise_for_status()
        text = await resp.text()
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match:
            out[(match.group(1), match.group(2) or "")] = float(match.group(3))
    return out


def metric_sum(samples: dict[tuple[str, str], float], name: str, **labels: str) -> float:
    total = 0.0
    for (metric, raw), value in samples.items():
        if metric != name:
            continue
        if all(f'{k}="{v}"' in raw for k, v in labels.items()):
            total += value
    return total


def requests_by_method(samples: dict[tuple[str, str], float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for (metric, raw), value in samples.items():
        if metric == "rest_client_requests_total":
            match = re.search(r'method="([^"]*)"', raw)
            method = match.group(1) if match else "?"
            out[method] = out.get(method, 0.0) + value
    return out


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')


def requests_by_kind(samples: dict[tuple[str, str], float]) -> dict[str, float]:
    """``kustomize_controller_kube_requests_total`` by what the request was: ``"get configmaps"``,
    ``"patch (dry-run) deployments"``, ``"patch kustomizations/status"``."""
    out: dict[str, float] = {}
    for (metric, raw), value in samples.items():
        if metric != "kustomize_controller_kube_requests_total":
            continue
        labels = dict(_LABEL.findall(raw))
        verb, resource, sub, dry = (labels.get(k, "") for k in ("verb", "resource", "subresource", "dry_run"))
        plural = resource.split(".", 1)[0]  # the group adds length, never ambiguity, for this workload
        key = f"{verb}{' (dry-run)' if dry == 'true' else ''} {plural or '(discovery)'}{'/' + sub if sub else ''}"
        out[key] = out.get(key, 0.0) + value
    return out


def throttling_mode(samples: dict[tuple[str, str], float]) -> str:
    """The client-side throttling mode the controller chose at start-up (``kube/flowcontrol.py``)."""
    for (metric, raw), value in samples.items():
        if metric == "kustomize_controller_kube_client_throttling" and value == 1:
            match = re.search(r'mode="([^"]*)"', raw)
            if match:
                return match.group(1)
    return "unknown"
