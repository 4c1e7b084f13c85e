"""Running the real kustomize: builder discovery, version check, and bounded parallel builds.

Contract:

- Builder choice (:func:`detect_builder`): ``--kustomize-binary`` when given (a ``kubectl*``
  basename runs ``kubectl kustomize``, anything else ``kustomize build``); else the builder installed
  with the package — ``kustomize`` >= v5, then ``kubectl`` >= 1.27, in the directory of the Python
  interpreter or of the console script (:func:`installed_builder_dirs`: the virtualenv's ``bin``,
  the image's ``/opt/venv/bin``), whatever ``PATH`` says; else ``kustomize`` >= v5 on ``PATH``; else
  ``kubectl`` >= 1.27 on ``PATH``. Missing or too old → :class:`BuilderUnavailableError` with a
  message saying what was found and what is needed. :attr:`BuilderCommand.source` says which rule
  chose it and :attr:`BuilderCommand.pinned` whether it is the kustomize upstream pins
  (:mod:`.pin`), for the start-up log.
- Every build runs ``--load-restrictor LoadRestrictionsNone`` (confinement is ours, see
  :mod:`.confine`), with plugins, exec functions and helm left disabled, in a scrubbed
  environment (no inherited variables: ``HOME`` and the working directory are inside the build's
  temp dir; no ``KUBECONFIG``, no cloud credentials). With remote bases disabled, ``PATH`` is empty
  (no ``git``) and HTTP(S) proxies point at a closed local port, as defence in depth behind the
  confinement walk.
- Each build is a Go process told to use one OS thread for Go code (``GOMAXPROCS=1``, unless
  ``go_max_procs`` says otherwise): builds already run in parallel with each other, and a small
  build spends about a third less CPU without the extra Ps and GC workers (measured in
  ``docs/benchmarks.md``); a large build is no slower, kustomize being single-threaded.
- A build whose input is small (``small_input``: at most 64 files and 256 KiB under its root, the
  build's own view of the artifact) runs without Go's garbage collector until its heap reaches
  128 MiB (``GOGC=off GOMEMLIMIT=128MiB``): kubectl's start-up alone allocates enough to trigger
  several collections at Go's default 4 MiB first target, and a build of 4 objects then spends
  about a fifth less CPU (~45 → ~36 ms, measured in ``bench/analysis.md``); the limit brings the
  collector back for an input that expands far beyond its size (remote bases, which the local tree
  does not show): such a build then collects as often as it must to stay near 128 MiB, and only one
  whose live objects exceed that (a few thousand objects) is slowed, by at most the share of CPU
  Go gives its collector under a memory limit. 128 MiB, not more: with Go's default a build peaks
  near twice its live heap, so the limit never lets a build grow past what the default would reach
  for a live heap above 64 MiB, and four parallel builds stay well inside the manifests' 1 GiB limit
  (a 4-object build's heap stays under 10 MB either way). A larger local input keeps Go's default (the
  1,000-object build would otherwise peak at 150-280 MiB instead of 100 MiB). A batch of small builds
  in one process (below) collects at three times its live heap (``GOGC=200``) under the same limit: it
  allocates per root, and without a collector 32 four-object roots grew one builder to 86 MiB, where
  it stays near 58 MiB for 2 % more CPU.
- At most ``max_parallel`` builds run at once (default: twice ``cpus``, the CPUs the process may use —
  its affinity capped by its cgroup CPU limit, :mod:`~kustomize_controller.runtime.cpus`, so that a
  Deployment with ``resources.limits.cpu`` is sized for its limit, not the node. Twice: a build's wall time is
  not all CPU — the exec and page-faulting of a ~60 MB binary, pipes — so one slot per CPU left the
  cores idle between builds; a cold start of 100 Kustomizations took ~10 % less with 4 slots than with
  2 on a 2-core machine, bench/analysis.md). Each has a timeout measured on
  the injected clock and a cap on stdout size; on either, the builder's process group is killed.
- With ``max_batch`` > 1, a build whose root may share a process (a :class:`~.batch.BatchHint` from its
  reach, and a small input) queues behind busy builder processes and may run in one with others
  (:mod:`.batch_queue` groups them, :mod:`.batch` proves each output is the root's own or the root is
  built alone); its output and errors are exactly those of its own build.
- :meth:`KustomizeBuilder.build_split` builds a large root (a :class:`~.split.SplitPlan` of at least
  ``split_min`` estimated objects) as parts of about ``part_objects`` objects in parallel processes —
  at most one per CPU at once, each holding a slot — and returns the joined output only when
  :mod:`.split` proves it is the whole build's; otherwise (a part failed, timed out or printed too much,
  or the proof does not hold) None, and the caller builds the whole root as before. A part whose
  inputs (its kustomization relative to the root, the digests of the files only it reads, the digest of
  everything else the build can read, the builder's identity) are those of a part built before gets
  that part's output again without a process (up to ``part_cache_bytes`` of outputs, least recently
  used out); the proof still runs over all of them. kustomize's output is a function of what it reads.
- Failures are :class:`KustomizeBuildError` "kustomize build failed: <kustomize's message>", with
  the temp-dir prefix removed from paths so that messages are stable across reconciles.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from kustomize_controller.kustomize.batch import BatchHint, crossed, split_output, write_wrapper
from kustomize_controller.kustomize.batch_queue import BatchQueue, Demand
from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.errors import BuilderUnavailableError, KustomizeBuildError, KustomizeError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.memo import Memo
from kustomize_controller.kustomize.pin import PINNED_KUSTOMIZE
from kustomize_controller.kustomize.settle import run_to_end
from kustomize_controller.kustomize.split import (
    PART_OBJECTS,
    SPLIT_MIN_OBJECTS,
    Joined,
    Part,
    SplitPlan,
    check_parts,
    join_parts,
    write_parts,
)
from kustomize_controller.runtime.child import ChildError, ChildResult, run_child
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.cpus import usable_cpus

MIN_KUSTOMIZE = (5, 0, 0)
MIN_KUBECTL = (1, 27, 0)
DEFAULT_BUILD_TIMEOUT = 300.0
DEFAULT_MAX_OUTPUT = 128 << 20
PART_CACHE_BYTES = 16 << 20  # outputs of parts of large roots, reused when a part's inputs are unchanged
_MAX_STDERR = 1 << 20
_CLOSED_PROXY = "http://127.0.0.1:9"
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, slots=True)
class BuilderCommand:
    """How to invoke the builder: ``argv + [dir, --load-restrictor, ...]``."""

    argv: tuple[str, ...]
    flavour: Literal["kustomize", "kubectl"]
    version: str
    kustomize_version: str
    source: Literal["flag", "installed", "PATH"] = "flag"

    @property
    def pinned(self) -> bool:
        """Whether this builder is the kustomize version upstream Flux pins."""
        return self.kustomize_version == PINNED_KUSTOMIZE


def parallel_builds(cpus: int, max_parallel: int | None = None) -> int:
    """How many builds run at once: ``max_parallel`` (``--build-concurrency``) or twice ``cpus`` (the
    module contract says why twice)."""
    return max_parallel or 2 * max(1, cpus)


def gather_size(workers: int) -> int:
    """How many builds end a burst's wait for a group (``--build-batch-wait``): half the reconcile workers
    (``--concurrent``), at least 2. Every worker waiting in one group would leave nothing else running;
    with half of them waiting, the others keep fetching and applying (measured in bench/analysis.md)."""
    return max(2, workers // 2)


def _parse_version(text: str) -> tuple[int, int, int] | None:
    m = _VERSION_RE.search(text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


async def _run(
    argv: list[str], *, clock: Clock, time_limit: float, max_output: int, env: dict[str, str], cwd: Path | None
) -> ChildResult:
    """Run a builder command; the child is reaped and its pipes closed on every way out (see
    :mod:`kustomize_controller.runtime.child`)."""
    try:
        return await run_child(
            argv, clock=clock, time_limit=time_limit, max_output=max_output, max_stderr=_MAX_STDERR, env=env, cwd=cwd
        )
    except ChildError as err:
        raise KustomizeBuildError(f"kustomize build failed: {err}") from None


SMALL_INPUT_FILES = 64
SMALL_INPUT_BYTES = 256 << 10
_SMALL_BUILD_GO_ENV = {"GOGC": "off", "GOMEMLIMIT": "128MiB"}
# A batch allocates per root: without a collector, 32 four-object roots grew one builder to 86 MiB; collecting
# at three times the live heap keeps it near 58 MiB for 2 % more CPU (docs/benchmarks.md, session 11).
_BATCH_BUILD_GO_ENV = {"GOGC": "200", "GOMEMLIMIT": "128MiB"}


def small_input(root: Path, *, max_files: int = SMALL_INPUT_FILES, max_bytes: int = SMALL_INPUT_BYTES) -> bool:
    """True when everything under ``root`` is at most ``max_files`` entries and ``max_bytes`` bytes.

    Stops at the first entry over either bound, so its cost is bounded whatever the tree's size
    (symbolic links are counted as entries, never followed)."""
    entries = 0
    size = 0
    stack = [str(root)]
    try:
        while stack:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    entries += 1
                    if entries > max_files:
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        size += entry.stat(follow_symlinks=False).st_size
                        if size > max_bytes:
                            return False
    except OSError:
        return False  # unreadable: keep Go's defaults; the build reports what is wrong
    return True


def _base_env(home: Path | None = None) -> dict[str, str]:
    return {"PATH": _SAFE_PATH, "HOME": str(home or "/nonexistent"), "LANG": "C", "LC_ALL": "C"}


async def _probe(argv: list[str], clock: Clock) -> str | None:
    try:
        res = await _run(argv, clock=clock, time_limit=30.0, max_output=1 << 20, env=_base_env(), cwd=None)
    except (OSError, KustomizeBuildError):
        return None
    if res.returncode != 0:
        return None
    return res.stdout.decode(errors="replace")


async def _kubectl_command(binary: str, clock: Clock) -> BuilderCommand:
    out = await _probe([binary, "version", "--client", "-o", "json"], clock)
    if out is None:
        raise BuilderUnavailableError(f"kustomize builder '{binary}' does not answer 'version --client'")
    try:
        info = json.loads(out)
        version = str(info["clientVersion"]["gitVersion"])
        kversion = str(info.get("kustomizeVersion") or "")
    except (ValueError, KeyError, TypeError) as err:
        raise BuilderUnavailableError(f"kustomize builder '{binary}': unreadable version output") from err
    parsed = _parse_version(version)
    if parsed is None or parsed < MIN_KUBECTL:
        raise BuilderUnavailableError(
            f"kustomize builder '{binary}' is kubectl {version}; kubectl >= v1.27 (kustomize v5) is required"
        )
    return BuilderCommand((binary, "kustomize"), "kubectl", version, kversion)


async def _kustomize_command(binary: str, clock: Clock) -> BuilderCommand:
    out = await _probe([binary, "version"], clock)
    if out is None:
        raise BuilderUnavailableError(f"kustomize builder '{binary}' does not answer 'version'")
    parsed = _parse_version(out)
    if parsed is None or parsed < MIN_KUSTOMIZE:
        raise BuilderUnavailableError(
            f"kustomize builder '{binary}' is version {out.strip() or 'unknown'}; kustomize >= v5 is required"
        )
    version = "v{}.{}.{}".format(*parsed)
    return BuilderCommand((binary, "build"), "kustomize", version, version)


def _resolve_binary(binary: str) -> str:
    resolved = shutil.which(binary) or binary
    if not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
        raise BuilderUnavailableError(f"kustomize builder '{binary}' not found or not executable")
    return resolved


def installed_builder_dirs() -> list[str]:
    """Where the builder installed with the package lives: the directory of the Python interpreter
    (a virtualenv's ``bin``, where ``make builder`` puts it; the image's ``/opt/venv/bin``) and of the
    console script being run, symbolic links not followed (a virtualenv's ``python`` links to the
    system's)."""
    dirs: list[str] = []
    for path in (sys.executable, sys.argv[0] if sys.argv else ""):
        if path:
            directory = os.path.dirname(os.path.abspath(path))
            if directory not in dirs and os.path.isdir(directory):
                dirs.append(directory)
    return dirs


async def detect_builder(
    *,
    clock: Clock,
    kustomize_binary: str | None = None,
    search_path: str | None = None,
    installed_dirs: Sequence[str] | None = None,
) -> BuilderCommand:
    """Find and version-check the builder (see module docstring for the order); ``installed_dirs``
    defaults to :func:`installed_builder_dirs`, ``search_path`` to ``PATH``."""
    if kustomize_binary:
        resolved = _resolve_binary(kustomize_binary)
        if os.path.basename(resolved).startswith("kubectl"):
            return await _kubectl_command(resolved, clock)
        return await _kustomize_command(resolved, clock)
    problems: list[str] = []
    installed = os.pathsep.join(installed_builder_dirs() if installed_dirs is None else installed_dirs)
    places: list[tuple[Literal["installed", "PATH"], str | None]] = [("PATH", search_path)]
    if installed:
        places.insert(0, ("installed", installed))
    tried: set[str] = set()
    for source, path in places:
        for name, probe in (("kustomize", _kustomize_command), ("kubectl", _kubectl_command)):
            binary = shutil.which(name, path=path)
            if not binary or binary in tried:
                continue
            tried.add(binary)
            try:
                return dataclasses.replace(await probe(binary, clock), source=source)
            except BuilderUnavailableError as err:
                problems.append(str(err))
    if not problems:
        problems.append("neither 'kustomize' nor 'kubectl' is on PATH")
    raise BuilderUnavailableError(
        "no usable kustomize builder (need kustomize >= v5 or kubectl >= v1.27, or --kustomize-binary): "
        + "; ".join(problems)
    )


def _clean_stderr(stderr: bytes, root: Path) -> str:
    lines = []
    for line in stderr.decode(errors="replace").splitlines():
        if not line.strip() or line.startswith("# Warning:"):
            continue
        lines.append(line)
    text = "\n".join(lines).strip()
    for prefix in ("Error: ", "error: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    real = os.path.realpath(root)
    for r in {str(root), real}:
        text = text.replace(r + "/", "").replace(r, ".")
    return text or "builder exited with an error and no message"


@dataclass(frozen=True, slots=True)
class _Job:
    directory: Path
    root: Path
    workdir: Path
    allow_remote: bool
    hint: BatchHint


class KustomizeBuilder:
    """Runs builds with the detected command; shared by all reconciles of one controller."""

    def __init__(
        self,
        *,
        command: BuilderCommand,
        clock: Clock,
        cpus: int | None = None,
        max_parallel: int | None = None,
        timeout: float = DEFAULT_BUILD_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
        go_max_procs: int | None = 1,
        max_batch: int = 1,
        batch_gather: float = 0.0,
        batch_gather_size: int | None = None,
        demand: Demand | None = None,
        workspace: Workspace | None = None,
        metrics: CacheMetrics | None = None,
        part_objects: int = PART_OBJECTS,
        split_min: int = SPLIT_MIN_OBJECTS,
        part_cache_bytes: int = PART_CACHE_BYTES,
    ) -> None:
        """``cpus``: the CPUs builds may use (the controller passes what it found at start-up; None reads
        :func:`~kustomize_controller.runtime.cpus.usable_cpus` now): one lane per CPU for grouped builds and,
        unless ``max_parallel`` says otherwise, twice as many slots.
        ``go_max_procs``: the builder's ``GOMAXPROCS``; None leaves Go's default (all CPUs).
        ``max_batch`` > 1 (with a ``workspace`` for the wrappers) lets up to that many queued builds that
        may share a process (a :class:`~.batch.BatchHint` and a small input) run in one (:mod:`.batch`);
        ``batch_gather`` is how long a build in a burst may wait for company while ``demand`` counts other
        reconciles holding a worker (:mod:`.batch_queue`); without a ``demand`` no build waits.
        ``part_objects``/``split_min``: :meth:`build_split` cuts a root of at least ``split_min`` estimated
        objects into parts of about ``part_objects`` (0 never splits; it needs a ``workspace``), and keeps
        up to ``part_cache_bytes`` of the parts' outputs for parts built again with the same inputs."""
        self.command = command
        self._go_max_procs = go_max_procs
        self._clock = clock
        cpus = max(1, cpus or usable_cpus().count)
        self._slots = asyncio.Semaphore(parallel_builds(cpus, max_parallel))
        self._timeout = timeout
        self._max_output = max_output
        self._workspace = workspace
        self._metrics = metrics
        self._cpus = cpus
        self._part_objects = part_objects
        self._split_min = split_min
        # the outputs of the parts built last, by their inputs (split.Part): a new revision that changes a
        # few of a large root's files builds only the parts that read them
        self._parts: Memo[str, bytes] = Memo(max_bytes=part_cache_bytes, size=lambda key, out: len(key) + len(out))
        self.batches: BatchQueue[_Job] | None = None
        if max_batch > 1 and workspace is not None:
            self.batches = BatchQueue(
                slots=self._slots, alone=self._build_job, together=self._build_together, max_batch=max_batch,
                lanes=cpus, gather=batch_gather, gather_size=batch_gather_size, clock=clock, demand=demand,
            )

    def cache_identity(self) -> str:
        """What makes this builder's output what it is, for the build cache: the command, its
        reported versions and the binary's file identity (a replaced binary is a new builder even
        before anyone re-detects its version)."""
        binary = self.command.argv[0]
        try:
            st = os.stat(binary)
            stamp = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        except OSError:
            stamp = "unreadable"
        return "|".join((*self.command.argv, self.command.version, self.command.kustomize_version, stamp))

    async def build(
        self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool, batch: BatchHint | None = None
    ) -> bytes:
        """Build ``directory`` (inside ``root``); ``workdir`` is the process's cwd and HOME. With ``batch``
        (the root may share a process, :mod:`.batch`) the build may run in one with others queued."""
        small = small_input(root)
        if batch is not None and small and self.batches is not None:
            return await self.batches.submit(_Job(directory, root, workdir, allow_remote, batch))
        async with self._slots:
            return await self._build_alone(directory, root=root, workdir=workdir, allow_remote=allow_remote,
                                           small=small)

    def _env(self, workdir: Path, *, allow_remote: bool, small: bool, batch: bool = False) -> dict[str, str]:
        env = _base_env(workdir)
        if self._go_max_procs is not None:
            env["GOMAXPROCS"] = str(self._go_max_procs)
        if small:
            env.update(_BATCH_BUILD_GO_ENV if batch else _SMALL_BUILD_GO_ENV)
        if not allow_remote:
            env["PATH"] = ""
            for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
                env[key] = _CLOSED_PROXY
        return env

    async def _invoke(self, directory: Path, *, workdir: Path, env: dict[str, str]) -> ChildResult:
        argv = [*self.command.argv, str(directory), "--load-restrictor", "LoadRestrictionsNone"]
        try:
            return await _run(
                argv, clock=self._clock, time_limit=self._timeout, max_output=self._max_output, env=env, cwd=workdir
            )
        except OSError as err:
            raise KustomizeBuildError(f"kustomize build failed: cannot run {self.command.argv[0]}: {err}") from err

    async def _build_alone(self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool,
                           small: bool) -> bytes:
        """One build in its own process; the caller holds a slot."""
        env = self._env(workdir, allow_remote=allow_remote, small=small)
        if self._metrics is not None:
            self._metrics.builder_process("one")
        res = await self._invoke(directory, workdir=workdir, env=env)
        if res.returncode != 0:
            raise KustomizeBuildError(f"kustomize build failed: {_clean_stderr(res.stderr, root)}")
        return res.stdout

    async def _build_job(self, job: _Job) -> bytes:
        return await self._build_alone(job.directory, root=job.root, workdir=job.workdir,
                                       allow_remote=job.allow_remote, small=True)

    async def _build_together(self, jobs: Sequence[_Job]) -> list[bytes | None]:
        """Jobs in one process (the caller holds a slot): each one's output, None where not trusted."""
        assert self._workspace is not None
        token = secrets.token_hex(8)
        wrapper = await asyncio.to_thread(self._write_wrapper, [j.directory for j in jobs], token)
        try:
            # no job reads a remote base (a hint says so): the strictest environment fits them all
            env = self._env(wrapper, allow_remote=False, small=True, batch=True)
            res = await self._invoke(wrapper, workdir=wrapper, env=env)
            if res.returncode != 0:
                raise KustomizeBuildError(f"kustomize build failed: {_clean_stderr(res.stderr, wrapper)}")
            hints = [j.hint for j in jobs]
            parts = await asyncio.to_thread(_trusted_parts, res.stdout, token, hints)
            if self._metrics is not None:
                self._metrics.builder_process("several", shared=sum(p is not None for p in parts))
            return parts
        finally:
            await run_to_end(asyncio.to_thread(shutil.rmtree, wrapper, True))

    async def build_split(self, directory: Path, *, root: Path, plan: SplitPlan, generated: str) -> Joined | None:
        """Build the root in ``directory`` (inside ``root``; its generated kustomization ``generated``) in
        parts, or None when it is not large enough or its parts are not proven to be its whole build
        (:mod:`.split`); never raises a build's error (the whole build then reports it)."""
        if self._workspace is None or self._part_objects <= 0 or plan.objects < max(2, self._split_min):
            return None
        try:
            base = await asyncio.to_thread(self._workspace.create)
        except OSError:
            self._split_result("whole")
            return None
        try:
            try:
                parts = await asyncio.to_thread(write_parts, generated, plan, directory, base, self._part_objects)
            except (OSError, yaml.YAMLError):  # the whole build reports what is wrong, if anything
                self._split_result("whole")
                return None
            outputs = await self._build_parts(parts, reuse=bool(plan.shared))
            if outputs is None or sum(map(len, outputs)) > self._max_output:
                self._split_result("whole")
                return None
            joined = await asyncio.to_thread(_proven, outputs, plan)
            self._split_result("whole" if joined is None else "split")
            return joined
        finally:
            await run_to_end(asyncio.to_thread(shutil.rmtree, base, True))

    async def _build_parts(self, parts: list[Part], *, reuse: bool) -> list[bytes] | None:
        """Every part's output, or None as soon as one fails (the others are stopped). With ``reuse``, a
        part whose inputs are those of a part built before gets that part's output without a process."""
        lanes = asyncio.Semaphore(self._cpus)
        identity = self.cache_identity() if reuse else None
        failed = False
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._build_part(p, lanes, identity)) for p in parts]
        except* KustomizeBuildError:
            failed = True
        return None if failed else [t.result() for t in tasks]

    async def _build_part(self, part: Part, lanes: asyncio.Semaphore, identity: str | None) -> bytes:
        """``identity``: the builder's, to reuse the output of a part with the same inputs (None: never)."""
        key = None if identity is None else hashlib.sha256(f"{identity}\0{part.inputs}".encode()).hexdigest()
        if key is not None and (known := self._parts.get(key)) is not None:
            self._part_result("reused")
            return known
        async with lanes, self._slots:
            if self._metrics is not None:
                self._metrics.builder_process("part")
            # the plan says no remote reference: the strictest environment fits
            res = await self._invoke(part.wrapper, workdir=part.wrapper,
                                     env=self._env(part.wrapper, allow_remote=False, small=False))
        if res.returncode != 0:
            raise KustomizeBuildError("a part of a split build failed")
        self._part_result("built")
        if key is not None:
            self._parts.put(key, res.stdout)
        return res.stdout

    def _part_result(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.split_part(result)

    def _split_result(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.split_build(result)

    def _write_wrapper(self, directories: list[Path], token: str) -> Path:
        assert self._workspace is not None
        wrapper = self._workspace.create()
        write_wrapper(wrapper, directories, token)
        return wrapper


def _proven(outputs: list[bytes], plan: SplitPlan) -> Joined | None:
    try:
        documents = check_parts(outputs, plan)
    except KustomizeError:  # an output that does not decode: the whole build reports it
        return None
    return None if documents is None else join_parts(outputs, documents)


def _trusted_parts(stdout: bytes, token: str, hints: Sequence[BatchHint]) -> list[bytes | None]:
    parts = split_output(stdout, token, len(hints))
    suspect = crossed(parts, hints)
    return [None if i in suspect else part for i, part in enumerate(parts)]
