"""The chaos soak on a real control plane (issue 38): ``python -m bench --scenarios soak`` / ``make soak``.

A control plane from ``KUBE_ASSETS`` (etcd, kube-apiserver, kube-controller-manager: tests/controlplane)
and the controller as its own process, running as the ServiceAccount ``flux-system/kustomize-controller``
(its own token per process), with leader election, reaching the API server through a TCP proxy on
loopback (tests/controlplane/proxy.py). The driver talks to the API server directly as an admin (exempt
from priority and fairness), serves the sources from an ``ArtifactServer`` and plays the people.

The workload: N Kustomizations ``app-<i>`` in ``flux-system`` (``prune: true``, ``interval: 5m``), each
applying the objects of bench/chaos.py — a ConfigMap updated by every revision, one added by each revision
and pruned by the next, a ServiceAccount pruned and created again in turn — in the namespace of its group:

- ``auto`` (7 in 10): upstream's behaviour, in ``soak-auto``;
- ``manual`` (2 in 10, ``kustomize.toolkit.fluxcd.io/approval: manual``), in ``soak-manual``: the driver's
  approver approves each plan the controller shows waiting (``Approved=False``), once — and again only once
  the controller's record says that approval was used (docs/change-management.md) — and records every
  approval it gives;
- ``suspended`` (1 in 10, in ``soak-suspended``): suspended once everything converged, given new revisions
  during the faults, resumed when they end.

After a fault-free start (every Kustomization Ready at revision 1, the manual ones approved), for
``duration`` seconds: every ``revision_every`` seconds a random ``revision_share`` of the apps gets a new
revision, and a few manual and auto apps get a hand edit of their ConfigMap plus a
``reconcile.fluxcd.io/requestedAt`` (a drift correction of a manual app waits for its own approval); and at
seeded random moments (mean gap ``fault_every``) one of:

- ``api-restart``: kube-apiserver stopped with SIGTERM (SIGKILL after 10 s, as a kubelet would) and started
  again 0-3 s later on the same port; ``api-crash``: the same with SIGKILL at once;
- ``watch-cut``: every connection of the controller reset at the proxy, the server left up;
- ``controller-kill``: the controller SIGKILLed, the next one started 0-3 s later (it waits for the lease);
- ``storm``: a FlowSchema sending every request of the controller to a priority level of about 3 seats
  that rejects what does not fit, for 20-90 s: 429s from priority and fairness (bench/soak_faults.py).

Faults may overlap (a restart during a storm, a kill during a restart). A controller that exits by itself
(a lost lease) is started again 2 s later, as a kubelet would. Then the faults stop, the suspended ones are
resumed, and the driver polls until the cluster is what the last revisions say (``chaos.diverged``: every
Kustomization Ready at its last revision with exactly its inventory — "stuck" otherwise —, every object of
it present with its content — "lost" —, nothing labelled as ours that is not expected — "orphaned"),
and checks again after a quiet minute. Finally the audit log (bench/soak_audit.py) proves that no write
reached a manual app's objects without an approval given before it for that content (one write per object
per approval, one controller process per approval) and none reached a suspended app's objects while it was
suspended; it also counts the controller's 429s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.chaos import Divergence, app_files, converge, diverged, expected_objects, fault_schedule, retrying
from bench.procs import ControllerProcess, cpu_seconds
from bench.soak_audit import (
    Approval,
    count_requests,
    plan_changes,
    read_audit,
    unapproved_writes,
    writes_while_suspended,
)
from bench.soak_faults import USER, ControllerIdentity, Storms, Supervisor
from bench.workload import FLUX_NS, KS_API, bounded, create_namespaces, install_crds
from kustomize_controller.api.changes import APPROVAL_ANNOTATION, APPROVED_CONDITION
from kustomize_controller.apply.selectors import NAME_LABEL
from kustomize_controller.approve_command import approve_plan, rfc3339_nano
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.reconcile.gate.approval import USED, approval_key, record_in
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source
from tests.controlplane import ControlPlane, missing_assets
from tests.controlplane.proxy import TcpProxy

FAULTS = ("api-restart", "api-crash", "watch-cut", "controller-kill", "storm")
NAMESPACES = {"auto": "soak-auto", "manual": "soak-manual", "suspended": "soak-suspended"}
KINDS = ("ConfigMap", "ServiceAccount")
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["create", "update", "patch", "delete"]
  namespaces: ["{NAMESPACES['manual']}", "{NAMESPACES['suspended']}"]
  resources: [{{group: "", resources: ["configmaps", "serviceaccounts"]}}]
- level: Request
  verbs: ["delete"]
- level: Metadata
"""
# audit events written before the answer (a crashed server loses none it answered); 150 seats in all, so that
# the storm's priority level has 1 (ceil(150 * 1 / 246 nominal shares)) and a second request at once is a 429
APISERVER_ARGS = ("--audit-log-mode=blocking", "--max-requests-inflight=100", "--max-mutating-requests-inflight=50")
_PENDING = re.compile(r"Approval required for revision (.+?): plan ([0-9a-f]{12})")


