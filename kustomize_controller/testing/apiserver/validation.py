"""Validation the real server performs before storing: names, labels, namespaces, immutable fields, the
resource requirements of pod specs (podspec.py).

Each check returns ``FieldError``s; ``invalid(...)`` turns them into one 422 ``Invalid`` Status naming every
problem, as apimachinery aggregates field errors. Schema validation of custom resources against the CRD's
openAPIV3Schema is NOT done (see docs/testing.md).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from .errors import ApiStatusError, FieldError, invalid, undecodable
from .kinds import ResourceType
from .podspec import pod_spec_errors

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

# kinds whose names must be DNS-1123 labels rather than subdomains
_LABEL_NAMED = {"Namespace", "Service"}
# RBAC objects accept path-segment names (e.g. "system:controller:foo")
_PATH_SEGMENT_NAMED = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def name_errors(rt: ResourceType, name: str | None) -> list[FieldError]:
    if not name:
        return [FieldError("metadata.name", "Required value", "name or generateName is required")]
    if rt.kind in _PATH_SEGMENT_NAMED:
        if name in (".", "..") or "/" in name or "%" in name:
            return [FieldError("metadata.name", "Invalid value", "may not contain '/' or '%'", name)]
        return []
    if rt.kind in _LABEL_NAMED:
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            return [FieldError("metadata.name", "Invalid value", LABEL_MSG, name)]
        return []
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        return [FieldError("metadata.name", "Invalid value", SUBDOMAIN_MSG, name)]
    return []


def _key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def metadata_errors(meta: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [FieldError("metadata.labels", "Invalid value", "must be a map of strings", labels)]
    for key, value in labels.items():
        if not _key_ok(key):
            errors.append(FieldError("metadata.labels", "Invalid value", "name part must consist of alphanumeric "
                                     "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                                     "character", key))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errors.append(FieldError("metadata.labels", "Invalid value", "a valid label must be an empty string or "
                                     "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                                     "with an alphanumeric character", value))
    annotations = meta.get("annotations") or {}
    for key, value in annotations.items() if isinstance(annotations, dict) else ():
        if not _key_ok(key):
            errors.append(FieldError("metadata.annotations", "Invalid value", "name part must consist of "
                                     "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                                     "alphanumeric character", key))
        if not isinstance(value, str):
            errors.append(FieldError(f"metadata.annotations[{key}]", "Invalid value", "must be a string", value))
    finalizers = meta.get("finalizers") or []
    for i, finalizer in enumerate(finalizers):
        if not isinstance(finalizer, str) or not finalizer:
            errors.append(FieldError(f"metadata.finalizers[{i}]", "Invalid value", "must be a non-empty string",
                                     finalizer))
    return errors


def _get(obj: Any, dotted: str) -> Any:
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def immutable_errors(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    errors = []
    for path in rt.immutable:
        before, after = _get(old, path), _get(new, path)
        if rt.kind == "Service" and path == "spec.clusterIP":
            if after and before != after:
                # the real validation compares the clusterIPs list (which follows clusterIP) and says so
                ips = [after, *(_get(new, "spec.clusterIPs") or [])[1:]]
                errors.append(FieldError("spec.clusterIPs[0]", "Invalid value", "may not change once set", ips))
            continue  # an empty clusterIP on update keeps the allocated one
        if before != after:
            errors.append(FieldError(path, "Invalid value", "field is immutable", after))
    if not rt.group and rt.kind in ("ConfigMap", "Secret") and old.get("immutable") is True:
        errors += _immutable_data_errors(old, new)
    return errors


def _immutable_data_errors(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """A ConfigMap or Secret marked ``immutable: true`` keeps its data and the mark itself."""
    errors = []
    if new.get("immutable") is not True:
        errors.append(FieldError("immutable", "Forbidden", "field is immutable when `immutable` is set"))
    for key in ("data", "binaryData"):
        if (old.get(key) or {}) != (new.get(key) or {}):
            errors.append(FieldError(key, "Forbidden", "field is immutable when `immutable` is set"))
    return errors


def go_string_slice(values: list[str]) -> str:
    """How Go's ``%#v`` prints a ``[]string`` (error messages quote values that way)."""
    return "[]string{" + ", ".join(json.dumps(v) for v in values) + "}"


def new_finalizer_errors(old_meta: dict[str, Any], meta: dict[str, Any]) -> list[FieldError]:
    """No finalizer may be added to an object being deleted. The real server reports it twice: once from
    the generic registry's metadata check, once from the kind's own update validation."""
    if not old_meta.get("deletionTimestamp"):
        return []
    added = sorted({f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])})
    if not added:
        return []
    error = FieldError("metadata.finalizers", "Forbidden", "no new finalizers can be added if the object is being "
                       f"deleted, found new finalizers {go_string_slice(added)}")
    return [error, error]


_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
_MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
# MicroTime fields of built-in kinds, by (group, kind): a value the Go decoder cannot parse is a 400
MICRO_TIME_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("coordination.k8s.io", "Lease"): ("spec.acquireTime", "spec.renewTime"),
    ("", "Event"): ("eventTime", "series.lastObservedTime"),
    ("events.k8s.io", "Event"): ("eventTime", "series.lastObservedTime"),
}


