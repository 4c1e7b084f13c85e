"""Defaulting of built-in kinds, as kube-apiserver v1.36 does it: on create, update, apply and dry-run alike.

Plain HTTP, no embedded-server extras: every test here holds on a real cluster too.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from .helpers import APPLY, MERGE, call, deployment, manager_entries

pytestmark = pytest.mark.integration

POD_SPEC_DEFAULTS = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
}
CONTAINER_DEFAULTS = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
    "imagePullPolicy": "IfNotPresent",
}


def _path(ns: str, plural: str, name: str = "", *, group: str = "apps/v1") -> str:
    base = f"/api/v1/namespaces/{ns}/{plural}" if group == "v1" else f"/apis/{group}/namespaces/{ns}/{plural}"
    return f"{base}/{name}" if name else base


async def _settled(http: Any, path: str, *, within: float = 30.0) -> dict[str, Any]:
    """The object once a real cluster's own controllers have done writing it (the Deployment controller
    writes a new Deployment's status once or twice): two reads half a second apart with one resourceVersion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    _, last = await call(http, "GET", path)
    while True:
        await asyncio.sleep(0.5)
        _, now = await call(http, "GET", path)
        if now["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"] or loop.time() > deadline:
            return dict(now)
        last = now


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}], **spec}}


async def test_service_defaults(cluster) -> None:
    ns = cluster.namespace
    async with cluster.session() as http:
        status, svc = await call(http, "POST", _path(ns, "services", group="v1"), body=_service("web"))
    assert status == 201, svc
    spec = svc["spec"]
    assert spec["sessionAffinity"] == "None"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["type"] == "ClusterIP"
    assert spec["ports"] == [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]


async def test_deployment_defaults_and_pod_template_defaults(cluster) -> None:
    ns = cluster.namespace
    body = deployment("web", image="nginx:1.27")
    body["spec"].pop("replicas")
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    async with cluster.session() as http:
        status, obj = await call(http, "POST", _path(ns, "deployments"), body=body)
    assert status == 201, obj
    spec = obj["spec"]
    assert spec["replicas"] == 1
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    pod = spec["template"]["spec"]
    assert {k: pod[k] for k in POD_SPEC_DEFAULTS} == POD_SPEC_DEFAULTS
    container = pod["containers"][0]
    assert {k: container[k] for k in CONTAINER_DEFAULTS} == CONTAINER_DEFAULTS
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"), ("nginx:latest", "Always"), ("registry.local:5000/nginx", "Always"),
    ("nginx:1.27", "IfNotPresent"), ("registry.local:5000/nginx:1.27", "IfNotPresent"),
    ("nginx@sha256:" + "a" * 64, "IfNotPresent"),
])
async def test_image_pull_policy_follows_the_tag(cluster, image: str, policy: str) -> None:
    async with cluster.session() as http:
        status, obj = await call(http, "POST", _path(cluster.namespace, "deployments"),
                                 body=deployment("web", image=image), params={"dryRun": "All"})
    assert status == 201, obj
    assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy


def _template(name: str, *, restart: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": name}}, "spec": spec}


def _pod_template_kinds(name: str) -> list[tuple[str, str, dict[str, Any], tuple[str, ...]]]:
    selector = {"matchLabels": {"app": name}}
    return [
        ("apps/v1", "statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
                                     "spec": {"serviceName": name, "selector": selector,
                                              "template": _template(name)}}, ("spec", "template", "spec")),
        ("apps/v1", "daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
                                   "spec": {"selector": selector, "template": _template(name)}},
         ("spec", "template", "spec")),
        ("apps/v1", "replicasets", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
                                    "spec": {"replicas": 0, "selector": selector, "template": _template(name)}},
         ("spec", "template", "spec")),
        ("batch/v1", "jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                              "spec": {"suspend": True, "template": _template(name, restart="Never")}},
         ("spec", "template", "spec")),
        ("batch/v1", "cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
                                  "spec": {"schedule": "0 0 1 1 *", "suspend": True,
                                           "jobTemplate": {"spec": {"template": _template(name, restart="Never")}}}},
         ("spec", "jobTemplate", "spec", "template", "spec")),
        ("v1", "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                        "spec": _template(name)["spec"]}, ("spec",)),
        ("v1", "replicationcontrollers", {"apiVersion": "v1", "kind": "ReplicationController",
                                          "metadata": {"name": name},
                                          "spec": {"replicas": 0, "template": _template(name)}},
         ("spec", "template", "spec")),
        ("v1", "podtemplates", {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
                                "template": _template(name)}, ("template", "spec")),
        ("apps/v1", "deployments", deployment(name), ("spec", "template", "spec")),
    ]


