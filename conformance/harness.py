"""The two controllers side by side, and what a case works with (``Side``).

A *profile* is a set of controller flags (``PROFILES``). For each profile the harness starts upstream's
kustomize-controller (``FLUX_ASSETS``) and ours (``python -m kustomize_controller``, as e2e's
``ControllerProcess`` does) on the same control plane, with the same flags, each restricted with
``--watch-label-selector`` to the Kustomizations labelled for it (``conformance.toolkit.fluxcd.io/shard``),
each sending its events to a receiver of its own. Every case of the profile then runs twice at once, once
per controller, in namespaces of its own (``<case>-u<run>`` and ``<case>-o<run>``); cluster-scoped objects
are named per side too (``Side.unique``). A case is an async function of a ``Side``: it publishes revisions
(the same revision strings on both sides), creates objects and Kustomizations, waits until they settle and
takes checkpoints; the harness then collects the events, the notifications, the metrics and the requeue
timings. ``compare.py`` compares the two records.

The artifact server plays source-controller for both (``kustomize_controller.testing.artifacts``): both
controllers download ``status.artifact.url`` from it, so faults (a corrupt tarball, a 404) hit both alike.
A metrics poller per controller records when each Kustomization's ``gotk_reconcile_duration_seconds_count``
grows: the end of every reconcile, whatever its outcome, which is how the next reconcile is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import re
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from e2e.harness import ControllerProcess
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import ApiError, NotFoundError
from kustomize_controller.testing.artifacts import ArtifactFields, ArtifactServer, publish_source, remove_artifact
from tests.flux.process import FluxProcess

from . import normalize
from .receiver import EventsReceiver

KS_API = "kustomize.toolkit.fluxcd.io/v1"
SHARD_LABEL = "conformance.toolkit.fluxcd.io/shard"
RUN_LABEL = "conformance.toolkit.fluxcd.io/run"
UPSTREAM, OURS = "upstream", "ours"
SIDES = (UPSTREAM, OURS)
REQUEUE_DEPENDENCY = 4.0  # --requeue-dependency for both, short enough to be timed
_HTTP = aiohttp.ClientTimeout(total=10)
_COUNT = re.compile(r'^gotk_reconcile_duration_seconds_count\{([^}]*)\} (\S+)', re.M)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Profile:
    name: str
    flags: tuple[str, ...]
    description: str


# Flags both controllers get. Everything not listed is left at its default on both sides: ours then shows
# its documented defaults (e.g. EnableDependencyQueueing, --progress-status-delay), which is what a user who
# swaps the controller gets.
COMMON_FLAGS = (f"--requeue-dependency={int(REQUEUE_DEPENDENCY)}s", "--concurrent=8")
PROFILES = {
    "default": Profile("default", (), "upstream's defaults"),
    "lockdown": Profile("lockdown", ("--no-cross-namespace-refs=true", "--default-service-account=tenant"),
                        "multi-tenancy lockdown: --no-cross-namespace-refs, --default-service-account=tenant"),
}


# ----------------------------------------------------------------------------------------- controllers


@dataclass
class ReconcileClock:
    """When each Kustomization's reconciles ended, from its ``gotk_reconcile_duration_seconds_count``."""

    url: str
    ends: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    _counts: dict[tuple[str, str], float] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        async with aiohttp.ClientSession(timeout=_HTTP) as http:
            while True:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with http.get(self.url) as resp:
                        text = await resp.text()
                    now = time.monotonic()
                    for labels_text, value in _COUNT.findall(text):
                        labels = dict(_LABEL.findall(labels_text))
                        key = (labels.get("namespace", ""), labels.get("name", ""))
                        count = float(value)
                        if count > self._counts.get(key, 0.0):
                            self.ends.setdefault(key, []).extend([now] * int(count - self._counts.get(key, 0.0)))
                            self._counts[key] = count
                await asyncio.sleep(0.5)


@dataclass
class Controller:
    """One controller of a profile: its process, its events receiver and its reconcile clock."""

    side: str
    profile: Profile
    process: FluxProcess | ControllerProcess
    receiver: EventsReceiver
    clock: ReconcileClock

    @property
    def shard(self) -> str:
        return f"{self.side}-{self.profile.name}"

    @property
    def metrics_url(self) -> str:
        return self.process.metrics_url

    async def stop(self) -> int | None:
        await self.clock.stop()
        code = await self.process.stop()
        await self.receiver.stop()
        return code


