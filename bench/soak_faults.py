"""The soak's faults on a real control plane (bench/soak.py): the controller's own identity, 429 storms
from API priority and fairness, and the controller process as a kubelet would run it.

- ``ControllerIdentity``: the ServiceAccount ``flux-system/kustomize-controller`` bound to ``cluster-admin``
  (as Flux installs it), and a pool of its tokens minted by TokenRequest before the faults start — one per
  controller process, as a kubelet projects a token before it starts a container (so a restart never
  waits for the API server). Each token's ``jti`` is the ``credential-id`` the audit log records for its
  requests: the log tells the processes apart.
- ``Storms``: a PriorityLevelConfiguration ``soak-storm`` (Limited, 1 nominal share — 1 seat of the 150 the
  soak's API server has —, nothing lent or borrowed, ``Reject``: no queue) always there, and a FlowSchema
  ``soak-storm`` that sends every request of that ServiceAccount to it, created to start a storm and deleted
  to end it. The controller runs 10 workers plus its informers; a second request at once gets a 429 with
  ``Retry-After`` from the server, for real (its leader election's too). ``windows`` records when each
  storm was on, as confirmed by the API (the server applies the change through its own informer, a moment
  later).
- ``Supervisor``: runs ``python -m kustomize_controller`` with the next token (through the proxy), restarts
  it 2 s after it exits by itself (a lost lease, a crash: counted with the exit code) and ``kill()`` SIGKILLs
  it and starts the next one after the delay given. Its CPU and peak RSS are read from ``/proc`` every few
  seconds and summed over the processes; after each SIGKILL it looks for build processes the dead
  controller left running (``leftover_children``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.procs import ControllerProcess, ProcStats, descendants, metric_sum, scrape
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import AlreadyExistsError, NotFoundError

SA_NAMESPACE, SA_NAME = "flux-system", "kustomize-controller"
USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
STORM = "soak-storm"
FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"

Retrying = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


def token_id(token: str) -> str:
    """The audit log's ``credential-id`` of a ServiceAccount token: ``JTI=<its jti claim>``."""
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return f"JTI={claims.get('jti', '')}"


class ControllerIdentity:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.tokens: list[str] = []

    async def create(self, *, tokens: int, valid_for: float) -> None:
        with contextlib.suppress(AlreadyExistsError):
            await self.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                      "metadata": {"name": SA_NAME, "namespace": SA_NAMESPACE}})
        with contextlib.suppress(AlreadyExistsError):
            await self.client.create({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "soak-kustomize-controller"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
            })
        path = f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{SA_NAME}/token"
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": int(valid_for)}}
        for _ in range(tokens):
            answer = await self.client.request_json("POST", path, body=body)
            self.tokens.append(str(answer["status"]["token"]))

    def take(self) -> str:
        if not self.tokens:
            raise RuntimeError("the soak ran out of controller tokens (raise the pool size)")
        return self.tokens.pop(0)


def living(pids: list[int]) -> list[str]:
    """``pid command`` of each of ``pids`` still running (not a zombie: reaped by no one yet is fine)."""
    out = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            out.append(f"{pid} {cmdline[:120]}")
    return out


def storm_objects() -> tuple[dict[str, Any], dict[str, Any]]:
    level = {
        "apiVersion": FLOWCONTROL, "kind": "PriorityLevelConfiguration", "metadata": {"name": STORM},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Reject"}}},
    }
    schema = {
        "apiVersion": FLOWCONTROL, "kind": "FlowSchema", "metadata": {"name": STORM},
        "spec": {
            "priorityLevelConfiguration": {"name": STORM}, "matchingPrecedence": 200,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount",
                              "serviceAccount": {"name": SA_NAME, "namespace": SA_NAMESPACE}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                   "clusterScope": True, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            }],
        },
    }
    return level, schema


class Storms:
    """429 storms: ``start(seconds)`` turns one on (or makes the current one last longer); a task owned
    by ``run()`` turns it off when it is due. ``windows``: (on, off) times, epoch seconds."""

    def __init__(self, client: KubeClient, retrying: Retrying) -> None:
        self.client = client
        self.retrying = retrying
        self.windows: list[tuple[float, float]] = []
        self._until = 0.0
        self._on_since: float | None = None
        self._wake = asyncio.Event()

    async def install(self) -> None:
        level, _ = storm_objects()
        await self.client.apply(level, field_manager="soak", force=True)

    async def start(self, seconds: float) -> None:
        self._until = max(self._until, time.time() + seconds)
        if self._on_since is None:
            _, schema = storm_objects()
            await self.retrying(lambda: self._create(schema))
            self._on_since = time.time()
        self._wake.set()

    async def _create(self, schema: dict[str, Any]) -> None:
        with contextlib.suppress(AlreadyExistsError):
            await self.client.create(schema)

    async def _delete(self) -> None:
        with contextlib.suppress(NotFoundError):
            await self.client.delete(FLOWCONTROL, "FlowSchema", STORM)

    async def stop(self) -> None:
        """End the storm now (idempotent)."""
        self._until = 0.0
        if self._on_since is not None:
            await self.retrying(self._delete)
            self.windows.append((self._on_since, time.time()))
            self._on_since = None

    async def run(self) -> None:
        while True:
            self._wake.clear()
            if self._on_since is not None and time.time() >= self._until:
                await self.stop()
            timeout = max(0.1, self._until - time.time()) if self._on_since is not None else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    @property
    def seconds_on(self) -> float:
        return sum(off - on for on, off in self.windows)


