"""Optional "instant controllers": report workloads ready, for demos and health-check tests.

A real cluster's controllers fill in the status of Deployments, StatefulSets, DaemonSets, ReplicaSets,
Jobs, Pods and PersistentVolumeClaims; the embedded server runs none, so by default these never become
ready. With ``ApiServer(simulate_workloads=True)`` every stored write of one of these kinds is followed
at once by a status write (a separate resourceVersion and MODIFIED event, manager
``kube-controller-manager``, subresource ``status``) that reports it fully rolled out and ready, as kstatus
expects (``observedGeneration`` = ``generation``, replicas counts equal to ``spec.replicas``, the
Available/Progressing conditions a Deployment controller sets). Nothing fails, nothing takes time.
A Deployment whose pod template is new first gets the ``deployment.kubernetes.io/revision`` annotation
through the ``status`` subresource (manager ``kube-controller-manager``; the generation does not move),
as the real Deployment controller's ``UpdateStatus`` does. ``ApiServer.resync_workload_status()`` writes
the status of every simulated workload again (fresh condition times), as controllers do whenever their
pods change.
An object annotated ``NEVER_READY_ANNOTATION: "true"`` is left alone: it never becomes ready, as a
Deployment on a cluster without nodes (benchmarks of broken apps use it).
"""

from __future__ import annotations

from typing import Any

from .kinds import ResourceType

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
SIMULATED = {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("apps", "ReplicaSet"),
             ("batch", "Job"), ("", "Pod"), ("", "PersistentVolumeClaim")}


NEVER_READY_ANNOTATION = "testing.kustomize-controller.io/never-ready"


def _replicas(obj: dict[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) else 1


def _condition(type_: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": type_, "status": "True", "reason": reason, "message": message, "lastUpdateTime": now,
            "lastTransitionTime": now}


def ready_status(rt: ResourceType, obj: dict[str, Any], now: str) -> dict[str, Any] | None:
    """The status a healthy controller would report for ``obj``; None for kinds not simulated."""
    if (rt.group, rt.kind) not in SIMULATED:
        return None
    meta = obj["metadata"]
    generation = meta.get("generation", 1)
    name = meta["name"]
    old = obj.get("status") or {}
    if rt.kind == "Deployment":
        n = _replicas(obj)
        return {"observedGeneration": generation, "replicas": n, "updatedReplicas": n, "readyReplicas": n,
                "availableReplicas": n, "conditions": [
                    _condition("Available", "MinimumReplicasAvailable", "Deployment has minimum availability.",
                               now),
                    _condition("Progressing", "NewReplicaSetAvailable",
                               f'ReplicaSet "{name}-{generation}" has successfully progressed.', now)]}
    if rt.kind == "StatefulSet":
        n = _replicas(obj)
        revision = f"{name}-{generation}"
        return {"observedGeneration": generation, "replicas": n, "readyReplicas": n, "currentReplicas": n,
                "updatedReplicas": n, "availableReplicas": n, "currentRevision": revision,
                "updateRevision": revision}
    if rt.kind == "DaemonSet":
        return {"observedGeneration": generation, "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                "updatedNumberScheduled": 1, "numberReady": 1, "numberAvailable": 1, "numberMisscheduled": 0}
    if rt.kind == "ReplicaSet":
        n = _replicas(obj)
        return {"observedGeneration": generation, "replicas": n, "fullyLabeledReplicas": n, "readyReplicas": n,
                "availableReplicas": n}
    if rt.kind == "Job":
        start = old.get("startTime", now)
        return {"startTime": start, "completionTime": old.get("completionTime", now), "succeeded": 1,
                "ready": 0, "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now,
                     "lastTransitionTime": now},
                    {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]}
    if rt.kind == "Pod":
        conditions = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                      for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                "PodScheduled")]
        return {"phase": "Running", "conditions": conditions, "qosClass": "BestEffort",
                "startTime": old.get("startTime", now), "observedGeneration": generation}
    return {"phase": "Bound"}  # PersistentVolumeClaim


def needs_update(rt: ResourceType, obj: dict[str, Any], now: str) -> dict[str, Any] | None:
    """The status to write, or None when the stored one already says ready for this generation."""
    if obj["metadata"].get("deletionTimestamp"):
        return None
    if (obj["metadata"].get("annotations") or {}).get(NEVER_READY_ANNOTATION) == "true":
        return None
    wanted = ready_status(rt, obj, now)
    if wanted is None:
        return None
    current = obj.get("status") or {}
    if _without_times(current) == _without_times(wanted):
        return None
    return wanted


def _without_times(status: dict[str, Any]) -> Any:
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("lastUpdateTime", "lastTransitionTime", "lastProbeTime", "startTime",
                                 "completionTime")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(status)