async def start_controller(side: str, profile: Profile, *, kubeconfig: str, upstream_binary: Path,
                           runtime_namespace: str, logs: Path) -> Controller:
    receiver = EventsReceiver()
    await receiver.start()
    shard = f"{side}-{profile.name}"
    flags = [f"--events-addr={receiver.url}", f"--watch-label-selector={SHARD_LABEL}={shard}",
             *COMMON_FLAGS, *profile.flags]
    process: FluxProcess | ControllerProcess
    if side == UPSTREAM:
        process = FluxProcess(binary=upstream_binary, kubeconfig=kubeconfig, log_path=logs / f"{shard}.log",
                              runtime_namespace=runtime_namespace, args=flags)
    else:
        # ControllerProcess watches its runtime namespace only; the shard label does the restricting here
        process = ControllerProcess(kubeconfig=kubeconfig, log_path=logs / f"{shard}.log",
                                    runtime_namespace=runtime_namespace,
                                    extra_args=(*flags, "--watch-all-namespaces=true"))
    try:
        await process.start()
    except BaseException:
        await receiver.stop()
        raise
    # ours renders only the family asked for (docs/metrics.md); upstream ignores the parameter
    clock = ReconcileClock(f"{process.metrics_url}?name[]=gotk_reconcile_duration_seconds_count")
    clock.start()
    return Controller(side=side, profile=profile, process=process, receiver=receiver, clock=clock)


# ---------------------------------------------------------------------------------------------- cases


CaseFn = Callable[["Side"], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    name: str
    title: str  # the table row: what it covers
    run: CaseFn
    profile: str = "default"
    covers: tuple[str, ...] = ()  # spec fields and failure paths of the reference
    timing: bool = False  # measures when reconciles happen: run after the others, on quiet controllers


@dataclass
class Checkpoint:
    kustomizations: dict[str, dict[str, Any]]  # name -> normalize.kustomization_status
    objects: dict[str, Any]  # normalised ref -> live_object or "absent"
    ownership: dict[str, Any]  # normalised ref -> managed_fields


@dataclass
class SideRecord:
    side: str
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    requeue: dict[str, list[str]] = field(default_factory=dict)
    requeue_seconds: dict[str, list[float]] = field(default_factory=dict)  # the measured gaps (not compared)
    metrics: list[str] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)  # waits that ran out (what and the last state seen)
    error: str | None = None
    seconds: float = 0.0


def _ref_key(api_version: str, kind: str, namespace: str, name: str) -> str:
    return f"{api_version}/{kind}/{namespace}/{name}"