@dataclass
class Incarnation:
    name: str
    credential: str
    started: float
    ended: float = 0.0
    how: str = ""  # "killed", "exited <code>", "stopped"
    stats: ProcStats | None = None
    throttled: float = 0.0  # rest_client_requests_total{code="429"}, last scraped
    requests: float = 0.0


@dataclass
class Supervisor:
    make: Callable[[str, int], ControllerProcess]  # (its token, its number) -> a process, not started yet
    identity: ControllerIdentity
    incarnations: list[Incarnation] = field(default_factory=list)
    leftover_children: list[str] = field(default_factory=list)
    current: ControllerProcess | None = None
    _killing: float | None = None  # restart delay of a kill in progress
    _stopping: bool = False
    _checks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def exits(self) -> list[str]:
        return [i.how for i in self.incarnations if i.how.startswith("exited")]

    async def run(self, started: asyncio.Event) -> None:
        """Keep a controller running until ``stop()``; ``started`` is set once the first one runs."""
        while not self.stopping():
            token = self.identity.take()
            number = len(self.incarnations) + 1
            ctrl = self.make(token, number)
            await ctrl.start()
            self.current = ctrl
            life = Incarnation(name=ctrl.name, credential=token_id(token), started=time.time())
            self.incarnations.append(life)
            started.set()
            assert ctrl.proc is not None
            code = await ctrl.proc.wait()
            life.ended = time.time()
            with contextlib.suppress(AssertionError):
                life.stats = ctrl.stats()
            if self.stopping():  # stop() ran while it waited
                life.how = "stopped"
                return
            if self._killing is not None:
                life.how, delay = "killed", self._killing
                self._killing = None
            else:
                life.how, delay = f"exited {code}", 2.0
            await asyncio.sleep(delay)

    def stopping(self) -> bool:
        return self._stopping

    async def kill(self, *, restart_after: float) -> bool:
        """SIGKILL the running controller; the next one starts ``restart_after`` s later. False when none runs."""
        ctrl = self.current
        if ctrl is None or ctrl.proc is None or ctrl.proc.returncode is not None or self._killing is not None:
            return False
        children = descendants(ctrl.pid)
        self._killing = restart_after
        await ctrl.stop(graceful=False)
        check = asyncio.create_task(self._check_children(children))
        self._checks.add(check)
        check.add_done_callback(self._checks.discard)
        return True

    async def _check_children(self, pids: list[int]) -> None:
        await asyncio.sleep(5.0)
        self.leftover_children += living(pids)

    async def sample(self) -> None:
        """Read the running controller's CPU/RSS and its request counters (every few seconds)."""
        while True:
            ctrl, life = self.current, self.incarnations[-1] if self.incarnations else None
            if ctrl is not None and life is not None and ctrl.proc is not None and ctrl.proc.returncode is None:
                with contextlib.suppress(AssertionError):
                    life.stats = ctrl.stats()
                with contextlib.suppress(Exception):  # a controller starting or dying answers nothing
                    samples = await scrape(ctrl.metrics_url, names=("rest_client_requests_total",))
                    life.throttled = metric_sum(samples, "rest_client_requests_total", code="429")
                    life.requests = metric_sum(samples, "rest_client_requests_total")
            await asyncio.sleep(5.0)

    async def stop(self) -> None:
        self._stopping = True
        if self.current is not None:
            await self.current.stop(graceful=True)
        for check in list(self._checks):
            with contextlib.suppress(asyncio.CancelledError):
                await check

    def totals(self) -> dict[str, float]:
        stats = [i.stats for i in self.incarnations if i.stats is not None]
        return {
            "controller_cpu_s": sum(s.cpu_s for s in stats),
            "controller_children_cpu_s": sum(s.children_cpu_s for s in stats),
            "controller_peak_rss_mib": max((s.peak_rss_mib for s in stats), default=0.0),
            "controller_429_seen": sum(i.throttled for i in self.incarnations),
            "controller_requests_seen": sum(i.requests for i in self.incarnations),
        }