@dataclass(frozen=True)
class SoakPlan:
    size: int = 300
    duration: float = 1800.0
    revision_every: float = 30.0
    revision_share: float = 0.2
    hand_edits: int = 2  # per round, of manual apps and of auto apps each
    fault_every: float = 30.0
    storm_seconds: tuple[float, float] = (20.0, 90.0)
    seed: int = 38
    converge_within: float = 900.0
    quiet_for: float = 60.0
    concurrent: int = 10

    def group(self, i: int) -> str:
        return "manual" if i % 10 in (0, 1) else "suspended" if i % 10 == 2 else "auto"

    def schedule(self) -> list[tuple[float, str]]:
        """The faults, ``(seconds after the chaos starts, kind)``, from the seed alone."""
        return fault_schedule(self.seed, every=self.fault_every, duration=self.duration, faults=FAULTS)


def soak_kustomization(i: int, group: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"app-{i}", "namespace": FLUX_NS}
    if group == "manual":
        metadata["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    return {
        "apiVersion": KS_API, "kind": "Kustomization", "metadata": metadata,
        "spec": {"interval": "5m", "retryInterval": "15s", "timeout": "2m", "path": "./", "prune": True,
                 "wait": False, "sourceRef": {"kind": "GitRepository", "name": f"app-{i}"}},
    }


def pending_plan(ks: dict[str, Any]) -> tuple[str, str, str] | None:
    """(plan id, revision, condition message) of a plan waiting for approval, or None."""
    for condition in (ks.get("status") or {}).get("conditions") or []:
        if condition.get("type") == APPROVED_CONDITION and condition.get("status") == "False":
            message = str(condition.get("message", ""))
            found = _PENDING.search(message)
            if found and plan_id_in(message) == found.group(2):
                return found.group(2), found.group(1), message
    return None


