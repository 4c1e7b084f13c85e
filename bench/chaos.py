"""The chaos soak (issue 25): many Kustomizations through new revisions with prune, under faults.

N Kustomizations (``app-<i>`` in ``flux-system``, ``prune: true``) each apply, in namespace ``apps``,
a ConfigMap ``app-<i>`` holding the revision number (updated by every revision), a ConfigMap
``app-<i>-r<rev>`` (added by each revision, pruned by the next) and a ServiceAccount
``app-<i>-sa<rev % 2>`` (pruned and created again in turn). After a fault-free start (every
Kustomization Ready), for ``duration`` seconds a random half of the apps gets a new revision every
``revision_every`` seconds, the embedded API server sheds ``throttle_share`` of the requests with 429
+ ``Retry-After``, and at random moments (a seeded schedule, mean gap ``fault_every`` s) one of:

- the API server restarts (down 0.5-3 s: connections refused, every open one cut, state kept);
- every open watch is closed (clients see a clean end of stream);
- the controller process is SIGKILLed (no clean-up, no status written) and started again after 0-2 s.

Then the faults stop (shedding off, server up, controller running) and the driver polls until the
cluster is exactly what the last revisions say: every Kustomization Ready at its last revision with an
inventory of exactly its objects, every expected object present with its last content, and no other
object labelled as ours (:func:`diverged`, the oracle). Reported: faults injected by kind, 429s shed,
seconds from the end of the last fault to convergence, and, if it does not converge within
``converge_within``, the objects lost, orphaned and the Kustomizations stuck (all must be 0).

The API server runs inside the driver (to be restarted and to shed); the controller is its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.procs import ControllerProcess
from bench.workload import APPS_NS, FLUX_NS, KS_API, bounded, create_namespaces, install_crds, kustomization
from kustomize_controller.apply.selectors import NAME_LABEL, NAMESPACE_LABEL
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.errors import KubeError
from kustomize_controller.testing.apiserver import ApiServer
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source

T = TypeVar("T")
FAULTS = ("api-restart", "watch-drop", "controller-kill")
KINDS = (("v1", "ConfigMap"), ("v1", "ServiceAccount"))


@dataclass(frozen=True)
class ChaosPlan:
    size: int = 300
    duration: float = 120.0
    revision_every: float = 15.0
    fault_every: float = 10.0
    throttle_share: float = 0.1
    seed: int = 25
    converge_within: float = 900.0

    def schedule(self) -> list[tuple[float, str]]:
        """The faults, ``(seconds after the chaos starts, kind)``, from the seed alone."""
        return fault_schedule(self.seed, every=self.fault_every, duration=self.duration, faults=FAULTS)


def expected_objects(i: int, rev: int) -> dict[tuple[str, str], dict[str, str]]:
    """``(kind, name)`` → the data it must hold (empty for a ServiceAccount) at revision ``rev`` of app ``i``."""
    return {
        ("ConfigMap", f"app-{i}"): {"revision": str(rev)},
        ("ConfigMap", f"app-{i}-r{rev}"): {"added": str(rev)},
        ("ServiceAccount", f"app-{i}-sa{rev % 2}"): {},
    }


def app_files(i: int, rev: int, *, namespace: str = APPS_NS) -> dict[str, str]:
    docs = []
    for (kind, name), data in expected_objects(i, rev).items():
        body = "".join(f"\n  {k}: \"{v}\"" for k, v in data.items())
        docs.append(f"---\napiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
                    + (f"data:{body}\n" if data else ""))
    return {"kustomization.yaml": "resources:\n- app.yaml\n", "app.yaml": "".join(docs)}


@dataclass
class Divergence:
    stuck: list[str] = field(default_factory=list)  # not Ready at the last revision, or a wrong inventory
    lost: list[str] = field(default_factory=list)  # expected, absent or with other content
    orphaned: list[str] = field(default_factory=list)  # labelled as ours, not expected

    def __bool__(self) -> bool:
        return bool(self.stuck or self.lost or self.orphaned)

    def summary(self) -> str:
        return (f"{len(self.stuck)} stuck {self.stuck[:3]}, {len(self.lost)} lost {self.lost[:3]}, "
                f"{len(self.orphaned)} orphaned {self.orphaned[:3]}")


def diverged(kustomizations: list[dict[str, Any]], objects: list[dict[str, Any]],
             revisions: Mapping[int, tuple[int, str]], *,
             namespace_of: Callable[[int], str] = lambda _: APPS_NS) -> Divergence:
    """The oracle: ``revisions`` is app → (last revision number, its artifact revision string); the objects
    of app ``i`` live in ``namespace_of(i)``."""
    out = Divergence()
    want: dict[tuple[str, str, str], tuple[str, dict[str, str]]] = {}
    for i, (rev, _) in revisions.items():
        for (kind, name), data in expected_objects(i, rev).items():
            want[(kind, namespace_of(i), name)] = (f"app-{i}", data)
    by_name = {ks["metadata"]["name"]: ks for ks in kustomizations}
    for i, (rev, revision) in revisions.items():
        name = f"app-{i}"
        ks = by_name.get(name)
        status = (ks or {}).get("status") or {}
        ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        if ready.get("status") != "True" or status.get("lastAppliedRevision") != revision:
            out.stuck.append(f"{name}: Ready={ready.get('status')} at {status.get('lastAppliedRevision')}")
            continue
        inventory = {tuple(e["id"].split("_")) for e in (status.get("inventory") or {}).get("entries") or []}
        expected_ids = {(namespace_of(i), n, "", kind) for kind, n in expected_objects(i, rev)}
        if inventory != expected_ids:
            out.stuck.append(f"{name}: inventory {sorted(inventory ^ expected_ids)} differs")
    seen: set[tuple[str, str, str]] = set()
    for obj in objects:
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", APPS_NS), meta["name"])
        labels = meta.get("labels") or {}
        if labels.get(NAMESPACE_LABEL) != FLUX_NS or NAME_LABEL not in labels:
            continue
        if key not in want or want[key][0] != labels[NAME_LABEL]:
            out.orphaned.append("/".join(key))
            continue
        seen.add(key)
        if (obj.get("data") or {}) != want[key][1]:
            out.lost.append(f"{'/'.join(key)}: data {obj.get('data')}")
    out.lost += [f"{'/'.join(key)}: absent" for key in sorted(set(want) - seen)]
    return out


async def converge(snapshot: Callable[[], Awaitable[Divergence]], *, within: float, label: str,
                   every: float = 1.0, report_every: float = 15.0) -> tuple[float, Divergence]:
    """Poll ``snapshot`` every ``every`` s until it finds no divergence or ``within`` s passed; returns the
    seconds it took and the last divergence (printed every ``report_every`` s meanwhile)."""
    started = reported = time.monotonic()
    while True:
        found = await snapshot()
        if not found or time.monotonic() - started > within:
            return time.monotonic() - started, found
        if time.monotonic() - reported >= report_every:
            reported = time.monotonic()
            print(f"[{label}] {reported - started:.0f} s: {found.summary()}", flush=True)
        await asyncio.sleep(every)


async def retrying(call: Callable[[], Awaitable[T]], *, within: float = 120.0) -> T:
    """The driver's own requests, through restarts and shedding."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except (TimeoutError, KubeError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