def inventory_refs(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(apiVersion, kind, namespace, name) of ``status.inventory.entries`` (``<ns>_<name>_<group>_<kind>``)."""
    refs = []
    for entry in entries:
        parts = str(entry.get("id", "")).split("_")
        if len(parts) < 4:
            continue
        namespace, group, kind = parts[0], parts[-2], parts[-1]
        name = "_".join(parts[1:-2])
        if group.startswith("rbac.authorization.k8s.io"):
            name = name.replace("__", ":")
        version = str(entry.get("v", "v1"))
        refs.append((f"{group}/{version}" if group else version, kind, namespace, name))
    return refs


@dataclass
class Side:
    """A case's view of one controller: its namespaces, names and the objects it made."""

    case: Case
    side: str
    run_id: str
    kube: KubeClient
    artifacts: ArtifactServer
    controller: Controller
    names: normalize.Names = field(default_factory=normalize.Names)
    record: SideRecord = field(init=False)
    namespaces: list[str] = field(default_factory=list)
    _seen_refs: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    _published: int = 0

    def __post_init__(self) -> None:
        self.record = SideRecord(side=self.side)
        self.ns = self.names.add(f"{self.case.name}-{self.side[0]}{self.run_id}", "<ns>")

    # ------------------------------------------------------------------------------- names and setup
    @property
    def id(self) -> str:
        """A short per-side suffix for cluster-scoped names."""
        return f"{self.side[0]}{self.run_id}"

    def unique(self, base: str) -> str:
        """A cluster-scoped name of this side (``<base>-<side><run>``), normalised to ``<base>``."""
        return self.names.add(f"{base}-{self.id}", f"<{base}>")

    def namespace_name(self, key: str) -> str:
        return self.names.add(f"{self.case.name}-{key}-{self.id}", f"<ns:{key}>")

    async def make_namespace(self, key: str | None = None) -> str:
        name = self.ns if key is None else self.namespace_name(key)
        await self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": name, "labels": {RUN_LABEL: self.run_id}}})
        self.namespaces.append(name)
        return name

    def revision(self, step: int | str) -> str:
        """The same revision string on both sides for the case's ``step``."""
        digest = hashlib.sha1(f"{self.case.name}/{step}".encode()).hexdigest()
        return f"main@sha1:{digest}"

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        body = dict(obj)
        meta = dict(body.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        labels.setdefault(RUN_LABEL, self.run_id)
        meta["labels"] = labels
        body["metadata"] = meta
        return await self.kube.create(body)

    async def apply(self, obj: Mapping[str, Any], *, manager: str = "conformance") -> dict[str, Any]:
        return await self.kube.apply(obj, field_manager=manager, force=True)

    async def publish(self, files: Mapping[str, str | bytes], *, step: int | str | None = None,
                      source: str = "src", kind: str = "GitRepository", namespace: str | None = None,
                      metadata: Mapping[str, str] | None = None) -> ArtifactFields:
        """Serve ``files`` and record them as the ready artifact of the source (created when absent)."""
        self._published += 1
        ns = namespace or self.ns
        artifact = await self.artifacts.publish_files(
            files, name=f"{kind.lower()}/{ns}/{source}",
            revision=self.revision(step if step is not None else self._published), metadata=metadata)
        await publish_source(self.kube, kind=kind, namespace=ns, name=source, artifact=artifact)
        return artifact

    async def remove_artifact(self, source: str = "src", kind: str = "GitRepository") -> None:
        await remove_artifact(self.kube, kind=kind, namespace=self.ns, name=source)

    # ---------------------------------------------------------------------------------- Kustomizations
    def kustomization_body(self, name: str, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
        annotations = spec.pop("annotations", None)
        body: dict[str, Any] = {
            "apiVersion": KS_API, "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace or self.ns,
                         "labels": {SHARD_LABEL: self.controller.shard, RUN_LABEL: self.run_id}},
            "spec": {"interval": "1h", "prune": True, "path": "./",
                     "sourceRef": {"kind": "GitRepository", "name": "src"}, **spec},
        }
        if annotations:
            body["metadata"]["annotations"] = annotations
        return body

    async def kustomization(self, name: str, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
        return await self.kube.create(self.kustomization_body(name, namespace, **spec))

    async def get_ks(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self.kube.get(KS_API, "Kustomization", name, namespace or self.ns)

    async def patch_ks(self, name: str, patch: Mapping[str, Any], namespace: str | None = None) -> None:
        await self.kube.patch(KS_API, "Kustomization", name, namespace or self.ns, dict(patch), patch_type="merge")

    async def request_reconcile(self, name: str, token: str, namespace: str | None = None) -> None:
        """``flux reconcile``'s annotation, with the same token on both sides."""
        await self.patch_ks(name, {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}},
                            namespace)

    async def delete_ks(self, name: str, namespace: str | None = None, *, within: float = 120.0) -> bool:
        ns = namespace or self.ns
        with contextlib.suppress(NotFoundError):
            await self.kube.delete(KS_API, "Kustomization", name, ns)
        return await self.wait(lambda: self._gone(name, ns), within=within, what=f"Kustomization/{ns}/{name} gone")

    async def _gone(self, name: str, ns: str) -> bool:
        try:
            await self.kube.get(KS_API, "Kustomization", name, ns)
        except NotFoundError:
            return True
        return False

    # -------------------------------------------------------------------------------------- waiting
    async def wait(self, probe: Callable[[], Awaitable[bool]], *, within: float, what: str,
                   last: Callable[[], Awaitable[Any]] | None = None) -> bool:
        """Until ``probe()`` is true; a wait that runs out is recorded (not raised): the case goes on, and
        the comparison shows what each side reached."""
        deadline = time.monotonic() + within
        while True:
            with contextlib.suppress(ApiError):
                if await probe():
                    return True
            if time.monotonic() >= deadline:
                seen: Any = None
                if last is not None:
                    with contextlib.suppress(Exception):
                        seen = await last()
                self.record.waits.append(f"{self.names.text(what)}: not within {within:.0f}s; "
                                         f"last seen: {self.names.deep(seen)!r}"[:2000])
                return False
            await asyncio.sleep(1.0)

    async def settle(self, name: str, *, until: Callable[[dict[str, Any]], bool] | None = None,
                     within: float = 120.0, namespace: str | None = None, quiet: float = 2.0,
                     finished: bool = True) -> bool:
        """Until the Kustomization has finished a reconcile (Ready True or False for its generation; with
        ``finished=False`` any state), ``until`` holds, and its status stayed the same for ``quiet`` seconds."""
        ns = namespace or self.ns
        state: dict[str, Any] = {}

        async def probe() -> bool:
            obj = await self.get_ks(name, ns)
            state["obj"] = obj
            if (finished and not settled(obj)) or (until is not None and not until(obj)):
                state.pop("since", None)
                return False
            version = obj["metadata"]["resourceVersion"]
            if state.get("version") != version:
                state["version"], state["since"] = version, time.monotonic()
                return False
            return time.monotonic() - state.get("since", time.monotonic()) >= quiet

        async def last() -> Any:
            return (state.get("obj") or {}).get("status")

        return await self.wait(probe, within=within, what=f"Kustomization/{ns}/{name} settled", last=last)

    async def patch_status(self, api_version: str, kind: str, name: str, status: Mapping[str, Any],
                           namespace: str | None = None) -> None:
        """Write ``status`` through the status subresource, as the object's own controller would."""
        await self.kube.patch(api_version, kind, name, namespace or self.ns, {"status": dict(status)},
                              patch_type="merge", subresource="status")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    # ------------------------------------------------------------------------------------ collecting
    def watch_ref(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        """Compare this object at every later checkpoint (present or absent), even if no inventory lists it."""
        ref = (api_version, kind, namespace, name)
        self._seen_refs[self.names.text(_ref_key(*ref[:2], ref[2], ref[3]))] = ref

    async def checkpoint(self, label: str) -> None:
        kustomizations: dict[str, dict[str, Any]] = {}
        for ns in self.namespaces:
            for obj in await self.kube.list(KS_API, "Kustomization", ns):
                key = self.names.text(f"{ns}/{obj['metadata']['name']}")
                kustomizations[key] = normalize.kustomization_status(obj, self.names)
                inventory = (obj.get("status") or {}).get("inventory") or {}
                for ref in inventory_refs(inventory.get("entries") or []):
                    self._seen_refs.setdefault(self.names.text(_ref_key(*ref)), ref)
        objects: dict[str, Any] = {}
        ownership: dict[str, Any] = {}
        for key, (api_version, kind, namespace, name) in sorted(self._seen_refs.items()):
            try:
                live = await self.kube.get(api_version, kind, name, namespace or None)
            except NotFoundError:
                objects[key] = ownership[key] = "absent"
                continue
            except ApiError as err:
                objects[key] = ownership[key] = f"error: {type(err).__name__}"
                continue
            objects[key] = normalize.live_object(live, self.names)
            ownership[key] = normalize.managed_fields(live, self.names)
        self.record.checkpoints[label] = Checkpoint(kustomizations, objects, ownership)

    async def collect_events(self) -> None:
        events = []
        for ns in self.namespaces:
            with contextlib.suppress(ApiError):
                for event in await self.kube.list("v1", "Event", ns):
                    if (event.get("involvedObject") or {}).get("kind") == "Kustomization":
                        events.append(normalize.kube_event(event, self.names))
        unique = {repr(sorted(e.items())): e for e in events}
        self.record.events = [unique[k] for k in sorted(unique)]
        notes = []
        for ns in self.namespaces:
            for event in self.controller.receiver.for_object(ns):
                notes.append((event.at, normalize.webhook_event(event.body, self.names)))
        # per Kustomization, in arrival order, a repeated event once
        by_object: dict[str, list[dict[str, Any]]] = {}
        for _, note in sorted(notes, key=lambda n: n[0]):
            by_object.setdefault(f"{note['involvedObject']['namespace']}/{note['involvedObject']['name']}",
                                 []).append(note)
        self.record.notifications = [n for key in sorted(by_object) for n in normalize.collapse_repeats(by_object[key])]

    def reconcile_ends(self, name: str, namespace: str | None = None) -> list[float]:
        return list(self.controller.clock.ends.get((namespace or self.ns, name), []))

    async def time_requeues(self, name: str, *, label: str, seconds: float, candidates: Mapping[str, float],
                            namespace: str | None = None) -> None:
        """Watch ``seconds`` of reconciles of ``name`` and record the gaps between their ends, each named by
        the nearest of ``candidates`` (e.g. ``{"interval": 15, "retryInterval": 6}``) or ``"other"``."""
        start = time.monotonic()
        await asyncio.sleep(seconds)
        ends = [t for t in self.reconcile_ends(name, namespace) if t >= start - 0.1]
        gaps = [b - a for a, b in itertools.pairwise(ends)]
        # each kind of gap once in a row: how many fit in the window depends on where it began
        self.record.requeue[label] = normalize.collapse_repeats([classify_gap(g, candidates) for g in gaps]) or [
            "no reconcile"]
        self.record.requeue_seconds[label] = [round(g, 2) for g in gaps]

    async def collect_metrics(self) -> None:
        async with aiohttp.ClientSession(timeout=_HTTP) as http, http.get(self.controller.metrics_url) as resp:
            text = await resp.text()
        self.record.metrics = normalize.metric_series(parse_samples(text), self.names, set(self.namespaces))


def classify_gap(gap: float, candidates: Mapping[str, float]) -> str:
    """The candidate a measured gap between two reconcile ends stands for: within 1.5 s + 15 % of it."""
    if gap < 1.5:
        return "immediate"
    best = min(candidates.items(), key=lambda kv: abs(kv[1] - gap), default=None)
    if best is not None and abs(best[1] - gap) <= 1.5 + 0.15 * best[1]:
        return best[0]
    return f"other ({gap:.0f}s)"


def parse_samples(text: str) -> list[tuple[str, dict[str, str]]]:
    """(name, labels) of every sample line of a Prometheus text page."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head = line.rsplit(" ", 1)[0]
        if "{" in head:
            name, _, rest = head.partition("{")
            out.append((name, dict(_LABEL.findall(rest.rsplit("}", 1)[0]))))
        else:
            out.append((head, {}))
    return out


def condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def settled(obj: Mapping[str, Any]) -> bool:
    """A reconcile of the current generation has ended: Ready is True or False for it."""
    ready = condition(obj, "Ready")
    generation = (obj.get("metadata") or {}).get("generation")
    return ready is not None and ready.get("status") in ("True", "False") and \
        ready.get("observedGeneration") == generation


def attempted(revision: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (obj.get("status") or {}).get("lastAttemptedRevision") == revision


def applied(revision: str) -> Callable[[dict[str, Any]], bool]:
    def check(obj: dict[str, Any]) -> bool:
        ready = condition(obj, "Ready") or {}
        return ready.get("status") == "True" and (obj.get("status") or {}).get("lastAppliedRevision") == revision
    return check


def reason(*reasons: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (condition(obj, "Ready") or {}).get("reason") in reasons


def handled(token: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (obj.get("status") or {}).get("lastHandledReconcileAt") == token


async def run_case_side(side: Side) -> SideRecord:
    started = time.monotonic()
    try:
        await side.make_namespace()
        await side.case.run(side)
    except Exception as err:  # a harness or case error is part of the record, not the end of the run
        side.record.error = f"{type(err).__name__}: {side.names.text(str(err))}\n" + "".join(
            traceback.format_exception(err)[-3:])
    side.record.seconds = time.monotonic() - started
    return side.record


async def finish_case_side(side: Side) -> None:
    """After the case: the events, notifications and metrics (once the controller had time to send them)."""
    try:
        await side.collect_events()
        await side.collect_metrics()
    except Exception as err:
        side.record.error = (side.record.error or "") + f"\ncollecting: {type(err).__name__}: {err}"
