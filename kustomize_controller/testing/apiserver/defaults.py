"""Defaulting of built-in kinds, as kube-apiserver v1.36 does it on every write.

The real server decodes every request body into its Go type and runs the type's ``SetDefaults_*``
functions, so a create, an update, a patch, an apply and their dry-runs all store (and answer with)
the same defaulted object. Drift detection depends on that: a dry-run of an unchanged manifest must
come back equal to the live object, defaults included.

Contract:
- ``apply_defaults(group, kind, obj)`` fills, in place, every field the table of that kind names and
  the object leaves unset (a field that is set, even to a zero value, is kept), and rewrites resource
  quantities in canonical form (quantity.py; resource lists round up to milli units, as
  ``SetDefaults_ResourceList`` does). A malformed quantity raises ``ValueError``.
- The tables are data: ``Set`` (a constant), ``Compute`` (a value derived from the node, e.g. a Service
  port's ``targetPort``), ``Nested`` (the rules of a sub-object, when it exists or ``create`` is set),
  ``Each`` (the rules of every item of a list), ``Quantities`` (every value of a resource map).
- The pod template tables are shared by Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
  CronJob and ReplicationController, as the real server's generated defaulters share them.

Not promised (listed in docs/testing.md): admission plugins (a Pod's service account, tolerations,
priority), feature-gated defaults whose state in v1.36 we did not observe (StatefulSet
``maxUnavailable``). A Job's generated selector is the create strategy's work (objects.py), not a default.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .quantity import canonical

Node = dict[str, Any]
Path = tuple[str, ...]


@dataclass(frozen=True)
class Set:
    """``path`` gets ``value`` when absent (and ``when(node)`` holds)."""

    path: Path
    value: Any
    when: Callable[[Node], bool] | None = None


@dataclass(frozen=True)
class Compute:
    """``path`` gets ``value(node)`` when absent and the function returns something other than None."""

    path: Path
    value: Callable[[Node], Any]


@dataclass(frozen=True)
class Nested:
    """The rules for the object at ``path`` (created empty first when ``create`` and ``when(node)``)."""

    path: Path
    rules: Sequence[Rule]
    create: bool = False
    when: Callable[[Node], bool] | None = None


@dataclass(frozen=True)
class Each:
    """The rules for every object in the list at ``path``."""

    path: Path
    rules: Sequence[Rule]


@dataclass(frozen=True)
class Quantities:
    """Every value of the map at ``path`` in canonical form, rounded up to ``10^scale`` units."""

    path: Path
    scale: int = -3


Rule = Set | Compute | Nested | Each | Quantities


# ------------------------------------------------------------------------------------- core pieces


def _pull_policy(container: Node) -> str:
    """``Always`` for an image without a tag or tagged ``latest`` (and no digest), else ``IfNotPresent``."""
    image = str(container.get("image") or "")
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


RESOURCES: tuple[Rule, ...] = (Quantities(("limits",)), Quantities(("requests",)))
HTTP_GET: tuple[Rule, ...] = (Set(("path",), "/"), Set(("scheme",), "HTTP"))
PROBE: tuple[Rule, ...] = (
    Set(("timeoutSeconds",), 1),
    Set(("periodSeconds",), 10),
    Set(("successThreshold",), 1),
    Set(("failureThreshold",), 3),
    Nested(("httpGet",), HTTP_GET),
)
FIELD_REF: tuple[Rule, ...] = (Set(("apiVersion",), "v1"),)
CONTAINER: tuple[Rule, ...] = (
    Compute(("imagePullPolicy",), _pull_policy),
    Set(("terminationMessagePath",), "/dev/termination-log"),
    Set(("terminationMessagePolicy",), "File"),
    Nested(("resources",), RESOURCES, create=True),
    Each(("ports",), (Set(("protocol",), "TCP"),)),
    Each(("env",), (Nested(("valueFrom", "fieldRef"), FIELD_REF),)),
    Nested(("livenessProbe",), PROBE),
    Nested(("readinessProbe",), PROBE),
    Nested(("startupProbe",), PROBE),
)
KEY_TO_PATH_MODE = 420  # 0644, what kube-apiserver writes for defaultMode
VOLUME: tuple[Rule, ...] = (
    Nested(("configMap",), (Set(("defaultMode",), KEY_TO_PATH_MODE),)),
    Nested(("secret",), (Set(("defaultMode",), KEY_TO_PATH_MODE),)),
    Nested(("projected",), (Set(("defaultMode",), KEY_TO_PATH_MODE),)),
    Nested(("downwardAPI",), (
        Set(("defaultMode",), KEY_TO_PATH_MODE),
        Each(("items",), (Nested(("fieldRef",), FIELD_REF),)),
    )),
    Nested(("hostPath",), (Set(("type",), ""),)),
    Nested(("emptyDir",), (Quantities(("sizeLimit",), scale=-9),)),
)
POD_SPEC: tuple[Rule, ...] = (
    Set(("restartPolicy",), "Always"),
    Set(("terminationGracePeriodSeconds",), 30),
    Set(("dnsPolicy",), "ClusterFirst"),
    Set(("securityContext",), {}),
    Set(("schedulerName",), "default-scheduler"),
    Each(("containers",), CONTAINER),
    Each(("initContainers",), CONTAINER),
    Each(("volumes",), VOLUME),
)
POD_TEMPLATE: tuple[Rule, ...] = (Nested(("spec",), POD_SPEC),)
PVC_SPEC: tuple[Rule, ...] = (Set(("volumeMode",), "Filesystem"), Nested(("resources",), RESOURCES))


def _limits_as_requests(resources: Node) -> Any:
    """A Pod (not a template) whose container sets limits but not requests requests its limits."""
    return copy.deepcopy(resources["limits"]) if resources.get("limits") else None


POD_ONLY_CONTAINER: tuple[Rule, ...] = (Nested(("resources",), (Compute(("requests",), _limits_as_requests),)),)


# ---------------------------------------------------------------------------------------- services


def _target_port(port: Node) -> Any:
    return port.get("port")


def _not_external_name(spec: Node) -> bool:
    return bool(spec.get("type", "ClusterIP") != "ExternalName")


def _exposes_node_ports(spec: Node) -> bool:
    return spec.get("type") in ("NodePort", "LoadBalancer")


def _ip_family_policy(spec: Node) -> str:
    # a headless Service without a selector asks for every family the cluster has (one here)
    if spec.get("clusterIP") == "None" and not spec.get("selector"):
        return "RequireDualStack"
    return "SingleStack"


SERVICE_SPEC: tuple[Rule, ...] = (
    Set(("sessionAffinity",), "None"),
    Nested(("sessionAffinityConfig", "clientIP"), (Set(("timeoutSeconds",), 10800),), create=True,
           when=lambda spec: spec.get("sessionAffinity") == "ClientIP"),
    Each(("ports",), (Set(("protocol",), "TCP"), Compute(("targetPort",), _target_port))),
    Set(("internalTrafficPolicy",), "Cluster", when=_not_external_name),
    Set(("externalTrafficPolicy",), "Cluster", when=_exposes_node_ports),
    Set(("allocateLoadBalancerNodePorts",), True, when=lambda spec: spec.get("type") == "LoadBalancer"),
    Set(("ipFamilies",), ["IPv4"], when=_not_external_name),
    Compute(("ipFamilyPolicy",), lambda spec: _ip_family_policy(spec) if _not_external_name(spec) else None),
)


def _policy_types(spec: Node) -> list[str]:
    return ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


NETWORK_POLICY_PORTS: tuple[Rule, ...] = (Each(("ports",), (Set(("protocol",), "TCP"),)),)

# ------------------------------------------------------------------------------------------- kinds


def _job_labels(job: Node) -> Any:
    """A Job without labels of its own takes its pod template's (``SetDefaults_Job``)."""
    meta = job.get("metadata") or {}
    if meta.get("labels"):
        return None
    labels = ((job.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels")
    return copy.deepcopy(labels) if labels else None


def _rolling(spec: Node) -> bool:
    return (spec.get("type") or "RollingUpdate") == "RollingUpdate"


KINDS: dict[tuple[str, str], tuple[Rule, ...]] = {
    ("", "Pod"): (Nested(("spec",), (
        *POD_SPEC,
        Set(("enableServiceLinks",), True),
        Each(("containers",), POD_ONLY_CONTAINER),
        Each(("initContainers",), POD_ONLY_CONTAINER),
    )),),
    ("", "PodTemplate"): (Nested(("template",), POD_TEMPLATE),),
    ("", "ReplicationController"): (Nested(("spec",), (
        Set(("replicas",), 1),
        Nested(("template",), POD_TEMPLATE),
    )),),
    ("", "Service"): (Nested(("spec",), SERVICE_SPEC, create=True),),
    ("", "PersistentVolumeClaim"): (Nested(("spec",), PVC_SPEC),),
    ("", "ResourceQuota"): (Nested(("spec",), (Quantities(("hard",)),)),),
    ("", "LimitRange"): (Nested(("spec",), (Each(("limits",), tuple(
        Quantities((key,)) for key in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"))),)),),
    ("apps", "Deployment"): (Nested(("spec",), (
        Set(("replicas",), 1),
        Nested(("strategy",), (
            Set(("type",), "RollingUpdate"),
            Nested(("rollingUpdate",), (Set(("maxUnavailable",), "25%"), Set(("maxSurge",), "25%")),
                   create=True, when=_rolling),
        ), create=True),
        Set(("revisionHistoryLimit",), 10),
        Set(("progressDeadlineSeconds",), 600),
        Nested(("template",), POD_TEMPLATE),
    )),),
    ("apps", "StatefulSet"): (Nested(("spec",), (
        Set(("replicas",), 1),
        Set(("podManagementPolicy",), "OrderedReady"),
        Nested(("updateStrategy",), (
            Set(("type",), "RollingUpdate"),
            Nested(("rollingUpdate",), (Set(("partition",), 0),), create=True, when=_rolling),
        ), create=True),
        Nested(("persistentVolumeClaimRetentionPolicy",), (
            Set(("whenDeleted",), "Retain"), Set(("whenScaled",), "Retain")), create=True),
        Set(("revisionHistoryLimit",), 10),
        Nested(("template",), POD_TEMPLATE),
        Each(("volumeClaimTemplates",), (Nested(("spec",), PVC_SPEC),)),
    )),),
    ("apps", "DaemonSet"): (Nested(("spec",), (
        Nested(("updateStrategy",), (
            Set(("type",), "RollingUpdate"),
            Nested(("rollingUpdate",), (Set(("maxUnavailable",), 1), Set(("maxSurge",), 0)),
                   create=True, when=_rolling),
        ), create=True),
        Set(("revisionHistoryLimit",), 10),
        Nested(("template",), POD_TEMPLATE),
    )),),
    ("apps", "ReplicaSet"): (Nested(("spec",), (
        Set(("replicas",), 1),
        Nested(("template",), POD_TEMPLATE),
    )),),
    ("batch", "Job"): (Compute(("metadata", "labels"), _job_labels), Nested(("spec",), (
        Set(("completions",), 1, when=lambda spec: "parallelism" not in spec),
        Set(("parallelism",), 1),
        Set(("backoffLimit",), 6, when=lambda spec: "backoffLimitPerIndex" not in spec),
        Set(("completionMode",), "NonIndexed"),
        Set(("suspend",), False),
        Compute(("podReplacementPolicy",), lambda spec: "Failed" if spec.get("podFailurePolicy")
                else "TerminatingOrFailed"),
        Nested(("template",), POD_TEMPLATE),
    )),),
    ("batch", "CronJob"): (Nested(("spec",), (
        Set(("concurrencyPolicy",), "Allow"),
        Set(("suspend",), False),
        Set(("successfulJobsHistoryLimit",), 3),
        Set(("failedJobsHistoryLimit",), 1),
        Nested(("jobTemplate", "spec", "template"), POD_TEMPLATE),
    )),),
    ("networking.k8s.io", "NetworkPolicy"): (Nested(("spec",), (
        Compute(("policyTypes",), _policy_types),
        Each(("ingress",), NETWORK_POLICY_PORTS),
        Each(("egress",), NETWORK_POLICY_PORTS),
    )),),
}


def apply_defaults(group: str, kind: str, obj: Node) -> None:
    """Default ``obj`` in place (module contract)."""
    if kind == "Namespace" and not group:
        _namespace_label(obj)
        return
    rules = KINDS.get((group, kind))
    if rules:
        _run(rules, obj)


def _namespace_label(obj: Node) -> None:
    meta = obj.setdefault("metadata", {})
    name = meta.get("name")
    if name:
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = name


def _run(rules: Sequence[Rule], node: Node) -> None:
    for rule in rules:
        if isinstance(rule, Set):
            if rule.when is None or rule.when(node):
                parent = _parent(node, rule.path)
                if parent is not None and rule.path[-1] not in parent:
                    parent[rule.path[-1]] = copy.deepcopy(rule.value)
        elif isinstance(rule, Compute):
            parent = _parent(node, rule.path)
            if parent is not None and rule.path[-1] not in parent:
                value = rule.value(node)
                if value is not None:
                    parent[rule.path[-1]] = value
        elif isinstance(rule, Nested):
            child = _child(node, rule.path, create=rule.create and (rule.when is None or rule.when(node)))
            if child is not None and (rule.when is None or rule.when(node)):
                _run(rule.rules, child)
        elif isinstance(rule, Each):
            items = _child_list(node, rule.path)
            for item in items:
                if isinstance(item, dict):
                    _run(rule.rules, item)
        else:
            _quantities(node, rule)


def _parent(node: Node, path: Path) -> Node | None:
    """The object holding ``path``'s last key, created on the way (None when a step is not an object)."""
    current = node
    for key in path[:-1]:
        nxt = current.get(key)
        if nxt is None:
            nxt = current[key] = {}
        if not isinstance(nxt, dict):
            return None
        current = nxt
    return current


def _child(node: Node, path: Path, *, create: bool) -> Node | None:
    current = node
    for key in path:
        nxt = current.get(key)
        if nxt is None and create:
            nxt = current[key] = {}
        if not isinstance(nxt, dict):
            return None
        current = nxt
    return current


def _child_list(node: Node, path: Path) -> list[Any]:
    current: Any = node
    for key in path:
        if not isinstance(current, dict):
            return []
        current = current.get(key)
    return current if isinstance(current, list) else []


def _quantities(node: Node, rule: Quantities) -> None:
    parent = _child(node, rule.path[:-1], create=False)
    if parent is None or rule.path[-1] not in parent:
        return
    value = parent[rule.path[-1]]
    if isinstance(value, dict):
        parent[rule.path[-1]] = {key: canonical(v, scale=rule.scale) for key, v in value.items()}
    elif value is not None:
        parent[rule.path[-1]] = canonical(value, scale=rule.scale)
