"""Conversion of Kustomizations between the served versions; ``v1`` is the hub (and the storage version).

Pure functions on plain dicts (what a ConversionReview carries); the input is never modified.

Contract:

- ``convert(obj, api_version)`` converts between any two served versions (through v1);
  ``to_hub(obj)`` and ``from_hub(obj, version)`` are its two halves. ``metadata`` is passed through
  unchanged except for the two annotations below (the API server allows a conversion to change
  labels and annotations only).
- **Nothing is lost** either way:

  * old → v1: ``patchesStrategicMerge`` and ``patchesJson6902`` become ``patches`` entries with the
    same effect, in kustomize's order (strategic merge first, then the old ``patches``, then JSON 6902);
    ``serviceAccount{name, namespace}`` becomes ``serviceAccountName``; v1alpha1 health checks without
    ``apiVersion`` get ``apps/v1`` (upstream's default). What v1 cannot hold but the old version needs
    to be given back as written (``validation``, the original patch lists, ...) is kept in the v1
    object's annotation ``ORIGIN_ANNOTATION``.
  * v1 → old: v1 fields the old version cannot express (``deletionPolicy``, ``namePrefix``, a
    ``readyExpr`` in ``dependsOn``, ...) are kept, as their v1 values, in the old object's annotation
    ``V1_FIELDS_ANNOTATION`` (with the v1 object's origin record where the old version cannot show
    it); converting that object back restores them unless the old object changed the field they
    belong to (an edit through the old version wins).
  * So ``old → v1 → old`` returns what was written (after the old schema's defaulting), and
    ``v1 → old → v1`` returns the v1 object. Each record is used only while it still matches the
    object: an edit through v1 that removes a converted patch makes the old view list plain ``patches``.

- An object with a field of a type its version's schema does not allow is refused with
  ``ConversionRefused`` (``<Kind/ns/name>: not a valid Kustomization: ...``), never another error.
- What v1 cannot represent at all is refused with ``ConversionRefused``, whose message starts with
  ``Kustomization/<namespace>/<name>: <field path>:`` and names the v1 replacement: a
  ``serviceAccount`` of another namespace (cross-namespace impersonation was removed upstream as a
  privilege escalation), a strategic merge patch that is not an object.

Not promised: status fields without an old counterpart (``history``, ``lastAppliedOriginRevision``,
and ``inventory`` below v1beta2) are not shown in old versions, and an old ``status.snapshot`` does not
reach v1; only the controller writes status, and it writes v1.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

from kustomize_controller.api.kustomization import GROUP, KIND
from kustomize_controller.api.versions import HUB, OLD_VERSIONS, SPEC_FIELDS, STATUS_FIELDS, VALIDATION_VALUES

__all__ = [
    "ORIGIN_ANNOTATION",
    "SERVED_VERSIONS",
    "V1_FIELDS_ANNOTATION",
    "ConversionRefused",
    "convert",
    "from_hub",
    "to_hub",
]

#: On a v1 object: what its old-version form had that v1 does not (JSON).
ORIGIN_ANNOTATION: Final = f"{GROUP}/conversion-origin"
#: On an old-version object: v1 fields that version cannot express, as their v1 values (JSON).
V1_FIELDS_ANNOTATION: Final = f"{GROUP}/conversion-v1-fields"
SERVED_VERSIONS: Final = (HUB, *OLD_VERSIONS)
# the upstream v1alpha1 default of healthChecks[].apiVersion
_DEFAULT_HEALTH_API_VERSION: Final = "apps/v1"
_ABSENT: Final = None
# the origin records that describe how a v1 spec field was derived from an old form
_ORIGIN_KEYS: Final = {
    "patches": ("patches", "patchesStrategicMerge", "patchesJson6902"),
    "healthChecks": ("healthChecks",),
    "serviceAccountName": ("serviceAccount",),
}


class ConversionRefused(ValueError):
    """An object that the target version cannot represent; ``str(err)`` is the whole message."""


def convert(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    """``obj`` (any served version) as ``api_version`` (``kustomize.toolkit.fluxcd.io/<version>``)."""
    try:
        return _convert(obj, api_version)
    except ConversionRefused:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as err:
        # a field of a type its version's schema does not allow (an object stored before a schema change)
        raise ConversionRefused(f"{_ref(obj)}: not a valid {KIND}: {type(err).__name__}: {err}") from err


def _convert(obj: dict[str, Any], api_version: str) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    if group != GROUP or version not in SERVED_VERSIONS:
        raise ConversionRefused(f"{_ref(obj)}: unsupported version {api_version!r}")
    current = _version_of(obj)
    if current == version:
        return copy.deepcopy(obj)
    hub = obj if current == HUB else to_hub(obj)
    return copy.deepcopy(hub) if version == HUB else from_hub(hub, version)


def to_hub(obj: dict[str, Any]) -> dict[str, Any]:
    """An old-version object as v1."""
    version = _version_of(obj)
    if version == HUB:
        return copy.deepcopy(obj)
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{GROUP}/{HUB}"
    annotations, created = _annotations(out)
    record = _load(annotations.pop(V1_FIELDS_ANNOTATION, None))
    annotations.pop(ORIGIN_ANNOTATION, None)
    if isinstance(out.get("spec"), dict):
        spec, origin = _up_spec(out["spec"], version, ref=_ref(obj), namespace=_namespace(obj))
        v1_fields = record.get("spec")
        for key, value in (v1_fields.items() if isinstance(v1_fields, dict) else ()):
            # restored unless the old object changed the field since it was converted
            if key not in SPEC_FIELDS[version] or _down_value(key, value, version) == out["spec"].get(key):
                _put(spec, key, value)
                for derived in _ORIGIN_KEYS.get(key, ()):
                    origin.pop(derived, None)  # the v1 value is back: what it was derived from is moot
        out["spec"] = spec
        recorded_origin = record.get("origin")
        if isinstance(recorded_origin, dict):
            origin = {**recorded_origin, **origin}
        if origin:
            annotations[ORIGIN_ANNOTATION] = _dump(origin)
    if isinstance(out.get("status"), dict):
        out["status"] = _up_status(out["status"])
    _tidy(out, created)
    return out


def from_hub(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """A v1 object as ``version`` (one of ``OLD_VERSIONS``)."""
    if version not in SPEC_FIELDS:
        raise ConversionRefused(f"{_ref(obj)}: unsupported version {GROUP}/{version}")
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{GROUP}/{version}"
    annotations, created = _annotations(out)
    origin = _load(annotations.pop(ORIGIN_ANNOTATION, None))
    annotations.pop(V1_FIELDS_ANNOTATION, None)
    if isinstance(out.get("spec"), dict):
        hub_spec = out["spec"]
        spec = _down_spec(hub_spec, version, origin=origin, namespace=_namespace(obj))
        back, back_origin = _up_spec(spec, version, ref=_ref(obj), namespace=_namespace(obj))
        record: dict[str, Any] = {}
        lost = {key: hub_spec.get(key, _ABSENT) for key in sorted(set(hub_spec) | set(back))
                if hub_spec.get(key, _ABSENT) != back.get(key, _ABSENT)}
        if lost:
            record["spec"] = lost
        if origin and back_origin != origin:
            record["origin"] = origin  # what the old version cannot show of an older version's form
        out["spec"] = spec
        if record:
            annotations[V1_FIELDS_ANNOTATION] = _dump(record)
    if isinstance(out.get("status"), dict):
        out["status"] = _down_status(out["status"], version)
    _tidy(out, created)
    return out


# --- spec ------------------------------------------------------------------------------------------


def _up_spec(spec: dict[str, Any], version: str, *, ref: str, namespace: str
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(v1 spec, origin record) of an old spec; the record holds what v1 cannot."""
    out = {key: copy.deepcopy(value) for key, value in spec.items()
           if key not in ("validation", "patchesStrategicMerge", "patchesJson6902", "serviceAccount")}
    origin: dict[str, Any] = {}
    if "validation" in spec:
        origin["validation"] = spec["validation"]
    strategic = spec.get("patchesStrategicMerge") or []
    json6902 = spec.get("patchesJson6902") or []
    if strategic or json6902:
        plain = spec.get("patches") or []
        target_namespace = spec.get("targetNamespace")
        out["patches"] = ([_strategic_patch(patch, index, ref) for index, patch in enumerate(strategic)]
                          + copy.deepcopy(plain) + [_json6902_patch(patch, target_namespace) for patch in json6902])
        origin["patches"] = len(plain)
        if strategic:
            origin["patchesStrategicMerge"] = strategic
        if json6902:
            origin["patchesJson6902"] = json6902
    for key in ("patchesStrategicMerge", "patchesJson6902"):
        if key in spec and not spec[key]:
            origin[key] = spec[key]  # an explicit empty list comes back as written
    account = spec.get("serviceAccount")
    if isinstance(account, dict):
        account_namespace = account.get("namespace") or namespace
        if account_namespace != namespace:
            raise ConversionRefused(
                f"{ref}: spec.serviceAccount.namespace: the service account {account_namespace}/"
                f"{account.get('name', '')} is in another namespace, and cross-namespace impersonation was "
                f"removed (a privilege escalation); {GROUP}/{HUB} has spec.serviceAccountName, an account in "
                f"the Kustomization's own namespace ({namespace})")
        out["serviceAccountName"] = account.get("name", "")
        if account != {"name": account.get("name", ""), "namespace": namespace}:
            origin["serviceAccount"] = account
    if version == "v1alpha1" and isinstance(spec.get("healthChecks"), list):
        defaulted = [index for index, check in enumerate(spec["healthChecks"])
                     if isinstance(check, dict) and not check.get("apiVersion")]
        for index in defaulted:
            out["healthChecks"][index]["apiVersion"] = _DEFAULT_HEALTH_API_VERSION
        if defaulted:
            origin["healthChecks"] = defaulted
    return out, origin