def check_micro_times(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Raise 400 BadRequest for a MicroTime the real decoder rejects (no 6-digit fraction, or not a time)."""
    for path in MICRO_TIME_FIELDS.get((rt.group, rt.kind), ()):
        value = _get(obj, path)
        if value is None:
            continue
        if isinstance(value, str) and _MICRO_TIME.match(value):
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        seconds = re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", text)
        # Go names the first part of the input the layout could not take
        rest, element = (text[seconds.end():], ".000000") if seconds else (text, "2006")
        raise undecodable(rt.kind, rt.version, f'parsing time {json.dumps(text)} as "{_MICRO_TIME_LAYOUT}": '
                                               f'cannot parse {json.dumps(rest)} as "{element}"')


def crd_errors(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    errors: list[FieldError] = []
    group, plural = spec.get("group"), names.get("plural")
    if not group:
        errors.append(FieldError("spec.group", "Required value", ""))
    if not plural:
        errors.append(FieldError("spec.names.plural", "Required value", ""))
    if not names.get("kind"):
        errors.append(FieldError("spec.names.kind", "Required value", ""))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(FieldError("spec.scope", "Unsupported value", 'supported values: "Cluster", "Namespaced"',
                                 spec.get("scope")))
    versions = spec.get("versions") or []
    if not versions:
        errors.append(FieldError("spec.versions", "Invalid value", "must have exactly one version marked as "
                                 "storage version", versions))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(FieldError("spec.versions", "Invalid value", "must have exactly one version marked as "
                                 "storage version", [v.get("name") for v in versions]))
    if group and plural and obj["metadata"].get("name") != f"{plural}.{group}":
        errors.append(FieldError("metadata.name", "Invalid value", 'must be spec.names.plural+"."+spec.group',
                                 obj["metadata"].get("name")))
    return errors + _conversion_errors(spec.get("conversion"))


def _conversion_errors(conversion: Any) -> list[FieldError]:
    """``spec.conversion`` as kube-apiserver checks it (field paths and texts as it writes them)."""
    if not isinstance(conversion, dict):
        return []
    strategy, webhook = conversion.get("strategy", "None"), conversion.get("webhook")
    if strategy not in ("None", "Webhook"):
        return [FieldError("spec.conversion.strategy", "Unsupported value", 'supported values: "None", "Webhook"',
                           strategy)]
    if strategy == "None":
        return ([FieldError("spec.conversion.webhook", "Forbidden", "should not be set when strategy is not set "
                            "to Webhook")] if webhook is not None else [])
    client_config = (webhook or {}).get("clientConfig")
    if not isinstance(client_config, dict):
        return [FieldError("spec.conversion.webhook.clientConfig", "Required value",
                           "required when strategy is set to Webhook")]
    if bool(client_config.get("url")) == bool(client_config.get("service")):
        return [FieldError("spec.conversion.webhookClientConfig", "Required value",
                           "exactly one of url or service is required")]
    return []


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)


def ca_bundle_problem(bundle: str) -> str:
    """What kube-apiserver v1.36.3 says of a conversion webhook's ``caBundle`` (base64 of PEM), ``""`` when it
    takes it: at least one PEM block, every CERTIFICATE block a certificate, at least one of them."""
    try:
        data = base64.b64decode(bundle, validate=True)
    except (binascii.Error, ValueError):
        return "unable to load root certificates: unable to parse bytes as PEM block"
    blocks = _PEM_BLOCK.findall(data)
    if not blocks:
        return "unable to load root certificates: unable to parse bytes as PEM block"
    from cryptography import x509

    certificates = 0
    for kind, body in blocks:
        if kind != b"CERTIFICATE":
            continue
        try:
            x509.load_der_x509_certificate(base64.b64decode(b"".join(body.split())))
        except ValueError:
            return "unable to load root certificates: failed to parse certificate: x509: malformed certificate"
        certificates += 1
    return "" if certificates else "unable to load root certificates: no valid certificate authority data seen"


def _ca_bundle(crd: dict[str, Any] | None) -> str:
    conversion = ((crd or {}).get("spec") or {}).get("conversion") or {}
    bundle = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("caBundle")
    return bundle if isinstance(bundle, str) else ""


def ca_bundle_errors(obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """A changed ``caBundle`` must hold certificates — checked on update only, and not when the stored one was
    already unusable (ratcheting): what a real v1.36.3 server does (a create takes any bytes)."""
    bundle = _ca_bundle(obj)
    if old is None or not bundle or bundle == _ca_bundle(old) or (_ca_bundle(old) and ca_bundle_problem(
            _ca_bundle(old))):
        return []
    problem = ca_bundle_problem(bundle)
    return [FieldError("spec.conversion.webhookClientConfig.caBundle", "Invalid value", problem, bundle)] if problem \
        else []


def kind_errors(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldError]:
    if rt.kind == "CustomResourceDefinition":
        return crd_errors(obj) + ca_bundle_errors(obj, old)
    if rt.kind in ("RoleBinding", "ClusterRoleBinding"):
        ref = obj.get("roleRef") or {}
        errors = []
        if not ref.get("name"):
            errors.append(FieldError("roleRef.name", "Required value", ""))
        if ref.get("kind") not in ("Role", "ClusterRole"):
            errors.append(FieldError("roleRef.kind", "Unsupported value", 'supported values: "ClusterRole", "Role"',
                                     ref.get("kind")))
        return errors
    return []


def validate(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Raise 422 Invalid with every problem found in ``obj`` (and against ``old`` on update)."""
    meta = obj.get("metadata") or {}
    errors = name_errors(rt, meta.get("name")) if old is None else []
    errors += metadata_errors(meta)
    errors += kind_errors(rt, obj, old)
    errors += pod_spec_errors(rt, obj)
    if old is not None:
        errors += immutable_errors(rt, old, obj)
        errors += new_finalizer_errors(old["metadata"], meta)
    if errors:
        raise invalid(rt.kind, rt.group, meta.get("name") or "", errors)


def raise_invalid(rt: ResourceType, name: str, errors: list[FieldError]) -> ApiStatusError:
    return invalid(rt.kind, rt.group, name, errors)
