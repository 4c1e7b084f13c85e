"""kstatus: the status of an object computed from its fields (pure; fluxcd/cli-utils ``kstatus/status``).

``compute(obj, now=...)`` applies, first match wins:
1. ``metadata.deletionTimestamp`` → Terminating;
2. ``metadata.generation`` and ``status.observedGeneration`` both present and different → InProgress
   (``LatestGenerationNotObserved``);
3. in condition-list order: ``Reconciling=True`` → InProgress, ``Stalled=True`` → Failed;
4. the type-specific rule looked up by ``group/Kind`` (``Kind`` for the core group);
5. a ``Ready`` condition: True → Current, otherwise InProgress;
6. Current ("Resource is current").
Type rules implemented: Deployment, StatefulSet, DaemonSet, ReplicaSet (apps and extensions), Pod, Job,
CronJob, PersistentVolumeClaim, Service, PodDisruptionBudget, CustomResourceDefinition, Secret, ConfigMap.
Messages and reasons are the upstream ones. Malformed fields (a non-integer generation, conditions that
are not a list of maps, an unknown Pod phase) raise ``KStatusError``; the poller reports Unknown.

``compute_flux_job`` is Flux's custom Job reader (used by the health checks instead of the kstatus Job
rule): a Job is Current only when it completed.

``now`` is only used by the Pod rule (an Unschedulable Pod is InProgress for 15 s after creation).
``aggregate`` folds many statuses into one (Failed > Unknown > all desired > InProgress).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from kustomize_controller.api.meta import parse_time
from kustomize_controller.apply.objects import Object, split_api_version

MAX_INT32 = 2**31 - 1
SCHEDULE_WINDOW = timedelta(seconds=15)


class Status(StrEnum):
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    CURRENT = "Current"
    TERMINATING = "Terminating"
    NOT_FOUND = "NotFound"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class StatusResult:
    status: Status
    message: str
    reason: str = ""


class KStatusError(ValueError):
    """The object's fields cannot be interpreted (the poller reports Unknown with this message)."""


def _in_progress(reason: str, message: str) -> StatusResult:
    return StatusResult(Status.IN_PROGRESS, message, reason)


def _failed(reason: str, message: str) -> StatusResult:
    return StatusResult(Status.FAILED, message, reason)


def _current(message: str) -> StatusResult:
    return StatusResult(Status.CURRENT, message)


def _field(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for key in path.strip(".").split("."):
        if not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def _int(obj: Mapping[str, Any], path: str, default: int) -> int:
    value = _field(obj, path)
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default


def _str(obj: Mapping[str, Any], path: str, default: str) -> str:
    value = _field(obj, path)
    return value if isinstance(value, str) else default


def _strict_int(obj: Mapping[str, Any], path: str) -> int | None:
    value = _field(obj, path)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KStatusError(f"looking up {path.strip('.')} from resource: not an integer: {value!r}")
    return int(value)


def conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = _field(obj, "status.conditions")
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(c, Mapping) for c in raw):
        raise KStatusError("status.conditions is not a list of objects")
    return raw


def _condition(obj: Mapping[str, Any], ctype: str, status: str | None = None) -> Mapping[str, Any] | None:
    for cond in conditions(obj):
        if cond.get("type") == ctype and (status is None or cond.get("status") == status):
            return cond
    return None


def _generic(obj: Object) -> StatusResult | None:
    deletion = _field(obj, "metadata.deletionTimestamp")
    if isinstance(deletion, str) and deletion:
        return StatusResult(Status.TERMINATING, "Resource scheduled for deletion")
    generation = _strict_int(obj, "metadata.generation")
    if generation is not None:
        observed = _strict_int(obj, "status.observedGeneration")
        if observed is not None and observed != generation:
            message = f"{obj.get('kind', '')} generation is {generation}, but latest observed generation is {observed}"
            return _in_progress("LatestGenerationNotObserved", message)
    for cond in conditions(obj):
        if cond.get("type") == "Reconciling" and cond.get("status") == "True":
            return _in_progress(str(cond.get("reason") or ""), str(cond.get("message") or ""))
        if cond.get("type") == "Stalled" and cond.get("status") == "True":
            return _failed(str(cond.get("reason") or ""), str(cond.get("message") or ""))
    return None