def _down_spec(spec: dict[str, Any], version: str, *, origin: dict[str, Any], namespace: str) -> dict[str, Any]:
    fields = SPEC_FIELDS[version]
    out = {key: _down_value(key, value, version) for key, value in spec.items() if key in fields}
    out = {key: value for key, value in out.items() if value is not _ABSENT}
    if "validation" in origin and origin["validation"] in VALIDATION_VALUES[version]:
        out["validation"] = origin["validation"]
    if "patchesStrategicMerge" in fields:
        _restore_patch_lists(out, origin)
    if "serviceAccount" in fields and spec.get("serviceAccountName"):
        account = {"name": spec["serviceAccountName"], "namespace": namespace}
        recorded = origin.get("serviceAccount")
        if isinstance(recorded, dict) and recorded.get("name") == account["name"]:
            account = recorded
        out["serviceAccount"] = account
    if version == "v1alpha1" and isinstance(out.get("healthChecks"), list):
        for index in origin.get("healthChecks") or []:
            if (isinstance(index, int) and 0 <= index < len(out["healthChecks"])
                    and out["healthChecks"][index].get("apiVersion") == _DEFAULT_HEALTH_API_VERSION):
                del out["healthChecks"][index]["apiVersion"]
    return out


def _down_value(key: str, value: Any, version: str) -> Any:
    """A v1 spec field as the old version has it (nested v1-only fields dropped)."""
    value = copy.deepcopy(value)
    if key == "dependsOn" and isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                item.pop("readyExpr", None)
    elif key == "decryption" and isinstance(value, dict):
        value.pop("serviceAccountName", None)
    elif key == "postBuild" and isinstance(value, dict):
        value.pop("substituteStrategy", None)
        if version == "v1beta1":
            for item in value.get("substituteFrom") or []:
                if isinstance(item, dict):
                    item.pop("optional", None)
    elif key == "kubeConfig" and isinstance(value, dict):
        value.pop("configMapRef", None)
        if not value.get("secretRef"):
            return _ABSENT  # only a configMapRef: the old version has no way to say it
        if version != "v1beta2" and isinstance(value["secretRef"], dict):
            value["secretRef"].pop("key", None)
    return value


