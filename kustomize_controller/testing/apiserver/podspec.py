"""Validation of the pod spec a kind carries, as kube-apiserver v1.36's ``ValidatePodSpec`` does it — the
part of it this server models: each container's resource requirements.

Contract: ``pod_spec_errors(rt, obj)`` returns the ``FieldError``s of every pod spec in ``obj`` (a Pod's
``spec``, a PodTemplate's ``template.spec``, the ``spec.template.spec`` of Deployment, StatefulSet,
DaemonSet, ReplicaSet, ReplicationController and Job, a CronJob's ``spec.jobTemplate.spec.template.spec``),
for ``containers`` then ``initContainers`` in order, each container's ``resources`` checked as
``ValidateResourceRequirements`` does:
- a negative limit or request: ``…resources.limits[cpu]: Invalid value: "-1": must be greater than or
  equal to 0``;
- a request above its limit: ``…resources.requests: Invalid value: "2": must be less than or equal to cpu
  limit of 1500m`` (the field is ``requests`` itself, the values are printed canonical);
- resources that may not be overcommitted (hugepages and extended resources, whose name has a domain
  other than ``kubernetes.io``): a request must equal its limit (``must be equal to … limit of …``), and
  a request without a limit is ``…resources.limits: Required value: Limit must be set for non
  overcommitable resources``.
Limits are checked before requests, each map in the order the object holds it (the real server walks Go
maps, so the order of several causes is not fixed there).

Runs after defaulting, so quantities are already canonical (quantity.py). Not modelled (listed in
docs/testing.md): the rest of pod validation (names, ports, probes, volumes…), resource name checks,
pod-level ``spec.resources``, hugepages' cpu-or-memory rule, ephemeral containers (which a create may not
carry anyway).
"""

from __future__ import annotations

from typing import Any

from .errors import FieldError
from .kinds import ResourceType
from .quantity import parse

# where each kind keeps its pod spec, by (group, kind)
POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("", "PodTemplate"): ("template", "spec"),
    ("", "ReplicationController"): ("spec", "template", "spec"),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}

NOT_NEGATIVE = "must be greater than or equal to 0"
LIMIT_REQUIRED = "Limit must be set for non overcommitable resources"


def pod_spec_errors(rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
    path = POD_SPEC_PATHS.get((rt.group, rt.kind))
    if path is None or rt.custom:
        return []
    spec: Any = obj
    for key in path:
        spec = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    for list_name in ("containers", "initContainers"):
        containers = spec.get(list_name)
        for i, container in enumerate(containers if isinstance(containers, list) else ()):
            resources = container.get("resources") if isinstance(container, dict) else None
            if isinstance(resources, dict):
                errors += resource_errors(f"{'.'.join(path)}.{list_name}[{i}].resources", resources)
    return errors


def overcommit_allowed(name: str) -> bool:
    """cpu, memory, ephemeral-storage… may be requested below their limit; hugepages and extended
    resources (``example.com/gpu``) may not (``helper.IsOvercommitAllowed``)."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith("hugepages-")


def resource_errors(where: str, resources: dict[str, Any]) -> list[FieldError]:
    limits = _resource_map(resources.get("limits"))
    requests = _resource_map(resources.get("requests"))
    errors: list[FieldError] = []
    for name, (text, amount) in limits.items():
        if amount < 0:
            errors.append(FieldError(f"{where}.limits[{name}]", "Invalid value", NOT_NEGATIVE, text))
    for name, (text, amount) in requests.items():
        if amount < 0:
            errors.append(FieldError(f"{where}.requests[{name}]", "Invalid value", NOT_NEGATIVE, text))
        limit = limits.get(name)
        if limit is None:
            if not overcommit_allowed(name):
                errors.append(FieldError(f"{where}.limits", "Required value", LIMIT_REQUIRED))
        elif amount != limit[1] and not overcommit_allowed(name):
            errors.append(FieldError(f"{where}.requests", "Invalid value",
                                     f"must be equal to {name} limit of {limit[0]}", text))
        elif amount > limit[1]:
            errors.append(FieldError(f"{where}.requests", "Invalid value",
                                     f"must be less than or equal to {name} limit of {limit[0]}", text))
    return errors


def _resource_map(value: Any) -> dict[str, tuple[str, Any]]:
    """name → (the quantity as stored, its exact value); values that are not quantities are left to the
    decoder's check (defaulting has already refused them)."""
    if not isinstance(value, dict):
        return {}
    result = {}
    for name, quantity in value.items():
        try:
            result[str(name)] = (str(quantity), parse(quantity)[0])
        except ValueError:
            continue
    return result
