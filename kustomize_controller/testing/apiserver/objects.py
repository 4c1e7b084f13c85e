"""Object lifecycle rules applied by the server on every write: metadata, generation, status split.

Contract (mirrors the registry strategies of kube-apiserver):
- create: a new ``uid``, ``creationTimestamp`` (seconds, UTC), ``generation: 1`` for kinds that keep one;
  ``status`` is dropped for kinds with a status subresource (built-ins answer ``status: {}``);
  ``generateName`` gets a 5-character random suffix; client-set ``deletionTimestamp`` is ignored.
- update of the main resource: ``uid``, ``creationTimestamp``, ``deletionTimestamp`` and ``generation``
  come from the stored object; ``status`` too when the kind has the subresource. ``generation`` is bumped
  when anything outside ``metadata`` (and ``status`` when it has the subresource) changes, and for
  Deployments also when annotations change.
- update through ``/status``: everything but ``status`` (and ``managedFields``) comes from the stored
  object; generation never moves. A Namespace's ``spec.finalizers`` change only through ``/finalize``
  (otherwise an update like any other: status kept).
Functions return new dicts; inputs are not mutated.
"""

from __future__ import annotations

import base64
import binascii
import copy
import secrets
import uuid
from datetime import datetime
from typing import Any

from . import errors, events
from .defaults import apply_defaults
from .kinds import ResourceType
from .validation import check_micro_times

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_IGNORED_TOP = frozenset({"metadata", "apiVersion", "kind"})


def timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix() -> str:
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))