def _always_ready(_: Object, __: datetime) -> StatusResult:
    return _current("Resource is always ready")


def _deployment(obj: Object, _: datetime) -> StatusResult:
    progressing = _int(obj, "spec.progressDeadlineSeconds", MAX_INT32) == MAX_INT32
    available = False
    for cond in conditions(obj):
        if cond.get("type") == "Progressing":
            if cond.get("reason") == "ProgressDeadlineExceeded":
                return _failed("ProgressDeadlineExceeded", "Progress deadline exceeded")
            if cond.get("status") == "True" and cond.get("reason") == "NewReplicaSetAvailable":
                progressing = True
        elif cond.get("type") == "Available" and cond.get("status") == "True":
            available = True
    spec = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    avail = _int(obj, "status.availableReplicas", 0)
    if spec > replicas:
        return _in_progress("LessReplicas", f"Replicas: {replicas}/{spec}")
    if spec > updated:
        return _in_progress("LessUpdated", f"Updated: {updated}/{spec}")
    if replicas > spec:
        return _in_progress("ExtraPods", f"Pending termination: {replicas - spec}")
    if updated > avail:
        return _in_progress("LessAvailable", f"Available: {avail}/{updated}")
    if spec > ready:
        return _in_progress("LessReady", f"Ready: {ready}/{spec}")
    if not progressing:
        return _in_progress("ReplicaSetNotAvailable", "ReplicaSet not Available")
    if not available:
        return _in_progress("DeploymentNotAvailable", "Deployment not Available")
    return _current(f"Deployment is available. Replicas: {replicas}")