def _restore_patch_lists(out: dict[str, Any], origin: dict[str, Any]) -> None:
    """Split v1 ``patches`` back into the old lists, if they are still what the origin record says."""
    strategic = origin.get("patchesStrategicMerge")
    json6902 = origin.get("patchesJson6902")
    for key, recorded in (("patchesStrategicMerge", strategic), ("patchesJson6902", json6902)):
        if recorded == []:
            out[key] = []
    if not strategic and not json6902:
        return
    if not isinstance(strategic or [], list) or not isinstance(json6902 or [], list):
        return  # a hand-edited record is ignored rather than trusted
    strategic, json6902 = strategic or [], json6902 or []
    patches = out.get("patches") or []
    try:
        head = [_strategic_patch(patch, index, "") for index, patch in enumerate(strategic)]
    except ConversionRefused:
        return
    tail = [_json6902_patch(patch, out.get("targetNamespace")) for patch in json6902]
    plain = len(patches) - len(head) - len(tail)
    if (plain != origin.get("patches") or patches[:len(head)] != head
            or patches[len(patches) - len(tail):] != tail):
        return  # changed through v1: the old view shows them all as patches
    middle = patches[len(head):len(patches) - len(tail)]
    if middle:
        out["patches"] = middle
    else:
        out.pop("patches", None)
    if strategic:
        out["patchesStrategicMerge"] = copy.deepcopy(strategic)
    if json6902:
        out["patchesJson6902"] = copy.deepcopy(json6902)


