"""kstatus table: realistic object statuses (shapes as the API server reports them) → status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kustomize_controller.apply.kstatus import (
    KStatusError,
    Status,
    aggregate,
    compute,
    compute_flux_job,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
IP, CUR, FAIL, TERM = Status.IN_PROGRESS, Status.CURRENT, Status.FAILED, Status.TERMINATING


def cond(ctype: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def deployment(
    spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, gen: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app", "generation": gen},
        "spec": {"replicas": 3, "progressDeadlineSeconds": 600, **(spec or {})},
        "status": status if status is not None else {},
    }


DEPLOY_OK = {
    "observedGeneration": 2,
    "replicas": 3,
    "updatedReplicas": 3,
    "readyReplicas": 3,
    "availableReplicas": 3,
    "conditions": [
        cond("Available", "True", "MinimumReplicasAvailable"),
        cond("Progressing", "True", "NewReplicaSetAvailable"),
    ],
}


def sts(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "app", "generation": 1},
        "spec": {"replicas": 2, **(spec or {})},
        "status": {"observedGeneration": 1, **(status or {})},
    }


STS_OK = {
    "replicas": 2,
    "readyReplicas": 2,
    "currentReplicas": 2,
    "updatedReplicas": 2,
    "currentRevision": "db-1",
    "updateRevision": "db-1",
}


def ds(status: dict[str, Any] | None, gen: int | None = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "agent", "namespace": "kube-system"}
    if gen is not None:
        meta["generation"] = gen
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "status": status or {}}


DS_OK = {
    "observedGeneration": 1,
    "desiredNumberScheduled": 3,
    "currentNumberScheduled": 3,
    "updatedNumberScheduled": 3,
    "numberAvailable": 3,
    "numberReady": 3,
}


def rs(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": "app", "generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, **status},
    }


RS_OK = {"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}


def pod(
    phase: str,
    conditions: list[dict[str, str]] | None = None,
    created: str = "2026-01-01T11:00:00Z",
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions or []}
    if phase:
        status["phase"] = phase
    if containers is not None:
        status["containerStatuses"] = containers
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "app", "creationTimestamp": created},
        "status": status,
    }


def job(conditions: list[dict[str, str]] | None = None, started: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions or []}
    if started:
        status["startTime"] = "2026-01-01T11:59:00Z"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "app", "generation": 1},
        "spec": {"completions": 1},
        "status": status,
    }


def crd(conditions: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "generation": 1},
        "status": {"conditions": conditions},
    }


def custom(status: dict[str, Any] | None = None, gen: int = 3, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "app", "generation": gen, **meta},
    }
    if status is not None:
        obj["status"] = status
    return obj


CASES: list[tuple[str, dict[str, Any], Status, str]] = [
    # generic rules
    ("terminating", custom({}, deletionTimestamp="2026-01-01T00:00:00Z"), TERM, ""),
    ("generation not observed", custom({"observedGeneration": 2}), IP, "LatestGenerationNotObserved"),
    ("observedGeneration absent skips the check", custom({"conditions": []}), CUR, ""),
    (
        "reconciling true",
        custom({"observedGeneration": 3, "conditions": [cond("Reconciling", "True", "Progressing")]}),
        IP,
        "Progressing",
    ),
    (
        "stalled true",
        custom({"observedGeneration": 3, "conditions": [cond("Stalled", "True", "BadConfig", "x")]}),
        FAIL,
        "BadConfig",
    ),
    ("stalled false is ignored", custom({"conditions": [cond("Stalled", "False")]}), CUR, ""),
    ("ready true", custom({"conditions": [cond("Ready", "True")]}), CUR, ""),
    ("ready false", custom({"conditions": [cond("Ready", "False", "Failing")]}), IP, "Failing"),
    ("ready unknown", custom({"conditions": [cond("Ready", "Unknown", "Progressing")]}), IP, "Progressing"),
    ("no conditions at all", custom(), CUR, ""),
    (
        "reconciling before ready in list order",
        custom({"conditions": [cond("Ready", "True"), cond("Reconciling", "True", "R")]}),
        IP,
        "R",
    ),
    (
        "namespace active",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}, "status": {"phase": "Active"}},
        CUR,
        "",
    ),
    (
        "namespace terminating",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Terminating"},
        },
        TERM,
        "",
    ),
    # Deployment
    ("deployment available", deployment(status=DEPLOY_OK), CUR, ""),
    (
        "deployment new generation",
        deployment(status={**DEPLOY_OK, "observedGeneration": 1}),
        IP,
        "LatestGenerationNotObserved",
    ),
    ("deployment less replicas", deployment(status={**DEPLOY_OK, "replicas": 1}), IP, "LessReplicas"),
    ("deployment less updated", deployment(status={**DEPLOY_OK, "updatedReplicas": 2}), IP, "LessUpdated"),
    ("deployment extra pods", deployment(status={**DEPLOY_OK, "replicas": 4}), IP, "ExtraPods"),
    ("deployment less available", deployment(status={**DEPLOY_OK, "availableReplicas": 2}), IP, "LessAvailable"),
    ("deployment less ready", deployment(status={**DEPLOY_OK, "readyReplicas": 2}), IP, "LessReady"),
    (
        "deployment deadline exceeded",
        deployment(status={**DEPLOY_OK, "conditions": [cond("Progressing", "False", "ProgressDeadlineExceeded")]}),
        FAIL,
        "ProgressDeadlineExceeded",
    ),
    (
        "deployment rs not available",
        deployment(
            status={
                **DEPLOY_OK,
                "conditions": [cond("Available", "True"), cond("Progressing", "True", "ReplicaSetUpdated")],
            }
        ),
        IP,
        "ReplicaSetNotAvailable",
    ),
    (
        "deployment not available",
        deployment(status={**DEPLOY_OK, "conditions": [cond("Progressing", "True", "NewReplicaSetAvailable")]}),
        IP,
        "DeploymentNotAvailable",
    ),
    (
        "deployment without deadline",
        deployment(
            spec={"progressDeadlineSeconds": None}, status={**DEPLOY_OK, "conditions": [cond("Available", "True")]}
        ),
        CUR,
        "",
    ),
    ("deployment default one replica", deployment(spec={"replicas": None}, status={}), IP, "LessReplicas"),
    (
        "deployment scaled to zero",
        deployment(
            spec={"replicas": 0},
            status={
                "observedGeneration": 2,
                "conditions": [cond("Available", "True"), cond("Progressing", "True", "NewReplicaSetAvailable")],
            },
        ),
        CUR,
        "",
    ),
    # StatefulSet
    ("sts ready", sts(status=STS_OK), CUR, ""),
    ("sts on delete", sts(spec={"updateStrategy": {"type": "OnDelete"}}, status={}), CUR, ""),
    ("sts less replicas", sts(status={**STS_OK, "replicas": 1}), IP, "LessReplicas"),
    ("sts less ready", sts(status={**STS_OK, "readyReplicas": 1}), IP, "LessReady"),
    ("sts extra pods", sts(status={**STS_OK, "replicas": 3}), IP, "ExtraPods"),
    (
        "sts partition rolling",
        sts(spec={"updateStrategy": {"rollingUpdate": {"partition": 1}}}, status={**STS_OK, "updatedReplicas": 0}),
        IP,
        "PartitionRollout",
    ),
    (
        "sts partition done",
        sts(spec={"updateStrategy": {"rollingUpdate": {"partition": 1}}}, status={**STS_OK, "updatedReplicas": 1}),
        CUR,
        "",
    ),
    ("sts less current", sts(status={**STS_OK, "currentReplicas": 1}), IP, "LessCurrent"),
    ("sts revision mismatch", sts(status={**STS_OK, "updateRevision": "db-2"}), IP, "RevisionMismatch"),
    # DaemonSet
    ("ds ready", ds(DS_OK), CUR, ""),
    ("ds no generation", ds(DS_OK, gen=None), IP, "NoGeneration"),
    (
        "ds no observed generation",
        ds({k: v for k, v in DS_OK.items() if k != "observedGeneration"}),
        IP,
        "NoObservedGeneration",
    ),
    ("ds no desired", ds({"observedGeneration": 1}), IP, "NoDesiredNumber"),
    ("ds less current", ds({**DS_OK, "currentNumberScheduled": 2}), IP, "LessCurrent"),
    ("ds less updated", ds({**DS_OK, "updatedNumberScheduled": 2}), IP, "LessUpdated"),
    ("ds less available", ds({**DS_OK, "numberAvailable": 2}), IP, "LessAvailable"),
    ("ds less ready", ds({**DS_OK, "numberReady": 2}), IP, "LessReady"),
    # ReplicaSet
    ("rs ready", rs(RS_OK), CUR, ""),
    (
        "rs replica failure",
        rs({**RS_OK, "conditions": [cond("ReplicaFailure", "True", "FailedCreate")]}),
        IP,
        "ReplicaFailure",
    ),
    ("rs less labelled", rs({**RS_OK, "fullyLabeledReplicas": 1}), IP, "LessLabelled"),
    ("rs less available", rs({**RS_OK, "availableReplicas": 1}), IP, "LessAvailable"),
    ("rs less ready", rs({**RS_OK, "readyReplicas": 1}), IP, "LessReady"),
    ("rs extra pods", rs({**RS_OK, "replicas": 3}), IP, "ExtraPods"),
    # Pod
    ("pod succeeded", pod("Succeeded"), CUR, ""),
    ("pod failed phase is current", pod("Failed"), CUR, ""),
    ("pod running ready", pod("Running", [cond("Ready", "True")]), CUR, ""),
    ("pod running not ready", pod("Running", [cond("Ready", "False")]), IP, "PodRunningNotReady"),
    (
        "pod crash looping",
        pod(
            "Running",
            [cond("Ready", "False")],
            containers=[{"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
        ),
        FAIL,
        "ContainerCrashLooping",
    ),
    (
        "pod unschedulable young",
        pod("Pending", [cond("PodScheduled", "False", "Unschedulable")], created="2026-01-01T11:59:50Z"),
        IP,
        "PodNotScheduled",
    ),
    (
        "pod unschedulable old",
        pod("Pending", [cond("PodScheduled", "False", "Unschedulable")]),
        FAIL,
        "PodUnschedulable",
    ),
    ("pod pending", pod("Pending"), IP, "PodPending"),
    ("pod no phase", pod(""), IP, "PodNotObserved"),
    # Job (kstatus rule)
    ("job complete", job([cond("Complete", "True")]), CUR, ""),
    ("job failed", job([cond("Failed", "True", "BackoffLimitExceeded")]), FAIL, "JobFailed"),
    ("job not started", job(started=False), IP, "JobNotStarted"),
    ("job running is current for kstatus", job(), CUR, ""),
    # others
    ("cronjob", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}}, CUR, ""),
    (
        "pvc bound",
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "d"}, "status": {"phase": "Bound"}},
        CUR,
        "",
    ),
    (
        "pvc pending",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "d"},
            "status": {"phase": "Pending"},
        },
        IP,
        "NotBound",
    ),
    (
        "service clusterip",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1"},
        },
        CUR,
        "",
    ),
    (
        "service lb without ip",
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer"}},
        IP,
        "NoIPAssigned",
    ),
    (
        "service lb with cluster ip",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.2"},
            "status": {"loadBalancer": {}},
        },
        CUR,
        "",
    ),
    (
        "pdb",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "p", "generation": 1},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 0},
        },
        CUR,
        "",
    ),
    (
        "pdb not observed",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "p", "generation": 2},
            "status": {"observedGeneration": 1},
        },
        IP,
        "LatestGenerationNotObserved",
    ),
    ("crd established", crd([cond("NamesAccepted", "True"), cond("Established", "True")]), CUR, ""),
    ("crd installing", crd([cond("Established", "False", "Installing")]), IP, "Installing"),
    ("crd no conditions", crd([]), IP, "Installing"),
    (
        "crd names conflict",
        crd([cond("NamesAccepted", "False", "MultipleNamesNotAllowed")]),
        FAIL,
        "MultipleNamesNotAllowed",
    ),
    ("crd not established", crd([cond("Established", "False", "NotAccepted")]), FAIL, "NotAccepted"),
    ("secret", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}, CUR, ""),
    ("configmap", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, CUR, ""),
    (
        "extensions deployment uses the deployment rule",
        {**deployment(status={}), "apiVersion": "extensions/v1beta1"},
        IP,
        "LessReplicas",
    ),
    (
        "helmrelease ready",
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": "h", "generation": 4},
            "status": {"observedGeneration": 4, "conditions": [cond("Ready", "True", "Succeeded")]},
        },
        CUR,
        "",
    ),
]


@pytest.mark.parametrize(("name", "obj", "status", "reason"), CASES, ids=[c[0] for c in CASES])
def test_compute(name: str, obj: dict[str, Any], status: Status, reason: str) -> None:
    result = compute(obj, now=NOW)
    assert result.status is status, result
    if reason:
        assert result.reason == reason


def test_at_least_forty_cases() -> None:
    assert len(CASES) >= 40


def test_messages_match_upstream() -> None:
    assert compute(deployment(status={**DEPLOY_OK, "readyReplicas": 1}), now=NOW).message == "Ready: 1/3"
    assert compute(custom({"observedGeneration": 2}), now=NOW).message == (
        "Widget generation is 3, but latest observed generation is 2"
    )
    assert (
        compute(
            pod(
                "Running",
                containers=[
                    {"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                    {"name": "b", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                ],
            ),
            now=NOW,
        ).message
        == "Containers in CrashLoop state: a,b"
    )


@pytest.mark.parametrize(
    "obj",
    [
        custom({"observedGeneration": "two"}),
        custom({"conditions": "Ready"}),
        pod("Exploded"),
    ],
)
def test_malformed_objects_raise(obj: dict[str, Any]) -> None:
    with pytest.raises(KStatusError):
        compute(obj, now=NOW)


@pytest.mark.parametrize(
    ("conditions", "status"),
    [
        ([cond("Complete", "True")], CUR),
        ([cond("Failed", "True")], FAIL),
        ([], IP),
        ([cond("Suspended", "True")], IP),
    ],
)
def test_flux_job_reader(conditions: list[dict[str, str]], status: Status) -> None:
    assert compute_flux_job(job(conditions)).status is status


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], CUR),
        ([CUR, CUR], CUR),
        ([CUR, IP], IP),
        ([CUR, Status.UNKNOWN, IP], Status.UNKNOWN),
        ([Status.UNKNOWN, FAIL], FAIL),
        ([Status.NOT_FOUND], IP),
        ([TERM, CUR], IP),
    ],
)
def test_aggregate(statuses: list[Status], expected: Status) -> None:
    assert aggregate(statuses) is expected