POD_TEMPLATE_KINDS = ["StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod", "ReplicationController",
                      "PodTemplate", "Deployment"]


async def _create(http: Any, ns: str, group: str, plural: str, body: dict[str, Any],
                  params: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    for _ in range(50):
        status, obj = await call(http, "POST", _path(ns, plural, group=group), body=body, params=params)
        # a real cluster refuses Pods until its controller has made the namespace's default
        # ServiceAccount (admission); the embedded server has no such admission
        if status != 403 or "service account" not in str(obj.get("message")):
            break
        await asyncio.sleep(0.2)
    return status, obj


@pytest.mark.parametrize("index", range(len(POD_TEMPLATE_KINDS)), ids=POD_TEMPLATE_KINDS)
async def test_pod_template_defaults_apply_to_every_workload_kind(cluster, index: int) -> None:
    group, plural, body, where = _pod_template_kinds("w")[index]
    async with cluster.session() as http:
        status, obj = await _create(http, cluster.namespace, group, plural, body)
    assert status == 201, obj
    pod: Any = obj
    for key in where:
        pod = pod[key]
    expected = dict(POD_SPEC_DEFAULTS)
    if plural in ("jobs", "cronjobs"):
        expected["restartPolicy"] = "Never"  # set by the manifest: Jobs may not restart Always
    assert {k: pod[k] for k in expected} == expected
    assert {k: pod["containers"][0][k] for k in CONTAINER_DEFAULTS} == CONTAINER_DEFAULTS


async def test_workload_kind_defaults(cluster) -> None:
    ns = cluster.namespace
    kinds = {plural: body for _, plural, body, _ in _pod_template_kinds("k")}
    async with cluster.session() as http:
        _, sts = await call(http, "POST", _path(ns, "statefulsets"), body=kinds["statefulsets"])
        _, ds = await call(http, "POST", _path(ns, "daemonsets"), body=kinds["daemonsets"])
        _, job = await call(http, "POST", _path(ns, "jobs", group="batch/v1"), body=kinds["jobs"])
        _, cron = await call(http, "POST", _path(ns, "cronjobs", group="batch/v1"), body=kinds["cronjobs"])
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["revisionHistoryLimit"] == 10
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert ds["spec"]["updateStrategy"] == {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert ds["spec"]["revisionHistoryLimit"] == 10
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["backoffLimit"]) == (1, 1, 6)
    assert job["spec"]["completionMode"] == "NonIndexed"
    # the Job strategy: a selector and pod labels generated from the uid; a Job without labels of its own
    # takes its template's, generated ones included
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    generated = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "k",
                 "controller-uid": uid, "job-name": "k"}
    assert job["spec"]["template"]["metadata"]["labels"] == {"app": "k", **generated}
    assert job["metadata"]["labels"] == {"app": "k", **generated}
    assert cron["spec"]["concurrencyPolicy"] == "Allow"
    assert (cron["spec"]["successfulJobsHistoryLimit"], cron["spec"]["failedJobsHistoryLimit"]) == (3, 1)


async def test_a_job_with_labels_of_its_own_keeps_them(cluster) -> None:
    _, plural, body, _ = _pod_template_kinds("own")[POD_TEMPLATE_KINDS.index("Job")]
    body["metadata"]["labels"] = {"team": "a"}
    async with cluster.session() as http:
        status, job = await call(http, "POST", _path(cluster.namespace, plural, group="batch/v1"), body=body)
    assert status == 201, job
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["spec"]["template"]["metadata"]["labels"]["job-name"] == "own"


def _resources(container: dict[str, Any]) -> dict[str, Any]:
    return container["resources"]


RESOURCES_IN = {"limits": {"cpu": 2, "memory": "2048Ki", "ephemeral-storage": "1e3"},
                "requests": {"cpu": "1.5", "memory": "1024Ki"}}
RESOURCES_OUT = {"limits": {"cpu": "2", "memory": "2Mi", "ephemeral-storage": "1e3"},
                 "requests": {"cpu": "1500m", "memory": "1Mi"}}


def _with_resources(name: str, resources: dict[str, Any]) -> dict[str, Any]:
    body = deployment(name)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = copy.deepcopy(resources)
    return body


