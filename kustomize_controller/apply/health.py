"""Health assessment: poll objects until they are Current (fluxcd/pkg ``ssa`` ``WaitForSet`` + kstatus poller).

Contract:
- ``StatusPoller.read`` GETs one object and computes its status: ``batch/Job`` with Flux's Job reader
  (Current only when complete), then a matching ``healthCheckExprs`` evaluator, else kstatus. 404 →
  NotFound; any other read or evaluation error → Unknown carrying the error text. For apps ReplicaSet
  and StatefulSet that are InProgress, the Pods matched by ``spec.selector`` are listed and any Failed
  Pod (not being deleted, not Unschedulable) makes the object Failed ("N pods have failed").
- ``wait_for_set`` polls every target at start and then every ``interval`` seconds through the Clock,
  until the aggregate is Current, or every status is Current/Failed (terminal), or — with
  ``fail_fast`` — one is Failed, or ``timeout_seconds`` elapse. A Job listed in ``jobs_with_ttl`` that is gone
  counts as Current (the TTL controller removed it after it finished).
- Failure raises ``HealthCheckError`` with upstream's text, targets in the given order:
  ``timeout waiting for: [Kind/ns/name status: 'InProgress', ...]`` or
  ``failed early due to stalled resources: [Kind/ns/name status: 'Failed', ...]``; an Unknown status
  appends ``: <error>``.
- Reads run concurrently, at most ``max_concurrent_reads`` at a time. Cancelling the caller stops the
  wait at once (nothing is left running).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kustomize_controller.apply.cel import CelEvaluationError, CelStatusReaders
from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.client import ReadClient
from kustomize_controller.apply.errors import HealthCheckError
from kustomize_controller.apply.kstatus import KStatusError, Status, StatusResult, aggregate, compute, compute_flux_job
from kustomize_controller.apply.objects import ObjRef, join_api_version, split_api_version
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock

DEFAULT_INTERVAL = 5.0


@dataclass(frozen=True, slots=True)
class HealthTarget:
    """An object to check: identity plus the API version to read it with."""

    ref: ObjRef
    api_version: str

    @classmethod
    def of(cls, ref: ObjRef, version: str) -> HealthTarget:
        return cls(ref=ref, api_version=join_api_version(ref.group, version))

    def __str__(self) -> str:
        return str(self.ref)


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    target: HealthTarget
    status: Status
    message: str = ""
    error: str | None = None


def label_selector_string(selector: Mapping[str, Any] | None) -> str | None:
    """A ``metav1.LabelSelector`` as selector text; ``None`` when it selects nothing usable."""
    if not isinstance(selector, Mapping):
        return None
    parts: list[str] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        parts.append(f"{key}={value}")
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, Mapping):
            return None
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            return None
    return ",".join(parts) if parts else None


def _is_transient_pod_failure(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return True
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return True
    return False


class StatusPoller:
    """Reads the status of one object at a time (see module contract)."""

    def __init__(self, *, client: ReadClient, clock: Clock, readers: CelStatusReaders | None = None) -> None:
        self._client = client
        self._clock = clock
        self._readers = readers

    async def read(self, target: HealthTarget) -> ResourceStatus:
        ref = target.ref
        try:
            obj = await self._client.get(target.api_version, ref.kind, ref.name, ref.namespace or None)
        except NotFoundError:
            return ResourceStatus(target, Status.NOT_FOUND, "Resource not found")
        except (KubeError, ValueError) as exc:
            return ResourceStatus(target, Status.UNKNOWN, error=str(exc))
        try:
            result = self._compute(obj, ref)
        except (KStatusError, CelEvaluationError) as exc:
            return ResourceStatus(target, Status.UNKNOWN, error=str(exc))
        except Exception as exc:  # a malformed object must not break the wait for every other object
            return ResourceStatus(target, Status.UNKNOWN, error=f"can't compute status: {exc!r}")
        if result.status is Status.IN_PROGRESS and ref.group == "apps" and ref.kind in ("ReplicaSet", "StatefulSet"):
            failed = await self._failed_pods(obj, ref)
            if failed:
                return ResourceStatus(target, Status.FAILED, f"{failed} pods have failed")
        return ResourceStatus(target, result.status, result.message)

    def _compute(self, obj: dict[str, Any], ref: ObjRef) -> StatusResult:
        if ref.group == "batch" and ref.kind == "Job":
            return compute_flux_job(obj)
        if self._readers:
            evaluator = self._readers.lookup(ref.group, ref.kind)
            if evaluator is not None:
                return evaluator.evaluate(obj)
        return compute(obj, now=self._clock.now())

    async def _failed_pods(self, obj: dict[str, Any], ref: ObjRef) -> int:
        selector = label_selector_string((obj.get("spec") or {}).get("selector"))
        if selector is None:
            return 0
        try:
            pods = await self._client.list("v1", "Pod", ref.namespace or None, label_selector=selector)
        except KubeError:
            return 0  # the pods only refine the verdict; the object's own status still stands
        now = self._clock.now()
        count = 0
        for pod in pods:
            try:
                failed = compute(pod, now=now).status is Status.FAILED
            except KStatusError:
                continue
            if failed and not _is_transient_pod_failure(pod):
                count += 1
        return count


async def wait_for_set(
    targets: Sequence[HealthTarget],
    *,
    poller: StatusPoller,
    clock: Clock,
    timeout_seconds: float,
    interval: float = DEFAULT_INTERVAL,
    fail_fast: bool = True,
    jobs_with_ttl: Iterable[HealthTarget] = (),
    max_concurrent_reads: int = 8,
    on_waiting: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Wait until every target is Current; raise ``HealthCheckError`` otherwise (module contract).

    ``on_waiting`` is awaited once, when the first reading is not conclusive and the wait begins."""
    if not targets:
        return
    ttl_jobs = {t.ref for t in jobs_with_ttl}
    deadline = clock.monotonic() + timeout_seconds
    gate = asyncio.Semaphore(max(1, max_concurrent_reads))
    last: dict[ObjRef, ResourceStatus] = {}
    timed_out = False

    async def read(target: HealthTarget) -> ResourceStatus:
        async with gate:
            return await poller.read(target)

    while True:
        results = await asyncio.gather(*(read(t) for t in targets))
        for rs in results:
            last[rs.target.ref] = rs
        effective = [
            Status.CURRENT if rs.status is Status.NOT_FOUND and rs.target.ref in ttl_jobs else rs.status
            for rs in results
        ]
        failed = Status.FAILED in effective
        terminal = all(s in (Status.CURRENT, Status.FAILED) for s in effective)
        if aggregate(effective) is Status.CURRENT or (fail_fast and failed) or terminal:
            break
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        if on_waiting is not None:
            await on_waiting()
            on_waiting = None
        await clock.sleep(min(interval, remaining))
        if clock.monotonic() >= deadline:
            timed_out = True
            break

    errors: list[str] = []
    for target in targets:
        seen = last.get(target.ref)
        if seen is None:
            if target.ref not in ttl_jobs:
                errors.append(f"can't determine status for {target}")
            continue
        if seen.status is Status.NOT_FOUND and target.ref in ttl_jobs:
            continue
        if seen.status is Status.FAILED or (timed_out and seen.status is not Status.CURRENT):
            text = f"{target} status: '{seen.status}'"
            if seen.error:
                text += f": {seen.error}"
            errors.append(text)
    if errors:
        prefix = "timeout waiting for" if timed_out else "failed early due to stalled resources"
        raise HealthCheckError(f"{prefix}: [{', '.join(errors)}]")


