"""Run a scenario fault-free, then again with one fault at each chosen point, and compare end states.

A *scenario* is what a user does (publish revisions, create, edit or delete Kustomizations, mark a
workload ready) with a wait for the controller between steps; it runs in a namespace of its own, so that
one embedded server hosts the fault-free recording and every faulty run of a test, one after the other.
Its first controller runs as user ``<run>-1`` and carries the fault (``server.client_faults``):

- ``crash@k``: SIGKILL right after its k-th write (Leases and Events not counted: their timing is the
  clock's). The server stores the write, aborts every connection of that user and drops all it sends from
  then on; the controller task is cancelled (what its clean-up code sends is dropped: no status written,
  no lease released). A fresh controller (user ``<run>-2``) starts at once, as a restarted pod, unless the
  scenario has a standby that takes the lease over instead.
- ``close@i`` / ``expire@i``: the i-th watch event sent to it is not delivered; the stream ends cleanly
  there (re-watch) or with 410 Expired (relist) — see ``clientfaults.py``.
- ``lag@n``: its Kustomization watch is served by a cache ``n`` writes behind (each event held until ``n``
  more writes or ``LAG_SECONDS``), its ``resourceVersion=0`` reads of them answered ``n`` writes in the past.
- combined, on the restarted controller too (user ``<run>-2``: the fresh one, or the standby):
  ``crash@k+crash@j``: the first dies after its k-th write, the restarted one after its own j-th, and a
  third (``<run>-3``) converges; ``crash@k+lag@n``: the Kustomization watch cache lags ``n`` writes for
  both (the API server's cache: the first crashes while it lags, the restarted one starts with it).

Faults about a *phase* of a scenario (``Scenario.phase``: the scenario calls ``run.mark(phase)`` where it
begins, e.g. right before deleting its Kustomization), counted from the mark on the controller live then:

- ``fin@j``: the live controller dies after its j-th write since the mark (a finalizer's deletes, its
  removal; 0: at the mark, before the scenario's next step); ``fin@<checkpoint>``: it dies when the
  scenario reaches ``run.checkpoint(name)`` (a moment without a write, e.g. while it waits for the
  objects it deleted to terminate). ``fin@j+crash@i``: the restarted one dies too, after its own i-th
  write, and a third converges.
- ``lease@j``: the leader loses its lease right after its j-th write since the mark (0: at the mark),
  in the middle of its apply: from then on none of its Lease requests is served (they wait until its
  client gives up), all else is; it must stop at its renew deadline, and the standby takes over once the
  lease has expired. ``lease-deleted@j``: someone deletes the Lease at that point instead.
  ``lease@j+lag``: as ``lease@j``, the standby's Kustomization watch serving every event ``STANDBY_LAG``
  seconds late from its start (longer than the lease duration: it takes over with a cache that does not
  show the old leader's last writes).

Points: the fault-free run counts the writes (W) and events (E) of its controller and the writes at each
mark (W_p: from the phase's mark to the end; W_c: from a checkpoint to the end); every k in 1..W and
every i in 1..E (pairs: every k in 1..W with every j in 1..W-k+1, every (k, n) in 1..W × ``LAGS``; every
j in 0..W_p and each checkpoint for ``fin``, with every i in 1..W_p-j+1 (1..W_c+1) for ``fin+crash``;
every j in 0..W_p for the lease faults) with ``FAULTS_EXHAUSTIVE=1``, otherwise a sample drawn with a
seed made of the scenario and fault names (the same points on every run). ``FAULTS_REPORT=<file>``
appends one JSON line per test with what was tried and found.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.kube.errors import NotFoundError
from tests.integration.controller.conftest import ControllerEnv, Instance
from tests.integration.faults.oracle import KINDS, State, differences, end_state

EXHAUSTIVE = os.environ.get("FAULTS_EXHAUSTIVE", "") not in ("", "0")
FAULT_KINDS = ("crash", "close", "expire", "lag", "crash+crash", "crash+lag")
# faults about a scenario's phase (``Scenario.phase``)
FINALIZATION_FAULTS = ("fin", "fin+crash")
LEASE_FAULTS = ("lease", "lease-deleted", "lease+lag")
# the lag of a standby's Kustomization cache in ``lease+lag`` (seconds, whatever is written meanwhile):
# longer than the lease duration of the scenarios with leader election, so that it takes over with it
STANDBY_LAG = 5.0
# points sampled per fault kind in CI (every point with FAULTS_EXHAUSTIVE=1)
SAMPLE = {"crash": 3, "close": 1, "expire": 1, "lag": 1, "crash+crash": 1, "crash+lag": 1,
          "fin": 2, "fin+crash": 1, "lease": 1, "lease-deleted": 1, "lease+lag": 1}
LAGS = (1, 2, 3, 5)
LAG_SECONDS = 2.0
# the watch cache that lags: the Kustomizations' (a real server has one per resource, each lagging on its
# own); the controller's own status writes then reach it late while the sources it reacts to are current
LAGGING = frozenset({"kustomizations"})
CONVERGE_WITHIN = 45.0
# a test's timeout: exhaustive runs are long by design
TIMEOUT = 3600 if EXHAUSTIVE else 120


@dataclass(frozen=True)
class Scenario:
    name: str
    drive: Callable[[ScenarioRun], Awaitable[None]]
    kinds: tuple[tuple[str, str], ...] = KINDS
    # a second controller started with the first, taking the lease over when the first dies
    standby: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)
    # facts about state outside the namespace's objects (keys "@..."), compared with the end state
    extra: Callable[[ScenarioRun], Awaitable[State]] | None = None
    faults: tuple[str, ...] = FAULT_KINDS
    # the mark (``run.mark``) where the phase faults start, and the checkpoints a ``fin`` crash may hit
    phase: str = ""
    checkpoints: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Fault:
    """none, crash, close, expire, lag; crash+crash, crash+lag (``then``: the restarted one's); fin (at a
    write ``at`` counted from the phase's mark, or at ``checkpoint``), fin+crash; lease, lease-deleted,
    lease+lag (module docstring)."""

    kind: str
    at: int = 0
    then: int = 0
    checkpoint: str = ""

    def __str__(self) -> str:
        if self.kind == "none":
            return self.kind
        first, _, second = self.kind.partition("+")
        then = f"@{self.then}" if self.then else ""
        return f"{first}@{self.checkpoint or self.at}" + (f"+{second}{then}" if second else "")

    @property
    def crashes(self) -> int:
        """How many controllers this fault kills (when its points are reached)."""
        return self.kind.replace("fin", "crash").split("+").count("crash")

    @property
    def actions(self) -> int:
        """How many other faults it starts at its point (a lease lost or deleted)."""
        return 1 if self.kind in LEASE_FAULTS else 0

    @property
    def lags(self) -> bool:
        return self.kind.endswith("lag")


@dataclass
class Recording:
    state: State
    writes: int
    events: int
    # writes of the live controller when the scenario reached each mark and checkpoint
    marks: dict[str, int] = field(default_factory=dict)

    def after(self, mark: str) -> int:
        """Writes from ``mark`` to the end of the run."""
        return self.writes - self.marks.get(mark, self.writes)


class ScenarioRun:
    """One run of a scenario in its namespace; ``env`` is scoped to it, ``start()`` starts its controllers."""

    def __init__(self, env: ControllerEnv, scenario: Scenario, fault: Fault, name: str, directory: Path) -> None:
        self.env = env
        self.scenario = scenario
        self.fault = fault
        self.name = name
        self._directory = directory
        self.instances: list[Instance] = []
        self.crashes = 0
        self.actions = 0  # lease faults started
        self.marks: dict[str, int] = {}
        self.facts: State = {}  # what the scenario noted on its way (compared with the recording's)
        self.exited: dict[str, int] = {}  # user → length of the request log when its controller exited
        self._killed: list[Instance] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def crashed(self) -> bool:
        return self.crashes > 0

    @property
    def first_user(self) -> str:
        return f"{self.name}-1"

    async def start(self, **overrides: Any) -> None:
        self._overrides = {**self.scenario.settings, **overrides}
        first = self._instance()
        faults = self.env.server.client_faults
        kind, at = self.fault.kind, self.fault.at
        if kind.startswith("crash"):
            faults.crash_after(first.user, writes=at, on_crash=lambda: self._crash(first))
        elif kind in ("close", "expire"):
            faults.drop_event(first.user, index=at, then="close" if kind == "close" else "expire")
        elif kind == "lag":
            faults.lag(first.user, writes=at, seconds=LAG_SECONDS, resources=LAGGING)
        if kind == "crash+lag":  # the API server's cache lags: for the first controller too
            faults.lag(first.user, writes=self.fault.then, seconds=LAG_SECONDS, resources=LAGGING)
        first.start()
        if self.scenario.standby:
            if self._overrides.get("enable_leader_election"):
                await first.wait_leader()
            self._instance().start()

    def _instance(self) -> Instance:
        instance = self.env.instance(f"{self.name}-{len(self.instances) + 1}", self._directory, **self._overrides)
        self.instances.append(instance)
        faults, then = self.env.server.client_faults, self.fault.then
        faults.watch(instance.user)  # count its writes
        if len(self.instances) == 2:  # the restarted controller (or the standby): a combined fault's second
            if self.fault.kind in ("crash+crash", "fin+crash"):
                faults.crash_after(instance.user, writes=then, on_crash=lambda: self._crash(instance))
            elif self.fault.kind == "crash+lag":
                faults.lag(instance.user, writes=then, seconds=LAG_SECONDS, resources=LAGGING)
            elif self.fault.kind == "lease+lag":  # every event STANDBY_LAG seconds late, from its start
                faults.lag(instance.user, writes=1 << 30, seconds=STANDBY_LAG, resources=LAGGING)
        return instance

    def alive(self) -> list[Instance]:
        """The controllers still running (neither killed nor exited)."""
        return [i for i in self.instances if i not in self._killed and not (i.task and i.task.done())]

    def live(self) -> Instance:
        """The controller doing the work now: the leader (with leader election), else the last started
        that is still alive."""
        alive = self.alive()
        leaders = [i for i in alive if i.manager is not None and i.manager.is_leader]
        assert alive, "no controller is running"
        return leaders[0] if leaders else alive[-1]

    def mark(self, name: str) -> None:
        """The scenario reached ``name`` (``Scenario.phase``: its phase faults start here)."""
        live = self.live()
        faults = self.env.server.client_faults
        self.marks[name] = faults.stats(live.user).writes
        fault = self.fault
        if name != self.scenario.phase or fault.checkpoint:
            return
        if fault.kind.startswith("fin"):
            if fault.at == 0:  # dies as the phase begins: the restarted controller does all of it
                faults.cut_off(live.user)
                self._crash(live)
            else:
                faults.crash_after(live.user, writes=self.marks[name] + fault.at,
                                   on_crash=lambda: self._crash(live))
        elif fault.kind in LEASE_FAULTS:
            act = self._delete_lease if fault.kind == "lease-deleted" else self._lose_lease
            if fault.at == 0:
                act(live)
            else:
                faults.on_write(live.user, writes=self.marks[name] + fault.at, callback=lambda: act(live))

    def checkpoint(self, name: str) -> None:
        """The scenario reached a moment without a write of its own (``Scenario.checkpoints``)."""
        live = self.live()
        faults = self.env.server.client_faults
        self.marks[name] = faults.stats(live.user).writes
        if self.fault.checkpoint == name:
            faults.cut_off(live.user)
            self._crash(live)

    def _lose_lease(self, leader: Instance) -> None:
        """From now on no Lease request of ``leader`` is served (a partition between it and the API
        server for those requests); everything else it sends still is."""
        self.actions += 1
        self.env.server.client_faults.hold(leader.user, path=r"/leases/")
        requests = self.env.server.requests
        assert leader.task is not None
        leader.task.add_done_callback(lambda _: self.exited.setdefault(leader.user, len(requests)))

    def writes_landed(self) -> list[tuple[str, str]]:
        """Every stored write of the run's namespace but Leases, in the order the API server answered
        them: (user, what)."""
        return [(r.user, f"{r.verb} {r.resource}/{r.name}".rstrip("/"))
                for r in self.env.server.requests.select(namespace=self.env.namespace, writes_only=True,
                                                         successful_only=True)
                if r.resource != "leases"]

    def late_writes(self) -> int:
        """Writes of a controller that the API server stored after that controller's process had exited
        (sent before: a request on the wire is not recalled)."""
        late = 0
        for index, record in enumerate(self.env.server.requests):
            exited = self.exited.get(record.user)
            if (exited is not None and index >= exited and record.is_write and not record.dry_run
                    and record.status < 400 and record.resource != "leases"):
                late += 1
        return late

    def _delete_lease(self, leader: Instance) -> None:
        """Someone deletes the Lease (``kubectl delete lease``) while ``leader`` holds it."""
        self.actions += 1

        async def delete() -> None:
            assert leader.manager is not None and leader.manager.elector is not None
            config = leader.manager.elector.config
            with contextlib.suppress(NotFoundError):
                await self.env.client.delete("coordination.k8s.io/v1", "Lease", config.name, config.namespace)

        task = asyncio.get_running_loop().create_task(delete())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _crash(self, instance: Instance) -> None:
        """Called by the server right after the fatal write: the process is gone (SIGKILL)."""
        self.crashes += 1
        self._killed.append(instance)
        assert instance.task is not None
        instance.task.cancel()
        if not self.scenario.standby or instance is not self.instances[0]:
            self._instance().start()  # the pod restarts (a standby that died has no standby of its own)

    async def stop(self) -> None:
        """Stop the live controllers gracefully; wait for the killed ones to unwind (cancelled once
        already: a second cancellation would cut their clean-up short and leave sockets open)."""
        for task in list(self._tasks):
            await task
        for instance in self.instances:
            if instance not in self._killed:
                await instance.stop()
        unwinding = {i.task for i in self._killed if i.task is not None and not i.task.done()}
        if unwinding:
            await asyncio.wait(unwinding, timeout=30)
        for instance in self.instances:
            await instance.kill()

    async def state(self) -> State:
        state = await end_state(self.env, self.scenario.kinds)
        if self.scenario.extra is not None:
            state.update(await self.scenario.extra(self))
        return state


class Explorer:
    """The runs of one test: a fault-free recording (shared by the module's tests through ``recordings``),
    then one run per chosen point."""

    def __init__(self, env: ControllerEnv, scenario: Scenario, directory: Path,
                 recordings: dict[str, Recording]) -> None:
        self.env = env
        self.scenario = scenario
        self.directory = directory
        self.recordings = recordings
        self._runs = 0

    async def run(self, fault: Fault) -> tuple[ScenarioRun, list[str]]:
        """One run with ``fault``; returns it with the differences from the recording (none for the
        recording itself)."""
        self._runs += 1
        name = f"r{self._runs}"
        run = ScenarioRun(await self.env.in_namespace(name), self.scenario, fault, name, self.directory)
        try:
            try:
                await self.scenario.drive(run)
            except AssertionError as err:  # a step the faulty run never got to is a divergence too
                if fault.kind == "none":
                    raise
                return run, [f"a step did not complete: {err}"]
            if fault.kind == "none":  # the recording: its end state, taken while its controller runs
                stats = self.env.server.client_faults.stats(run.first_user)
                self.recordings[self.scenario.name] = Recording(state=await run.state(), writes=stats.writes,
                                                                events=stats.events, marks=dict(run.marks))
                return run, []
            return run, await self._converged(run)
        finally:
            await run.stop()

    async def _converged(self, run: ScenarioRun) -> list[str]:
        """Poll until the run's end state equals the recording's; what still differs at the deadline (a
        bound on convergence, not a performance assertion)."""
        expected = self.recordings[self.scenario.name].state
        deadline = asyncio.get_running_loop().time() + CONVERGE_WITHIN
        while True:
            diff = differences(expected, await run.state())
            if not diff or asyncio.get_running_loop().time() >= deadline:
                return diff
            await asyncio.sleep(0.2)

    async def recording(self) -> Recording:
        known = self.recordings.get(self.scenario.name)
        if known is not None:
            return known
        await self.run(Fault("none"))
        return self.recordings[self.scenario.name]

    def points(self, kind: str, recording: Recording) -> list[Fault]:
        writes = range(1, recording.writes + 1)
        if kind == "lag":
            universe = [Fault(kind, n) for n in LAGS]
        elif kind == "crash+crash":
            # the restarted controller redoes what the first left undone, about W - k + 1 writes (a later
            # point is the plain crash@k again, "not reached")
            universe = [Fault(kind, k, j) for k in writes for j in range(1, recording.writes - k + 2)]
        elif kind == "crash+lag":
            universe = [Fault(kind, k, n) for k in writes for n in LAGS]
        elif kind in FINALIZATION_FAULTS:
            phase = recording.after(self.scenario.phase)
            firsts = [(Fault(kind, j), phase - j + 1) for j in range(phase + 1)]
            firsts += [(Fault(kind, checkpoint=c), recording.after(c) + 1) for c in self.scenario.checkpoints]
            if kind == "fin":
                universe = [first for first, _ in firsts]
            else:
                universe = [Fault(kind, first.at, i, first.checkpoint) for first, left in firsts
                            for i in range(1, left + 1)]
        elif kind in LEASE_FAULTS:
            universe = [Fault(kind, j) for j in range(recording.after(self.scenario.phase) + 1)]
        else:
            universe = [Fault(kind, i) for i in (writes if kind == "crash" else range(1, recording.events + 1))]
        if EXHAUSTIVE or len(universe) <= SAMPLE[kind]:
            return universe
        chosen = random.Random(f"{self.scenario.name}/{kind}").sample(range(len(universe)), SAMPLE[kind])
        return [universe[i] for i in sorted(chosen)]

    async def explore(self, kind: str) -> None:
        """Every chosen point of ``kind`` must end in the recorded state; raises listing those that do not."""
        recording = await self.recording()
        found: dict[str, list[str]] = {}
        tried: list[str] = []
        # taken_over: runs in which another controller than the first wrote (a restarted one, a standby)
        # late_writes: writes of an old leader stored after its process exited (lease faults)
        stats: dict[str, int] = {"held": 0, "stale_reads": 0, "not_reached": 0, "taken_over": 0, "late_writes": 0}
        for fault in self.points(kind, recording):
            run, diff = await self.run(fault)
            tried.append(str(fault))
            got = self.env.server.client_faults.stats(run.first_user)
            stats["held"] += got.held
            stats["stale_reads"] += got.stale_reads
            if (run.crashes < fault.crashes or run.actions < fault.actions
                    or (kind in ("close", "expire") and not got.dropped)):
                stats["not_reached"] += 1
            if any(self.env.server.client_faults.stats(i.user).writes for i in run.instances[1:]):
                stats["taken_over"] += 1
            stats["late_writes"] += run.late_writes()
            if fault.lags:
                for restarted in [self.env.server.client_faults.stats(i.user) for i in run.instances[1:]]:
                    stats["held"] += restarted.held
                    stats["stale_reads"] += restarted.stale_reads
            if diff:
                found[str(fault)] = diff
        _report({"scenario": self.scenario.name, "kind": kind, "writes": recording.writes,
                 "events": recording.events, "marks": recording.marks, "tried": tried, "failed": sorted(found),
                 **stats})
        assert not found, "\n".join(f"{fault}:\n  " + "\n  ".join(lines) for fault, lines in found.items())


def _report(entry: dict[str, Any]) -> None:
    path = os.environ.get("FAULTS_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def fault_tests(*scenarios: Scenario) -> Callable[..., Awaitable[None]]:
    """The test of a module: each of ``scenarios`` with each of its fault kinds, one fault-free recording per
    scenario for the module (xdist's ``--dist loadfile`` keeps a module on one worker: spread scenarios
    over modules to spread the time)."""
    recordings: dict[str, Recording] = {}
    cases = [pytest.param(scenario, kind, id=f"{scenario}-{kind}") for scenario in scenarios
             for kind in scenario.faults]

    @pytest.mark.integration
    @pytest.mark.timeout(TIMEOUT)
    @pytest.mark.parametrize(("scenario", "kind"), cases)
    async def test_end_state_survives_faults(env: ControllerEnv, scenario: Scenario, kind: str,
                                             tmp_path: Path) -> None:
        await Explorer(env, scenario, tmp_path, recordings).explore(kind)

    return test_end_state_survives_faults


async def until(check: Callable[[], Awaitable[bool]], *, within: float = 45.0, what: str = "condition") -> None:
    """Poll ``check`` (a bounded wait of a scenario step)."""
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() >= deadline:
            raise AssertionError(f"{what}: not reached within {within:.0f} s")
        await asyncio.sleep(0.1)