class Chaos:
    def __init__(self, plan: ChaosPlan, workdir: Path, flags: list[str]) -> None:
        self.plan = plan
        self.workdir = workdir
        self.flags = flags
        self.rng = random.Random(plan.seed + 1)
        self.revisions: dict[int, tuple[int, str]] = {}
        self.faults: dict[str, int] = dict.fromkeys(FAULTS, 0)
        self.shed = 0
        self.controllers = 0
        self.ctrl: ControllerProcess | None = None

    async def publish(self, client: KubeClient, artifacts: ArtifactServer, i: int, rev: int) -> None:
        artifact = await artifacts.publish_files(app_files(i, rev), name=f"app-{i}")
        await retrying(lambda: publish_source(client, namespace=FLUX_NS, name=f"app-{i}", artifact=artifact))
        self.revisions[i] = (rev, str(artifact["revision"]))

    async def start_controller(self, server: ApiServer) -> None:
        self.controllers += 1
        self.ctrl = ControllerProcess(kubeconfig=server.kubeconfig_path, flags=self.flags, workdir=self.workdir,
                                      name=f"chaos-{self.controllers}", runtime_namespace=FLUX_NS)
        await self.ctrl.start()

    async def count_shed(self, server: ApiServer) -> None:
        while True:
            self.shed += sum(1 for r in server.requests if r.status == 429)
            server.requests.clear()
            await asyncio.sleep(0.5)

    async def snapshot(self, client: KubeClient) -> Divergence:
        kss = await retrying(lambda: client.list(KS_API, "Kustomization", FLUX_NS))
        objects: list[dict[str, Any]] = []
        for api_version, kind in KINDS:
            listed = await retrying(functools.partial(client.list, api_version, kind, APPS_NS))
            objects += [{**obj, "kind": kind} for obj in listed]
        return diverged(kss, objects, self.revisions)

    async def converge(self, client: KubeClient, *, within: float) -> tuple[float, Divergence]:
        return await converge(functools.partial(self.snapshot, client), within=within, label="chaos")

    async def faults_loop(self, server: ApiServer, started: float) -> None:
        for at, kind in self.plan.schedule():
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            self.faults[kind] += 1
            if kind == "api-restart":
                await server.restart(down_for=self.rng.uniform(0.5, 3.0))
            elif kind == "watch-drop":
                server.close_watches()
            else:
                assert self.ctrl is not None
                await self.ctrl.stop(graceful=False)
                await asyncio.sleep(self.rng.uniform(0.0, 2.0))
                await self.start_controller(server)

    async def revisions_loop(self, client: KubeClient, artifacts: ArtifactServer, started: float) -> None:
        rounds = int(self.plan.duration // self.plan.revision_every)
        for r in range(1, rounds + 1):
            await asyncio.sleep(max(0.0, started + r * self.plan.revision_every - time.monotonic()))
            chosen = self.rng.sample(sorted(self.revisions), k=max(1, len(self.revisions) // 2))
            await bounded((self.publish(client, artifacts, i, self.revisions[i][0] + 1) for i in chosen), limit=16)

    async def run(self, into: dict[str, float]) -> None:
        plan = self.plan
        async with ApiServer(history_size=500_000) as server, ArtifactServer() as artifacts:
            client = KubeClient(config=await load_kubeconfig(server.kubeconfig_path), qps=-1, burst=-1)
            counter = asyncio.create_task(self.count_shed(server))
            try:
                await install_crds(client)
                await create_namespaces(client, FLUX_NS, APPS_NS)
                await bounded((self.publish(client, artifacts, i, 1) for i in range(plan.size)), limit=16)
                await bounded((client.create(kustomization(i, wait=False)) for i in range(plan.size)), limit=16)
                await self.start_controller(server)
                took, found = await self.converge(client, within=plan.converge_within)
                if found:
                    raise RuntimeError(f"no convergence before any fault: {found.summary()}")
                into["chaos.initial_s"] = took
                server.options.throttle_share = plan.throttle_share
                started = time.monotonic()
                await asyncio.gather(self.revisions_loop(client, artifacts, started), self.faults_loop(server, started))
                server.options.throttle_share = 0.0  # shedding, the last fault, ends now
                took, found = await self.converge(client, within=plan.converge_within)
                into.update({
                    "chaos.kustomizations": plan.size, "chaos.duration_s": plan.duration, "chaos.seed": plan.seed,
                    "chaos.revisions_published": sum(rev for rev, _ in self.revisions.values()),
                    **{f"chaos.faults.{k}": v for k, v in self.faults.items()},
                    "chaos.shed_429": self.shed,
                    "chaos.converge_after_last_fault_s": took,
                    "chaos.objects_lost": len(found.lost), "chaos.objects_orphaned": len(found.orphaned),
                    "chaos.kustomizations_stuck": len(found.stuck),
                })
                if found:
                    raise RuntimeError(f"not converged {took:.0f} s after the last fault: {found.summary()}")
            finally:
                counter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await counter
                if self.ctrl is not None:
                    await self.ctrl.stop(graceful=False)
                await client.close()


async def chaos(plan: ChaosPlan, *, workdir: Path, flags: list[str], into: dict[str, float] | None = None
                ) -> dict[str, float]:
    m: dict[str, float] = into if into is not None else {}
    await Chaos(plan, Path(tempfile.mkdtemp(prefix="chaos-", dir=workdir)), flags).run(m)
    return m


def fault_schedule(seed: int, *, every: float, duration: float, faults: Sequence[str]) -> list[tuple[float, str]]:
    """Faults at exponential gaps of mean ``every`` over ``duration`` seconds, each drawn from ``faults``:
    ``(seconds after the chaos starts, kind)``, from the seed alone (the chaos scenario and the soak)."""
    rng = random.Random(seed)
    out: list[tuple[float, str]] = []
    at = rng.expovariate(1 / every)
    while at < duration:
        out.append((at, rng.choice(faults)))
        at += rng.expovariate(1 / every)
    return out