class Soak:
    def __init__(self, plan: SoakPlan, workdir: Path, assets: Path) -> None:
        self.plan = plan
        self.workdir = workdir
        self.assets = assets
        self.rng = random.Random(plan.seed + 1)
        self.revisions: dict[int, tuple[int, str]] = {}
        self.published: dict[int, dict[str, int]] = {}
        self.approvals: list[Approval] = []
        self.last_approval: dict[int, tuple[str, str]] = {}  # app -> (plan, key) of the last one confirmed
        self.approval_errors = 0
        self.faults: dict[str, int] = dict.fromkeys(FAULTS, 0)
        self.faults_skipped = 0
        self.restarts_s: list[float] = []
        self.cut_connections = 0
        self.hand_edits = 0
        self.restart_lock = asyncio.Lock()
        self.cpu: dict[tuple[str, int], float] = {}  # (control-plane process, pid) -> CPU seconds
        self.tasks: list[asyncio.Task[Any]] = []
        self.found = Divergence()
        self.audit_findings: dict[str, list[str]] = {}

    def namespace_of(self, i: int) -> str:
        return NAMESPACES[self.plan.group(i)]

    def apps(self, group: str) -> list[int]:
        return [i for i in range(self.plan.size) if self.plan.group(i) == group]

    # ------------------------------------------------------------------ the people
    async def publish(self, client: KubeClient, artifacts: ArtifactServer, i: int, rev: int) -> None:
        artifact = await artifacts.publish_files(app_files(i, rev, namespace=self.namespace_of(i)), name=f"app-{i}")
        revision = str(artifact["revision"])
        self.published.setdefault(i, {})[revision] = rev
        await retrying(lambda: publish_source(client, namespace=FLUX_NS, name=f"app-{i}", artifact=artifact),
                       within=600)
        self.revisions[i] = (rev, revision)

    async def approve(self, client: KubeClient, i: int, plan: str, rev: int, changes: int) -> None:
        sent_at = time.time()
        clock = _TokenClock()
        try:
            token = await approve_plan(client, namespace=FLUX_NS, name=f"app-{i}", plan_id=plan, clock=clock)
        except (KubeError, OSError, TimeoutError):
            # it may have been stored all the same (an answer lost): it counts as given, and the next look
            # approves again if the controller did not take it up
            self.approval_errors += 1
            self.approvals.append(Approval(app=i, sent_at=sent_at, plan=plan, rev=rev, token=clock.token,
                                           changes=changes))
            return
        self.approvals.append(Approval(app=i, sent_at=sent_at, plan=plan, rev=rev, token=token, changes=changes))
        self.last_approval[i] = (plan, approval_key(plan, token))

    async def approver(self, client: KubeClient) -> None:
        """Approve each plan shown waiting, once; the same plan again only after its approval was used."""
        manual = set(self.apps("manual"))
        while True:
            try:
                kss = await client.list(KS_API, "Kustomization", FLUX_NS)
            except (KubeError, OSError, TimeoutError):
                await asyncio.sleep(1.0)
                continue
            todo: list[Coroutine[Any, Any, None]] = []
            for ks in kss:
                i = int(ks["metadata"]["name"].removeprefix("app-"))
                waiting = pending_plan(ks) if i in manual else None
                if waiting is None:
                    continue
                plan, revision, message = waiting
                last = self.last_approval.get(i)
                if last is not None and last[0] == plan:
                    record = record_in(message)
                    if record is None or record.key != last[1] or record.state != USED:
                        continue  # the controller has not taken our approval of this plan up yet
                rev = self.published.get(i, {}).get(revision)
                if rev is not None:
                    todo.append(self.approve(client, i, plan, rev, plan_changes(message)))
            await bounded(todo, limit=8)
            await asyncio.sleep(1.0)

    async def hand_edit(self, client: KubeClient, i: int, mark: str) -> None:
        try:
            await client.patch("v1", "ConfigMap", f"app-{i}", self.namespace_of(i), {"data": {"revision": mark}},
                               patch_type="merge", field_manager="soak-hand-edit")
        except NotFoundError:
            return
        self.hand_edits += 1
        body = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": mark}}}
        await client.patch(KS_API, "Kustomization", f"app-{i}", FLUX_NS, body, patch_type="merge")

    async def revisions_loop(self, client: KubeClient, artifacts: ArtifactServer, started: float) -> None:
        plan = self.plan
        rounds = int(plan.duration // plan.revision_every)
        manual, auto = self.apps("manual"), self.apps("auto")
        for r in range(1, rounds + 1):
            await asyncio.sleep(max(0.0, started + r * plan.revision_every - time.monotonic()))
            chosen = self.rng.sample(range(plan.size), k=max(1, int(plan.size * plan.revision_share)))
            edited = (self.rng.sample(manual, k=min(plan.hand_edits, len(manual)))
                      + self.rng.sample(auto, k=min(plan.hand_edits, len(auto))))
            await bounded((self.publish(client, artifacts, i, self.revisions[i][0] + 1) for i in chosen), limit=8)
            await bounded((retrying(functools.partial(self.hand_edit, client, i, f"hand-{r}"), within=600)
                           for i in edited), limit=4)
            print(f"[soak] round {r}/{rounds}: {len(chosen)} new revisions, {len(edited)} hand edits, "
                  f"faults {self.faults}, approvals {len(self.approvals)}", flush=True)

    # ------------------------------------------------------------------ faults
    async def inject(self, kind: str, parameter: float, plane: ControlPlane, proxy: TcpProxy, storms: Storms,
                     supervisor: Supervisor) -> None:
        if kind in ("api-restart", "api-crash"):
            if self.restart_lock.locked():
                self.faults_skipped += 1  # one restart at a time: this one falls into the other
                return
            async with self.restart_lock:
                took = await asyncio.to_thread(plane.restart_apiserver, grace=10.0 if kind == "api-restart" else 0.0,
                                               down_for=parameter)
                self.restarts_s.append(took)
        elif kind == "watch-cut":
            self.cut_connections += proxy.cut()
        elif kind == "controller-kill":
            if not await supervisor.kill(restart_after=parameter):
                self.faults_skipped += 1
                return
        else:
            await storms.start(parameter)
        self.faults[kind] += 1
        print(f"[soak] fault {kind} ({parameter:.1f})", flush=True)

    async def faults_loop(self, started: float, *inject_args: Any) -> None:
        pending: list[asyncio.Task[None]] = []
        for at, kind in self.plan.schedule():
            parameter = (self.rng.uniform(*self.plan.storm_seconds) if kind == "storm"
                         else self.rng.uniform(0.0, 3.0))
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            pending.append(asyncio.create_task(self.inject(kind, parameter, *inject_args)))
        await asyncio.gather(*pending)

    # ------------------------------------------------------------------ the oracle
    async def snapshot(self, client: KubeClient) -> Divergence:
        kss = await retrying(lambda: client.list(KS_API, "Kustomization", FLUX_NS), within=600)
        objects: list[dict[str, Any]] = []
        for kind in KINDS:
            listed = await retrying(functools.partial(client.list, "v1", kind, None, label_selector=NAME_LABEL),
                                    within=600)
            objects += [{**obj, "kind": kind} for obj in listed]
        return diverged(kss, objects, self.revisions, namespace_of=self.namespace_of)

    async def converge(self, client: KubeClient, *, within: float) -> tuple[float, Divergence]:
        return await converge(functools.partial(self.snapshot, client), within=within, label="soak", every=2.0,
                              report_every=30.0)

    async def sample_control_plane(self, plane: ControlPlane) -> None:
        while True:
            for name, pid in plane.pids().items():
                own, _ = cpu_seconds(pid)
                if own:
                    self.cpu[(name, pid)] = own
            await asyncio.sleep(5.0)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self.tasks.append(task)
        return task

    # ------------------------------------------------------------------ the run
    async def run(self, into: dict[str, float]) -> None:
        plan = self.plan
        plane = ControlPlane(assets=self.assets, workdir=self.workdir / "controlplane", audit_policy=AUDIT_POLICY,
                             apiserver_args=APISERVER_ARGS)
        await asyncio.to_thread(plane.start)
        client = KubeClient(config=await load_kubeconfig(str(plane.admin_kubeconfig)), qps=-1, burst=-1)
        port = int(plane.url.rsplit(":", 1)[1])
        supervisor: Supervisor | None = None
        try:
            async with ArtifactServer() as artifacts, TcpProxy(port) as proxy:
                await install_crds(client)
                await create_namespaces(client, FLUX_NS, *NAMESPACES.values())
                identity = ControllerIdentity(client)
                await identity.create(tokens=200, valid_for=plan.duration + plan.converge_within + 7200)
                storms = Storms(client, lambda call: retrying(call, within=600))
                await storms.install()
                await bounded((self.publish(client, artifacts, i, 1) for i in range(plan.size)), limit=8)
                await bounded((client.create(soak_kustomization(i, plan.group(i))) for i in range(plan.size)),
                              limit=8)
                flags = [f"--concurrent={plan.concurrent}", "--enable-leader-election",
                         "--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s",
                         "--leader-election-retry-period=2s"]

                def make(token: str, number: int) -> ControllerProcess:
                    config = plane.write_kubeconfig(self.workdir / f"controller-{number}.kubeconfig", token=token,
                                                    server=f"https://127.0.0.1:{proxy.port}")
                    return ControllerProcess(kubeconfig=str(config), flags=flags, workdir=self.workdir,
                                             name=f"controller-{number}", runtime_namespace=FLUX_NS,
                                             log_level="info")

                supervisor = Supervisor(make=make, identity=identity)
                first = asyncio.Event()
                self._spawn(supervisor.run(first))
                self._spawn(supervisor.sample())
                self._spawn(self.sample_control_plane(plane))
                self._spawn(self.approver(client))
                self._spawn(storms.run())
                await first.wait()
                took, found = await self.converge(client, within=plan.converge_within)
                if found:
                    raise RuntimeError(f"no convergence before any fault: {found.summary()}")
                into["soak.initial_s"] = took
                print(f"[soak] converged before the faults in {took:.0f} s", flush=True)

                suspended = self.apps("suspended")
                await bounded((client.patch(KS_API, "Kustomization", f"app-{i}", FLUX_NS, {"spec": {"suspend": True}},
                                            patch_type="merge") for i in suspended), limit=8)
                suspended_at = time.time()
                started = time.monotonic()
                await asyncio.gather(
                    self.revisions_loop(client, artifacts, started),
                    self.faults_loop(started, plane, proxy, storms, supervisor),
                )
                await storms.stop()
                faults_end = time.time()
                await bounded((retrying(functools.partial(
                    client.patch, KS_API, "Kustomization", f"app-{i}", FLUX_NS, {"spec": {"suspend": False}},
                    patch_type="merge")) for i in suspended), limit=8)
                resumed_at = time.time()
                print(f"[soak] faults over after {time.monotonic() - started:.0f} s; converging", flush=True)
                took, found = await self.converge(client, within=plan.converge_within)
                into["soak.converge_after_faults_s"] = took
                if not found:
                    await asyncio.sleep(plan.quiet_for)
                    found = await self.snapshot(client)  # still so after a quiet minute
                self.record_end(into, found)
                await supervisor.stop()
                print("[soak] reading the audit log", flush=True)
                audit = await asyncio.to_thread(self.check_audit, plane, storms, suspended_at, resumed_at)
                into.update(audit)
                into.update({
                    "soak.faults_end_to_resumed_s": resumed_at - faults_end,
                    "soak.storm_seconds": storms.seconds_on, "soak.storms_confirmed": len(storms.windows),
                    "soak.watch_cut_connections": self.cut_connections,
                    "soak.api_restart_s_median": statistics.median(self.restarts_s) if self.restarts_s else 0.0,
                    "soak.api_restart_s_max": max(self.restarts_s, default=0.0),
                    "soak.controller_processes": len(supervisor.incarnations),
                    "soak.controller_exits": len(supervisor.exits),
                    "soak.leftover_children": len(supervisor.leftover_children),
                    **{f"soak.{k}": v for k, v in supervisor.totals().items()},
                    **self.control_plane_cpu(),
                })
                self.write_details(supervisor, storms, found)
                if found or into["soak.unapproved_writes"] or into["soak.suspended_writes"]:
                    raise RuntimeError(f"the soak found violations: {found.summary()}; "
                                       f"{into['soak.unapproved_writes']:.0f} unapproved writes, "
                                       f"{into['soak.suspended_writes']:.0f} writes while suspended "
                                       f"(details in {self.workdir / 'soak-details.json'})")
        finally:
            for task in self.tasks:
                task.cancel()
            for task in self.tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if supervisor is not None:
                await supervisor.stop()
            await client.close()
            await asyncio.to_thread(plane.stop)

    def record_end(self, into: dict[str, float], found: Divergence) -> None:
        plan = self.plan
        into.update({
            "soak.kustomizations": plan.size, "soak.manual": len(self.apps("manual")),
            "soak.suspended": len(self.apps("suspended")), "soak.duration_s": plan.duration, "soak.seed": plan.seed,
            "soak.revisions_published": sum(rev for rev, _ in self.revisions.values()),
            "soak.hand_edits": self.hand_edits, "soak.approvals_given": len(self.approvals),
            "soak.approval_errors": self.approval_errors, "soak.faults_skipped": self.faults_skipped,
            **{f"soak.faults.{k}": v for k, v in self.faults.items()},
            "soak.lost": len(found.lost), "soak.orphaned": len(found.orphaned), "soak.stuck": len(found.stuck),
        })
        self.found = found

    def check_audit(self, plane: ControlPlane, storms: Storms, suspended_at: float, resumed_at: float
                    ) -> dict[str, float]:
        requests = list(read_audit(plane.audit_log, user=USER))
        writes = [r for r in requests if r.is_write]
        matching = unapproved_writes(writes, self.approvals, namespace=NAMESPACES["manual"],
                                     desired=expected_objects)
        while_suspended = writes_while_suspended(writes, namespace=NAMESPACES["suspended"], since=suspended_at,
                                                 until=resumed_at)
        counts = count_requests(requests, storms=storms.windows)
        self.audit_findings = {"unapproved": matching.violations, "while_suspended": while_suspended}
        return {
            "soak.unapproved_writes": len(matching.violations), "soak.approved_writes": matching.matched,
            "soak.approvals_used": matching.approvals_used, "soak.suspended_writes": len(while_suspended),
            "soak.audit_requests": counts.requests, "soak.audit_429": counts.throttled,
            "soak.audit_429_in_storms": counts.throttled_in_storms, "soak.audit_writes": counts.writes,
            "soak.audit_watches": counts.watches, "soak.audit_processes": counts.processes,
            "soak.audit_log_mib": plane.audit_log.stat().st_size / 2**20,
        }

    def control_plane_cpu(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for (name, _), seconds in self.cpu.items():
            key = f"soak.cpu_s.{name}"
            out[key] = out.get(key, 0.0) + seconds
        return out

    def write_details(self, supervisor: Supervisor, storms: Storms, found: Divergence) -> None:
        details = {
            "plan": asdict(self.plan), "schedule": self.plan.schedule(), "storm_windows": storms.windows,
            "restarts_s": self.restarts_s, "divergence": asdict(found), **self.audit_findings,
            "incarnations": [{**asdict(i), "stats": asdict(i.stats) if i.stats else None}
                             for i in supervisor.incarnations],
            "leftover_children": supervisor.leftover_children,
            "approvals": [asdict(a) | {"token": ""} for a in self.approvals],
        }
        (self.workdir / "soak-details.json").write_text(json.dumps(details, indent=1))


class _TokenClock(RealClock):
    """The real clock, remembering the ``approved-at`` token it made (an approval whose answer was lost)."""

    token = ""

    def now(self) -> datetime:
        moment = super().now()
        self.token = rfc3339_nano(moment)
        return moment


async def soak(plan: SoakPlan, *, workdir: Path, into: dict[str, float] | None = None) -> dict[str, float]:
    assets = os.environ.get("KUBE_ASSETS", "")
    why = missing_assets(assets)
    if why:
        raise RuntimeError(f"the soak needs a real control plane: {why}")
    m: dict[str, float] = into if into is not None else {}
    await Soak(plan, Path(tempfile.mkdtemp(prefix="soak-", dir=workdir)), Path(assets)).run(m)
    return m
