"""The typed round trip (``apply/typed.py``): what upstream's client-go conversion drops and writes out.

Each expectation is what kustomize-controller v1.9.4 applied for the same manifest on kube-apiserver
v1.36.3 (the differential run, ``conformance/``: its field manager owns ``f:strategy``, ``f:resources``,
a Job template's ``f:metadata`` and a Namespace's ``f:spec``)."""

from __future__ import annotations

import copy
from typing import Any

from kustomize_controller.apply.normalize import normalize_object
from kustomize_controller.apply.typed import normalize_typed, root_type


def deployment(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": "app:1"},
                                                          {"name": "side", "image": "side:1"}]}}, **spec}}


def test_absent_structs_are_written_out() -> None:
    obj = deployment()
    assert normalize_typed(obj)
    assert obj["spec"]["strategy"] == {}
    assert [c["resources"] for c in obj["spec"]["template"]["spec"]["containers"]] == [{}, {}]
    assert obj["status"] == {}  # as the round trip writes it; normalize_object then drops it


def test_what_is_there_is_kept() -> None:
    obj = deployment(strategy={"type": "Recreate"}, replicas=0)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1000m"}}
    normalize_typed(obj)
    assert obj["spec"]["strategy"] == {"type": "Recreate"}
    assert obj["spec"]["replicas"] == 0
    # values are not re-encoded: the server canonicalises quantities, ownership does not depend on them
    assert obj["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1000m"}}


def test_fields_the_struct_lacks_are_dropped_at_any_depth() -> None:
    obj = deployment(replica=2)
    obj["metadata"]["label"] = {"typo": "x"}
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    obj["extra"] = True
    normalize_typed(obj)
    assert "replica" not in obj["spec"]
    assert "label" not in obj["metadata"]
    assert "imagePullPolice" not in obj["spec"]["template"]["spec"]["containers"][0]
    assert "extra" not in obj


def test_pod_templates_namespaces_and_jobs() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}
    normalize_object(job)
    assert job["spec"]["template"]["metadata"] == {}
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == {}
    assert "status" not in job
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    normalize_object(namespace)
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "spec": {}}


def test_maps_and_free_form_fields() -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}},
              "data": {"k": "v"}, "binaryData": {"b": "AA=="}}
    before = copy.deepcopy(config)
    normalize_typed(config)
    assert config == before  # no struct-valued fields to write, nothing unknown
    # list items are structs of their own (a claim template: its spec.resources and status)
    claim = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
             "spec": {"serviceName": "s", "selector": {}, "template": {"spec": {"containers": []}},
                      "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                                "spec": {"accessModes": ["ReadWriteOnce"]}}]}}
    normalize_typed(claim)
    template = claim["spec"]["volumeClaimTemplates"][0]
    assert template["spec"]["resources"] == {} and template["status"] == {}
    assert claim["spec"]["updateStrategy"] == {}


def test_kinds_the_scheme_lacks_are_left_alone() -> None:
    for api_version, kind in (("example.com/v1", "Widget"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                              ("apps/v1", "NoSuchKind")):
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {"anything": 1}}
        before = copy.deepcopy(obj)
        assert not normalize_typed(obj)
        assert obj == before
    assert root_type("apps/v1", "Deployment") == "io.k8s.api.apps.v1.Deployment"


def test_roles_keep_their_rules_as_upstream() -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "typo": 1}]}
    before = copy.deepcopy(role)
    normalize_object(role)
    assert role == before  # upstream skips Role and ClusterRole (fluxcd/kustomize-controller#1041)


def test_a_service_port_without_target_port_gets_zero() -> None:
    # intstr.IntOrString is a value in ServicePort: the round trip writes 0 (the server defaults it to the
    # port), and upstream owns targetPort; pointer int-or-strings (maxSurge) stay absent
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    normalize_object(svc)
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 0}]
    obj = deployment(strategy={"rollingUpdate": {}})
    normalize_typed(obj)
    assert obj["spec"]["strategy"]["rollingUpdate"] == {}
