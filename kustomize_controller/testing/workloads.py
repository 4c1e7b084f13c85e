"""A stand-in for kube-controller-manager's workload controllers, for demos on the embedded API server.

The embedded API server stores objects but runs no controllers and no kubelet, so a Deployment never
reports available replicas and a health check on it would wait forever. ``simulate_workloads``
plays the deployment and statefulset controllers in the simplest honest way: it writes the status a
healthy rollout ends with (observedGeneration, replica counts equal to spec.replicas, the
Available/Progressing conditions). It is meant for ``make run`` and demos; behaviour tests that care
about health use explicit statuses instead.

Contract: polls every ``interval`` seconds; touches only Deployments and StatefulSets whose status does
not already match their spec; stops when cancelled.
"""

from __future__ import annotations

from typing import Any, Protocol

from kustomize_controller.kube.errors import KubeError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.logs import get_logger

_log = get_logger("workloads")


class WorkloadClient(Protocol):
    async def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]: ...

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any, *,
                    patch_type: Any, subresource: str | None = None) -> dict[str, Any]: ...


def healthy_status(obj: dict[str, Any], *, now: str) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    generation = (obj.get("metadata") or {}).get("generation", 1)
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "replicas": replicas,
        "readyReplicas": replicas,
        "updatedReplicas": replicas,
        "availableReplicas": replicas,
    }
    if obj.get("kind") == "Deployment":
        status["conditions"] = [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": "ReplicaSet has successfully progressed.", "lastUpdateTime": now,
             "lastTransitionTime": now},
        ]
    else:
        status["currentReplicas"] = replicas
        revision = status.get("currentRevision") or f"{obj['metadata']['name']}-{generation}"
        status["currentRevision"] = status["updateRevision"] = revision
    return status


def _settled(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    replicas = int((obj.get("spec") or {}).get("replicas", 1))
    return status.get("observedGeneration") == obj["metadata"].get("generation") and status.get(
        "availableReplicas", status.get("readyReplicas")
    ) == replicas


async def simulate_workloads(client: WorkloadClient, *, clock: Clock, interval: float = 0.5) -> None:
    while True:
        for kind in ("Deployment", "StatefulSet"):
            try:
                objects = await client.list("apps/v1", kind)
            except KubeError as err:
                _log.debug("workload list failed", kind=kind, error=str(err))
                continue
            for obj in objects:
                if _settled(obj):
                    continue
                meta = obj["metadata"]
                now = clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
                try:
                    await client.patch("apps/v1", kind, meta["name"], meta.get("namespace"),
                                       {"status": healthy_status(obj, now=now)}, patch_type="merge",
                                       subresource="status")
                except KubeError as err:
                    _log.debug("workload status write failed", kind=kind, name=meta["name"], error=str(err))
        await clock.sleep(interval)