def _strategic_patch(patch: Any, index: int, ref: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise ConversionRefused(
            f"{ref}: spec.patchesStrategicMerge[{index}]: must be an object (a strategic merge patch); "
            f"{GROUP}/{HUB} replaced patchesStrategicMerge with spec.patches")
    # a patch without target: kustomize finds the object by the patch's own apiVersion, kind and name
    # sorted keys: the same patch must give the same string after its trip through the origin record
    return {"patch": json.dumps(patch, sort_keys=True, separators=(",", ":"))}


def _json6902_patch(patch: Any, target_namespace: Any) -> dict[str, Any]:
    operations = (patch.get("patch") if isinstance(patch, dict) else None) or []
    out: dict[str, Any] = {"patch": json.dumps(operations, sort_keys=True, separators=(",", ":"))}
    if isinstance(patch, dict) and isinstance(patch.get("target"), dict):
        target = copy.deepcopy(patch["target"])
        # kustomize ran patchesJson6902 after the namespace transformer and `patches` before it: a
        # target in the targetNamespace meant "wherever it came from", since every namespaced object
        # ends up there
        if target_namespace and target.get("namespace") == target_namespace:
            del target["namespace"]
        out["target"] = target
    return out


# --- status ----------------------------------------------------------------------------------------


def _up_status(status: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in status.items() if key != "snapshot"}


def _down_status(status: dict[str, Any], version: str) -> dict[str, Any]:
    out = {key: value for key, value in status.items() if key in STATUS_FIELDS[version]}
    if version == "v1alpha1" and isinstance(out.get("conditions"), list):
        out["conditions"] = [{key: value for key, value in condition.items() if key != "observedGeneration"}
                             if isinstance(condition, dict) else condition for condition in out["conditions"]]
    return out


# --- helpers ---------------------------------------------------------------------------------------


def _version_of(obj: dict[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    if group != GROUP or version not in SERVED_VERSIONS or obj.get("kind", KIND) != KIND:
        raise ConversionRefused(f"{_ref(obj)}: unsupported version {api_version!r}")
    return version


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _namespace(obj: dict[str, Any]) -> str:
    return str(_metadata(obj).get("namespace") or "")


def _ref(obj: dict[str, Any]) -> str:
    meta = _metadata(obj)
    return f"{KIND}/{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _annotations(obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the object's annotations, whether they go again if left empty).

    They go when they did not exist or held only our records: a round trip must not leave ``{}``.
    """
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        return annotations, bool(annotations) and set(annotations) <= {ORIGIN_ANNOTATION, V1_FIELDS_ANNOTATION}
    meta["annotations"] = {}
    return meta["annotations"], True


def _tidy(obj: dict[str, Any], created: bool) -> None:
    meta = obj["metadata"]
    if created and not meta["annotations"]:
        del meta["annotations"]


def _put(spec: dict[str, Any], key: str, value: Any) -> None:
    if value is _ABSENT:
        spec.pop(key, None)
    else:
        spec[key] = copy.deepcopy(value)


def _load(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}  # a hand-edited record is ignored rather than trusted
    return value if isinstance(value, dict) else {}


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