def _statefulset(obj: Object, _: datetime) -> StatusResult:
    if _str(obj, "spec.updateStrategy.type", "") == "OnDelete":
        return _current("StatefulSet is using the ondelete update strategy")
    spec = _int(obj, "spec.replicas", 1)
    ready = _int(obj, "status.readyReplicas", 0)
    current = _int(obj, "status.currentReplicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    replicas = _int(obj, "status.replicas", 0)
    partition = _int(obj, "spec.updateStrategy.rollingUpdate.partition", -1)
    if spec > replicas:
        return _in_progress("LessReplicas", f"Replicas: {replicas}/{spec}")
    if spec > ready:
        return _in_progress("LessReady", f"Ready: {ready}/{spec}")
    if replicas > spec:
        return _in_progress("ExtraPods", f"Pending termination: {replicas - spec}")
    if partition != -1:
        if updated < spec - partition:
            return _in_progress("PartitionRollout", f"updated: {updated}/{spec - partition}")
        return _current(f"Partition rollout complete. updated: {updated}")
    if spec > current:
        return _in_progress("LessCurrent", f"current: {current}/{spec}")
    if _str(obj, "status.currentRevision", "") != _str(obj, "status.updateRevision", ""):
        return _in_progress("RevisionMismatch", "Waiting for updated revision to match current")
    return _current(f"All replicas scheduled as expected. Replicas: {replicas}")


def _daemonset(obj: Object, _: datetime) -> StatusResult:
    kind = str(obj.get("kind", ""))
    if _strict_int(obj, "metadata.generation") is None:
        return _in_progress("NoGeneration", f"{kind} metadata.generation not found")
    if _strict_int(obj, "status.observedGeneration") is None:
        return _in_progress("NoObservedGeneration", f"{kind} status.observedGeneration not found")
    desired = _int(obj, "status.desiredNumberScheduled", -1)
    current = _int(obj, "status.currentNumberScheduled", 0)
    updated = _int(obj, "status.updatedNumberScheduled", 0)
    available = _int(obj, "status.numberAvailable", 0)
    ready = _int(obj, "status.numberReady", 0)
    if desired == -1:
        return _in_progress("NoDesiredNumber", "Missing .status.desiredNumberScheduled")
    if desired > current:
        return _in_progress("LessCurrent", f"Current: {current}/{desired}")
    if desired > updated:
        return _in_progress("LessUpdated", f"Updated: {updated}/{desired}")
    if desired > available:
        return _in_progress("LessAvailable", f"Available: {available}/{desired}")
    if desired > ready:
        return _in_progress("LessReady", f"Ready: {ready}/{desired}")
    return _current(f"All replicas scheduled as expected. Replicas: {desired}")


def _replicaset(obj: Object, _: datetime) -> StatusResult:
    if _condition(obj, "ReplicaFailure", "True") is not None:
        return _in_progress("ReplicaFailure", "Replica Failure condition. Check Pods")
    spec = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    available = _int(obj, "status.availableReplicas", 0)
    labelled = _int(obj, "status.fullyLabeledReplicas", 0)
    if spec > labelled:
        return _in_progress("LessLabelled", f"Labelled: {labelled}/{spec}")
    if spec > available:
        return _in_progress("LessAvailable", f"Available: {available}/{spec}")
    if spec > ready:
        return _in_progress("LessReady", f"Ready: {ready}/{spec}")
    if replicas > spec:
        return _in_progress("ExtraPods", f"Pending termination: {replicas - spec}")
    return _current(f"ReplicaSet is available. Replicas: {replicas}")


def _pod(obj: Object, now: datetime) -> StatusResult:
    phase = _str(obj, "status.phase", "")
    if phase == "Succeeded":
        return _current("Pod has completed successfully")
    if phase == "Failed":
        return _current("Pod has completed, but not successfully")
    if phase == "Running":
        if _condition(obj, "Ready", "True") is not None:
            return _current("Pod is Ready")
        looping = []
        for cs in _field(obj, "status.containerStatuses") or []:
            if isinstance(cs, Mapping) and _field(cs, "state.waiting.reason") == "CrashLoopBackOff":
                looping.append(str(cs.get("name", "")))
        if looping:
            return _failed("ContainerCrashLooping", f"Containers in CrashLoop state: {','.join(looping)}")
        return _in_progress("PodRunningNotReady", "Pod is running but is not Ready")
    if phase == "Pending":
        cond = _condition(obj, "PodScheduled", "False")
        if cond is not None and cond.get("reason") == "Unschedulable":
            created = parse_time(_field(obj, "metadata.creationTimestamp"))
            if created is None or now - SCHEDULE_WINDOW < created:
                return _in_progress("PodNotScheduled", "Pod has not been scheduled")
            return _failed("PodUnschedulable", "Pod could not be scheduled")
        return _in_progress("PodPending", "Pod is in the Pending phase")
    if phase == "":
        return _in_progress("PodNotObserved", "Pod phase not available")
    raise KStatusError(f"unknown phase {phase}")


def _job_finished(obj: Object) -> StatusResult | None:
    """A Job's first ``Complete=True`` or ``Failed=True`` condition as kstatus words it; None while it runs."""
    completions = _int(obj, "spec.completions", _int(obj, "spec.parallelism", 1))
    for cond in conditions(obj):
        if cond.get("type") == "Complete" and cond.get("status") == "True":
            return _current(f"Job Completed. succeeded: {_int(obj, 'status.succeeded', 0)}/{completions}")
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return _failed("JobFailed", f"Job Failed. failed: {_int(obj, 'status.failed', 0)}/{completions}")
    return None


def _job(obj: Object, _: datetime) -> StatusResult:
    finished = _job_finished(obj)
    if finished is not None:
        return finished
    if not _str(obj, "status.startTime", ""):
        return _in_progress("JobNotStarted", "Job not started")
    succeeded, active, failed = (_int(obj, f"status.{f}", 0) for f in ("succeeded", "active", "failed"))
    return _current(f"Job in progress. success:{succeeded}, active: {active}, failed: {failed}")


def compute_flux_job(obj: Object) -> StatusResult:
    """Flux's custom Job reader: Current only once ``Complete=True``, Failed on ``Failed=True``,
    otherwise InProgress — a running Job is not healthy yet (no generic checks, as upstream)."""
    return _job_finished(obj) or _in_progress("JobInProgress", "Job in progress")


def _pvc(obj: Object, _: datetime) -> StatusResult:
    phase = _str(obj, "status.phase", "unknown")
    if phase != "Bound":
        return _in_progress("NotBound", f"PVC is not Bound. phase: {phase}")
    return _current("PVC is Bound")


def _service(obj: Object, _: datetime) -> StatusResult:
    if _str(obj, "spec.type", "ClusterIP") == "LoadBalancer" and not _str(obj, "spec.clusterIP", ""):
        return _in_progress("NoIPAssigned", "ClusterIP not set. Service type: LoadBalancer")
    return _current("Service is ready")


def _pdb(_: Object, __: datetime) -> StatusResult:
    return _current("AllowedDisruptions has been computed.")


def _crd(obj: Object, _: datetime) -> StatusResult:
    for cond in conditions(obj):
        ctype, cstatus, reason = cond.get("type"), cond.get("status"), str(cond.get("reason") or "")
        if ctype == "NamesAccepted" and cstatus == "False":
            return _failed(reason, str(cond.get("message") or ""))
        if ctype == "Established":
            if cstatus == "False" and reason != "Installing":
                return _failed(reason, str(cond.get("message") or ""))
            if cstatus == "True":
                return _current("CRD is established")
    return _in_progress("Installing", "Install in progress")


_TYPE_RULES: dict[str, Callable[[Object, datetime], StatusResult]] = {
    "Service": _service,
    "Pod": _pod,
    "Secret": _always_ready,
    "ConfigMap": _always_ready,
    "PersistentVolumeClaim": _pvc,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "extensions/DaemonSet": _daemonset,
    "apps/Deployment": _deployment,
    "extensions/Deployment": _deployment,
    "apps/ReplicaSet": _replicaset,
    "extensions/ReplicaSet": _replicaset,
    "policy/PodDisruptionBudget": _pdb,
    "batch/CronJob": _always_ready,
    "batch/Job": _job,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}


def type_rule_key(obj: Object) -> str:
    group, _ = split_api_version(str(obj.get("apiVersion") or ""))
    kind = str(obj.get("kind") or "")
    return f"{group}/{kind}" if group else kind


def compute(obj: Object, *, now: datetime) -> StatusResult:
    """The kstatus of ``obj`` (see module docstring); raises ``KStatusError`` on malformed fields."""
    generic = _generic(obj)
    if generic is not None:
        return generic
    rule = _TYPE_RULES.get(type_rule_key(obj))
    if rule is not None:
        return rule(obj, now)
    ready = _condition(obj, "Ready")
    if ready is not None:
        if ready.get("status") == "True":
            return _current("Resource is Ready")
        return _in_progress(str(ready.get("reason") or ""), str(ready.get("message") or ""))
    return _current("Resource is current")


def aggregate(statuses: Iterable[Status], desired: Status = Status.CURRENT) -> Status:
    """Failed if any Failed; else Unknown if any Unknown; else ``desired`` if all are; else InProgress."""
    values = list(statuses)
    if not values:
        return desired
    if Status.FAILED in values:
        return Status.FAILED
    if Status.UNKNOWN in values:
        return Status.UNKNOWN
    if all(v == desired for v in values):
        return desired
    return Status.IN_PROGRESS