def targets_from_change_set(change_set: ChangeSet, *, exclude: ObjRef | None = None) -> list[HealthTarget]:
    """``wait: true`` targets: every applied entry except ``skipped`` ones and ``exclude`` (the
    Kustomization itself, which would otherwise wait on its own readiness)."""
    return [
        HealthTarget.of(e.ref, e.version)
        for e in change_set
        if e.action is not Action.SKIPPED and not _is_self(e.ref, exclude)
    ]


def _is_self(ref: ObjRef, exclude: ObjRef | None) -> bool:
    # upstream compares kind, name and namespace only (the group is not checked)
    if exclude is None:
        return False
    return (ref.kind, ref.namespace, ref.name) == (exclude.kind, exclude.namespace, exclude.name)


class ObjectReference(Protocol):
    """A ``spec.healthChecks[]`` entry (the api ``NamespacedObjectKindReference`` satisfies it)."""

    @property
    def api_version(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str | None: ...


def targets_from_references(refs: Iterable[ObjectReference], *, exclude: ObjRef | None = None) -> list[HealthTarget]:
    """``healthChecks`` targets: a missing apiVersion means ``apps/v1`` and a missing namespace means a
    cluster-scoped object (both as upstream); ``exclude`` (the Kustomization itself) is dropped."""
    out: list[HealthTarget] = []
    for ref in refs:
        api_version = ref.api_version or "apps/v1"
        group, _ = split_api_version(api_version)
        obj_ref = ObjRef(group=group, kind=ref.kind, namespace=ref.namespace or "", name=ref.name)
        if not _is_self(obj_ref, exclude):
            out.append(HealthTarget(ref=obj_ref, api_version=api_version))
    return out


def jobs_with_ttl(objects: Iterable[Mapping[str, Any]]) -> list[HealthTarget]:
    """Jobs (``batch/*``) of the desired objects that set ``spec.ttlSecondsAfterFinished``."""
    out: list[HealthTarget] = []
    for obj in objects:
        version = str(obj.get("apiVersion") or "")
        if obj.get("kind") != "Job" or not version.startswith("batch/"):
            continue
        ttl = (obj.get("spec") or {}).get("ttlSecondsAfterFinished")
        if isinstance(ttl, int) and not isinstance(ttl, bool):
            ref = ObjRef.from_object(dict(obj))
            out.append(HealthTarget(ref=ref, api_version=version))
    return out
