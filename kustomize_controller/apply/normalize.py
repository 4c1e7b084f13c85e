"""Preparation of desired objects before the dry-run, so the drift comparison stays honest.

What is normalised (each one verified against a server dry-run in the integration tests):
- Secret ``stringData`` is folded into ``data`` (base64), as the API server does on write: otherwise a
  Secret built with ``stringData`` would be applied with a field the server never returns, and
  removing a key from ``stringData`` would not remove it from ``data`` (kubernetes#108008).
- Container ports and Service ports without ``protocol`` get ``TCP``. ``protocol`` is part of the
  list-map key of those lists; applying an entry without it makes structured-merge-diff treat the
  server-defaulted entry as a different item (structured-merge-diff#130).
- ``metadata.creationTimestamp: null`` (kustomize emits it) is removed, and ``status`` is dropped from
  everything but CustomResourceDefinitions (kstatus reads CRD status; applying status is a no-op).
- Role and ClusterRole are left untouched (upstream fluxcd/kustomize-controller#1041).
- Every other built-in kind goes through the typed round trip upstream's objects go through
  (``typed.py``): fields its Go struct lacks are dropped, and absent non-pointer structs and
  non-``omitempty`` fields are written out (``strategy: {}``, ``resources: {}``), so the field manager
  owns what upstream's owns.

Not done (and why): no server defaults are filled in. The drift check compares the *dry-run result*
with the live object — both come from the server, so defaults appear on both sides.

``commonMetadata`` and owner labels are stamped with ``stamp_metadata``; they override same keys.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from kustomize_controller.apply.objects import Object, api_version, set_annotations, set_labels
from kustomize_controller.apply.typed import normalize_typed

_POD_TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
    ("", "Pod"): ("spec",),
}


def _nested(obj: Mapping[str, Any], path: Iterable[str]) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _default_port_protocol(ports: Any) -> None:
    if not isinstance(ports, list):
        return
    for port in ports:
        if isinstance(port, dict) and not port.get("protocol"):
            port["protocol"] = "TCP"


def _normalize_pod_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if isinstance(containers, list):
            for container in containers:
                if isinstance(container, dict):
                    _default_port_protocol(container.get("ports"))


def _normalize_secret(obj: Object) -> None:
    if "stringData" not in obj:
        return
    string_data = obj["stringData"]
    if not string_data:
        # the typed round-trip upstream drops an empty or null stringData
        del obj["stringData"]
        return
    if not isinstance(string_data, dict):
        return  # invalid; the dry-run reports it with the server's message
    data = obj.get("data")
    if not isinstance(data, dict):
        data = {}
        obj["data"] = data
    for key, value in string_data.items():
        text = value if isinstance(value, str) else ("" if value is None else str(value))
        data[key] = base64.b64encode(text.encode()).decode()
    del obj["stringData"]


def normalize_object(obj: Object) -> None:
    """Normalise one desired object in place (see the module docstring for what and why)."""
    version = api_version(obj)
    kind = str(obj.get("kind") or "")
    group = version.rpartition("/")[0]
    if version == "rbac.authorization.k8s.io/v1" and kind in ("Role", "ClusterRole"):
        return
    normalize_typed(obj)
    if version == "v1" and kind == "Secret":
        _normalize_secret(obj)
    elif version == "v1" and kind == "Service":
        _default_port_protocol(_nested(obj, ("spec", "ports")))
    pod_path = _POD_TEMPLATE_PATHS.get((group, kind))
    if pod_path is not None:
        _normalize_pod_spec(_nested(obj, pod_path))
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "creationTimestamp" in meta and meta["creationTimestamp"] is None:
        del meta["creationTimestamp"]
    is_crd = kind == "CustomResourceDefinition" and version.startswith("apiextensions.k8s.io/")
    if not is_crd:
        obj.pop("status", None)


def normalize_objects(objects: Iterable[Object]) -> None:
    for obj in objects:
        normalize_object(obj)


def stamp_metadata(
    objects: Iterable[Object],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> None:
    """Add ``labels``/``annotations`` to every object, overriding same keys (commonMetadata, owner labels)."""
    for obj in objects:
        if labels:
            set_labels(obj, dict(labels))
        if annotations:
            set_annotations(obj, dict(annotations))


def prepare_objects(
    objects: Iterable[Object],
    *,
    owner: Mapping[str, str],
    common_labels: Mapping[str, str] | None = None,
    common_annotations: Mapping[str, str] | None = None,
) -> None:
    """The controller's preparation, in upstream order: owner labels, normalisation, commonMetadata.

    ``commonMetadata`` comes last and therefore wins over same keys (as upstream).
    """
    items = list(objects)
    stamp_metadata(items, labels=owner)
    normalize_objects(items)
    stamp_metadata(items, labels=common_labels, annotations=common_annotations)
