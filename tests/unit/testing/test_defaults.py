"""The defaulting tables: what is filled, what is kept, and the kind-specific conditions."""

from __future__ import annotations

import copy
from typing import Any

from kustomize_controller.testing.apiserver.defaults import apply_defaults


def defaulted(group: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    apply_defaults(group, kind, obj)
    return obj


def test_values_that_are_set_are_kept_even_when_zero() -> None:
    obj = defaulted("apps", "Deployment", {"spec": {"replicas": 0, "revisionHistoryLimit": 0,
                                                    "strategy": {"type": "Recreate"}}})
    assert obj["spec"]["replicas"] == 0 and obj["spec"]["revisionHistoryLimit"] == 0
    assert obj["spec"]["strategy"] == {"type": "Recreate"}  # no rollingUpdate for Recreate


def test_service_conditions() -> None:
    external = defaulted("", "Service", {"spec": {"type": "ExternalName", "externalName": "example.com"}})
    assert "ipFamilies" not in external["spec"] and "internalTrafficPolicy" not in external["spec"]
    headless = defaulted("", "Service", {"spec": {"clusterIP": "None"}})
    assert headless["spec"]["ipFamilyPolicy"] == "RequireDualStack"
    sticky = defaulted("", "Service", {"spec": {"sessionAffinity": "ClientIP", "type": "LoadBalancer",
                                                "ports": [{"port": 443, "targetPort": "https"}]}})
    assert sticky["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}
    assert sticky["spec"]["externalTrafficPolicy"] == "Cluster"
    assert sticky["spec"]["allocateLoadBalancerNodePorts"] is True
    assert sticky["spec"]["ports"] == [{"port": 443, "targetPort": "https", "protocol": "TCP"}]


def test_pod_requests_default_to_limits_but_templates_do_not() -> None:
    container = {"name": "c", "image": "x:1", "resources": {"limits": {"cpu": "1000m"}}}
    pod = defaulted("", "Pod", {"spec": {"containers": [copy.deepcopy(container)]}})
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
    assert pod["spec"]["enableServiceLinks"] is True
    rs = defaulted("apps", "ReplicaSet", {"spec": {"template": {"spec": {"containers": [copy.deepcopy(container)]}}}})
    assert rs["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}


def test_probes_volumes_and_field_refs() -> None:
    pod = defaulted("", "Pod", {"spec": {
        "containers": [{"name": "c", "image": "x", "livenessProbe": {"httpGet": {"port": 80}},
                        "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "v", "configMap": {"name": "cm"}}, {"name": "s", "secret": {"secretName": "s"}},
                    {"name": "h", "hostPath": {"path": "/tmp"}}],
    }})
    container = pod["spec"]["containers"][0]
    assert container["livenessProbe"] == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                                          "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                          "failureThreshold": 3}
    assert container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    volumes = pod["spec"]["volumes"]
    assert volumes[0]["configMap"]["defaultMode"] == volumes[1]["secret"]["defaultMode"] == 420
    assert pod["spec"]["volumes"][2]["hostPath"] == {"path": "/tmp", "type": ""}


def test_job_parallelism_and_network_policy_types() -> None:
    job = defaulted("batch", "Job", {"spec": {"parallelism": 3, "template": {"spec": {"containers": []}}}})
    assert "completions" not in job["spec"] and job["spec"]["parallelism"] == 3
    assert job["spec"]["podReplacementPolicy"] == "TerminatingOrFailed"
    policy = defaulted("networking.k8s.io", "NetworkPolicy", {"spec": {"egress": [{"ports": [{"port": 53}]}]}})
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"][0]["ports"] == [{"port": 53, "protocol": "TCP"}]


def test_unknown_kinds_and_malformed_shapes_are_left_alone() -> None:
    assert defaulted("example.com", "Widget", {"spec": {}}) == {"spec": {}}
    assert defaulted("apps", "Deployment", {"spec": "nonsense"}) == {"spec": "nonsense"}
    ns = defaulted("", "Namespace", {"metadata": {"name": "a", "labels": {"kubernetes.io/metadata.name": "b"}}})
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "a"}