def prepare_create(rt: ResourceType, obj: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    new: dict[str, Any] = {"apiVersion": rt.api_version, "kind": rt.kind}
    new.update((k, copy.deepcopy(v)) for k, v in obj.items() if k not in ("apiVersion", "kind"))
    meta = new.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + random_suffix()
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = timestamp(now)
    for transient in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(transient, None)
    if not rt.namespaced:
        meta.pop("namespace", None)
    if rt.generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    if rt.has_status:
        if rt.custom:
            new.pop("status", None)
        else:
            new["status"] = _initial_status(rt)
    return new


def normalise(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """Kind-specific conversions, defaults and allocations the real server makes on every write (in
    place; defaults.py has the tables)."""
    if rt.kind == "Secret" and not rt.group:
        _secret_string_data(obj)
    elif rt.kind == "Service" and not rt.group:
        _service_addresses(obj, old)
    if rt.kind == "Job" and rt.group == "batch" and old is None:
        # The create strategy runs after decoding's defaults, but SetDefaults_Job gives a Job without labels
        # its template's label map itself (one Go map), so the labels the strategy adds to the template
        # reach the Job too; and a Job whose template had no labels takes them when the stored object is
        # decoded (and defaulted) again. Generating first and defaulting after gives the same object.
        _job_selector(obj)
    if not rt.custom:
        check_micro_times(rt, obj)
        try:
            apply_defaults(rt.group, rt.kind, obj)
        except ValueError as err:
            raise errors.undecodable(rt.kind, rt.version, str(err)) from err
    return obj


def _job_selector(job: dict[str, Any]) -> None:
    """A new Job without ``manualSelector`` gets the selector and pod labels the real Job strategy
    generates from its uid (a selector the client sent is left alone here; see docs/testing.md)."""
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") or spec.get("selector"):
        return
    uid, name = job["metadata"]["uid"], job["metadata"].get("name", "")
    template = spec.setdefault("template", {})
    if not isinstance(template, dict):
        return
    meta = template.setdefault("metadata", {})
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    meta["labels"] = {**labels, "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                      "controller-uid": uid, "job-name": name}
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}


def _secret_string_data(obj: dict[str, Any]) -> None:
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = dict(obj.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data
    obj.setdefault("type", "Opaque")
    for key, value in (obj.get("data") or {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except (ValueError, binascii.Error) as err:
            raise errors.undecodable("Secret", "v1", f"illegal base64 data at input byte 0 (key {key!r})") from err


def _service_addresses(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    old_spec = (old or {}).get("spec") or {}
    if not spec.get("clusterIP") and old_spec.get("clusterIP"):
        spec["clusterIP"] = old_spec["clusterIP"]
        if old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
    if not spec.get("clusterIP") and spec["type"] != "ExternalName":
        spec["clusterIP"] = f"10.96.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"
    if spec.get("clusterIP") and not spec.get("clusterIPs"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    if spec["type"] in ("NodePort", "LoadBalancer"):
        _node_ports(spec, old_spec)


def _node_ports(spec: dict[str, Any], old_spec: dict[str, Any]) -> None:
    """A NodePort/LoadBalancer port without ``nodePort`` keeps the one it had, else gets one of 30000-32767."""
    previous = {(p.get("port"), p.get("protocol", "TCP")): p.get("nodePort")
                for p in old_spec.get("ports") or [] if isinstance(p, dict)}
    for port in spec.get("ports") or []:
        if isinstance(port, dict) and not port.get("nodePort"):
            port["nodePort"] = previous.get((port.get("port"), port.get("protocol", "TCP"))) or (
                30000 + secrets.randbelow(2768))


def _initial_status(rt: ResourceType) -> dict[str, Any]:
    if rt.kind == "Namespace":
        return {"phase": "Active"}
    if rt.kind == "Pod":
        return {"phase": "Pending", "qosClass": "BestEffort"}
    if rt.kind == "PersistentVolumeClaim":
        return {"phase": "Pending"}
    if rt.kind == "Service":
        return {"loadBalancer": {}}
    return {}


def spec_changed(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> bool:
    ignored = _IGNORED_TOP | ({"status"} if rt.has_status else frozenset())
    for key in set(old) | set(new):
        if key not in ignored and old.get(key) != new.get(key):
            return True
    if rt.annotations_bump_generation:
        return (old["metadata"].get("annotations") or {}) != (new["metadata"].get("annotations") or {})
    return False


def prepare_update(rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, subresource: str | None
                   ) -> dict[str, Any]:
    """The object to store for an update of ``old`` by the client-supplied ``new``."""
    if subresource == "status":
        status_only = copy.deepcopy(old)
        if "status" in new:
            status_only["status"] = copy.deepcopy(new["status"])
        else:
            status_only.pop("status", None)
        if "managedFields" in new.get("metadata", {}):
            status_only["metadata"]["managedFields"] = new["metadata"]["managedFields"]
        return status_only
    result: dict[str, Any] = {"apiVersion": rt.api_version, "kind": rt.kind}
    result.update((k, copy.deepcopy(v)) for k, v in new.items() if k not in ("apiVersion", "kind"))
    meta = result.setdefault("metadata", {})
    old_meta = old["metadata"]
    for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if kept in old_meta:
            meta[kept] = old_meta[kept]
        else:
            meta.pop(kept, None)
    meta["name"] = old_meta["name"]
    if "namespace" in old_meta:
        meta["namespace"] = old_meta["namespace"]
    if rt.has_status:
        if "status" in old:
            result["status"] = copy.deepcopy(old["status"])
        else:
            result.pop("status", None)
    if rt.kind == "Namespace" and not rt.group and subresource != "finalize":
        # only namespaces/finalize may change spec.finalizers (the namespace strategy keeps them)
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        spec = result.setdefault("spec", {})
        if isinstance(spec, dict):
            if old_finalizers is None:
                spec.pop("finalizers", None)
            else:
                spec["finalizers"] = copy.deepcopy(old_finalizers)
    if rt.generation:
        generation = int(old_meta.get("generation", 1))
        meta["generation"] = generation + 1 if spec_changed(rt, old, result) else generation
    else:
        meta.pop("generation", None)
    return result


def semantically_equal(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """True when an update would store nothing new (then the real server keeps the resourceVersion)."""
    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        stripped = dict(obj)
        meta = dict(stripped.get("metadata") or {})
        meta.pop("resourceVersion", None)
        managed = meta.pop("managedFields", None) or []
        meta["managedFields"] = [{k: v for k, v in e.items() if k != "time"} for e in managed]
        stripped["metadata"] = meta
        return stripped

    return strip(old) == strip(new)


def with_version(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """``obj`` as read through ``rt`` (another served version of the same resource: apiVersion only;
    an Event through events.k8s.io: its shape, see events.py)."""
    if obj.get("apiVersion") == rt.api_version:
        return obj
    if events.is_events_api(rt):
        return events.view(rt, obj)
    view = dict(obj)
    view["apiVersion"] = rt.api_version
    return view