async def test_quantities_are_canonical_on_create_update_patch_apply_and_dry_run(cluster) -> None:
    ns = cluster.namespace
    container = ("spec", "template", "spec", "containers")
    async with cluster.session() as http:
        status, dry = await call(http, "POST", _path(ns, "deployments"), body=_with_resources("q", RESOURCES_IN),
                                 params={"dryRun": "All"})
        assert status == 201 and _resources(dry["spec"]["template"]["spec"]["containers"][0]) == RESOURCES_OUT
        status, created = await call(http, "POST", _path(ns, "deployments"), body=_with_resources("q", RESOURCES_IN))
        assert status == 201 and _resources(created["spec"]["template"]["spec"]["containers"][0]) == RESOURCES_OUT

        # update (PUT) with a new non-canonical value; a real cluster's Deployment controller writes the status
        # meanwhile, so the PUT is made on the latest read and retried on a conflict
        for _ in range(20):
            _, latest = await call(http, "GET", _path(ns, "deployments", "q"))
            body = copy.deepcopy(latest)
            body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000m"
            status, updated = await call(http, "PUT", _path(ns, "deployments", "q"), body=body)
            if status != 409:
                break
        assert status == 200, updated
        assert updated["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"

        # merge patch
        patch: dict[str, Any] = {"spec": {"template": {"spec": {"containers": None}}}}
        merged = _with_resources("q", {"limits": {"memory": "1024Mi"}})
        patch["spec"]["template"]["spec"]["containers"] = merged["spec"]["template"]["spec"]["containers"]
        status, patched = await call(http, "PATCH", _path(ns, "deployments", "q"), body=patch, content_type=MERGE)
        assert status == 200, patched
        assert patched["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"memory": "1Gi"}}

        # server-side apply (and its dry-run): same canonical answer
        force = {"fieldManager": "ssa", "force": "true"}
        for params in ({**force, "dryRun": "All"}, force):
            status, applied = await call(http, "PATCH", _path(ns, "deployments", "a"),
                                         body=_with_resources("a", RESOURCES_IN), content_type=APPLY, params=params)
            assert status in (200, 201), applied
            live: Any = applied
            for key in container:
                live = live[key]
            assert _resources(live[0]) == RESOURCES_OUT


# requests above their limits, in non-canonical spelling: the causes print both canonical
OVER_LIMITS = {"limits": {"cpu": "1.5", "memory": "2048Ki"}, "requests": {"cpu": 2, "memory": "1024Mi"}}


def _invalid_requests(where: str, *pairs: tuple[str, str]) -> list[dict[str, str]]:
    return sorted(({"reason": "FieldValueInvalid", "field": f"{where}.resources.requests",
                    "message": f'Invalid value: "{value}": must be {detail}'} for value, detail in pairs),
                  key=lambda cause: cause["message"])


def _causes(body: dict[str, Any]) -> list[dict[str, str]]:
    return sorted(body["details"]["causes"], key=lambda cause: cause["message"])


@pytest.mark.parametrize("index", range(len(POD_TEMPLATE_KINDS)), ids=POD_TEMPLATE_KINDS)
async def test_requests_above_limits_are_refused_for_every_pod_template_kind(cluster, index: int) -> None:
    group, plural, body, where = _pod_template_kinds("over")[index]
    pod_spec: Any = body
    for key in where:
        pod_spec = pod_spec[key]
    pod_spec["containers"][0]["resources"] = copy.deepcopy(OVER_LIMITS)
    async with cluster.session() as http:
        status, refused = await _create(http, cluster.namespace, group, plural, body)
    assert (status, refused["reason"]) == (422, "Invalid"), refused
    field = ".".join(where) + ".containers[0]"
    assert _causes(refused) == _invalid_requests(field, ("2", "less than or equal to cpu limit of 1500m"),
                                                 ("1Gi", "less than or equal to memory limit of 2Mi"))
    # the real server walks a Go map: the two causes come in either order
    qualified = body["kind"] + ("." + group.split("/")[0] if "/" in group else "")
    assert refused["message"].startswith(f'{qualified} "over" is invalid: [')
    for cause in refused["details"]["causes"]:
        assert f'{cause["field"]}: {cause["message"]}' in refused["message"]


async def test_requests_are_checked_for_init_containers_updates_dry_runs_and_extended_resources(cluster) -> None:
    ns = cluster.namespace
    template = ("spec", "template", "spec")
    body = deployment("lim")
    body["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox:1.36", "resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}}}]
    async with cluster.session() as http:
        status, refused = await call(http, "POST", _path(ns, "deployments"), body=body, params={"dryRun": "All"})
        assert status == 422, refused
        assert _causes(refused) == _invalid_requests(".".join(template) + ".initContainers[0]",
                                                     ("1", "less than or equal to cpu limit of 500m"))

        # requests equal to limits are fine; an update that raises a request above its limit is not
        body = _with_resources("lim", {"limits": {"cpu": "1", "memory": "1Gi"},
                                       "requests": {"cpu": "1000m", "memory": "1024Mi"}})
        status, created = await call(http, "POST", _path(ns, "deployments"), body=body)
        assert status == 201, created
        # on a real cluster the Deployment controller writes the status meanwhile: the update is made on the
        # settled object, so that what refuses it is the validation, not the resourceVersion
        update = copy.deepcopy(await _settled(http, _path(ns, "deployments", "lim")))
        update["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1025Mi"
        status, refused = await call(http, "PUT", _path(ns, "deployments", "lim"), body=update)
        assert status == 422, refused
        assert _causes(refused) == _invalid_requests(".".join(template) + ".containers[0]",
                                                     ("1025Mi", "less than or equal to memory limit of 1Gi"))

        # an extended resource may not be overcommitted: its request must equal its limit
        body = _with_resources("gpu", {"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "1"}})
        status, refused = await call(http, "POST", _path(ns, "deployments"), body=body, params={"dryRun": "All"})
        assert status == 422, refused
        assert _causes(refused) == _invalid_requests(".".join(template) + ".containers[0]",
                                                     ("1", "equal to example.com/gpu limit of 2"))


async def test_malformed_quantity_is_a_bad_request(cluster) -> None:
    async with cluster.session() as http:
        status, body = await call(http, "POST", _path(cluster.namespace, "deployments"),
                                  body=_with_resources("bad", {"limits": {"cpu": "lots"}}))
    assert status == 400, body
    assert body["reason"] == "BadRequest"
    assert "quantities must match the regular expression" in body["message"]


async def test_namespace_label_is_set_on_create_and_kept_on_every_write(cluster) -> None:
    name = f"{cluster.namespace}-label"
    async with cluster.session() as http:
        try:
            status, created = await call(http, "POST", "/api/v1/namespaces",
                                         body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            assert status == 201, created
            assert created["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
            body = copy.deepcopy(created)
            body["metadata"]["labels"] = {"team": "a"}
            status, updated = await call(http, "PUT", f"/api/v1/namespaces/{name}", body=body)
            assert status == 200, updated
            assert updated["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": name}
            status, patched = await call(http, "PATCH", f"/api/v1/namespaces/{name}", content_type=MERGE,
                                         body={"metadata": {"labels": {"kubernetes.io/metadata.name": None}}})
            assert status == 200, patched
            assert patched["metadata"]["labels"]["kubernetes.io/metadata.name"] == name
        finally:
            await call(http, "DELETE", f"/api/v1/namespaces/{name}")


async def test_defaults_are_owned_by_an_update_but_not_by_an_applier(cluster) -> None:
    """What drift detection relies on: a dry-run apply of an unchanged manifest equals the live object."""
    ns = cluster.namespace
    manifest = deployment("owned")
    async with cluster.session() as http:
        params = {"fieldManager": "applier"}
        status, live = await call(http, "PATCH", _path(ns, "deployments", "owned"), body=manifest,
                                  content_type=APPLY, params=params)
        assert status == 201, live
        live = await _settled(http, _path(ns, "deployments", "owned"))  # a real cluster writes the status
        status, again = await call(http, "PATCH", _path(ns, "deployments", "owned"), body=manifest,
                                   content_type=APPLY, params={**params, "dryRun": "All"})
        assert status == 200, again
        assert again["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
        assert again["spec"] == live["spec"]
        applier = manager_entries(live)[("applier", "Apply")]["fieldsV1"]["f:spec"]
        assert "f:revisionHistoryLimit" not in applier and "f:strategy" not in applier
        status, created = await call(http, "POST", _path(ns, "deployments"), body=deployment("created"),
                                     params={"fieldManager": "creator"})
        assert status == 201, created
        creator = manager_entries(created)[("creator", "Update")]["fieldsV1"]["f:spec"]
        assert "f:revisionHistoryLimit" in creator and "f:progressDeadlineSeconds" in creator
        assert "f:dnsPolicy" in creator["f:template"]["f:spec"]
