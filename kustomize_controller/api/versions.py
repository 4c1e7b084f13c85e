"""The old Kustomization versions we serve again (deprecated): what each one had, and its CRD schema.

``v1`` is the hub and the storage version. ``v1beta2`` (Sep 2021 – removed upstream in v1.8),
``v1beta1`` (Sep 2020 – removed upstream in v1.7) and the late ``v1alpha1`` of the
``kustomize.toolkit.fluxcd.io`` group (Jul – Sep 2020) are served so that documents written for them
apply unchanged (``../shared/reference/kustomization-v1.md`` §9, checked against upstream's Go types
of each release).

Contract:

- ``SPEC_FIELDS[version]`` / ``STATUS_FIELDS[version]`` are the top-level ``spec`` / ``status`` keys the
  version has; ``api.conversion`` maps between them and v1.
- ``version_schema(v1_schema, version)`` derives the version's openAPIV3Schema from the v1 schema
  (which crdgen builds from the models): v1-only properties are removed, the old shapes added. The v1
  schema given is not modified.

Deliberate difference: ``v1alpha1.spec.prune`` is optional with default ``false`` (upstream required
it, yet the original documents show Kustomizations without it, e.g. the decryption example).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kustomize_controller.api.kustomization import GROUP, VERSION

__all__ = [
    "DEPRECATION_WARNINGS",
    "HUB",
    "OLD_VERSIONS",
    "SPEC_FIELDS",
    "STATUS_FIELDS",
    "VALIDATION_VALUES",
    "version_schema",
]

HUB: Final = VERSION
#: Served, deprecated, newest first (the order of the CRD's ``versions`` after v1).
OLD_VERSIONS: Final = ("v1beta2", "v1beta1", "v1alpha1")

_V1BETA2_SPEC: Final = frozenset({
    "commonMetadata", "components", "decryption", "dependsOn", "force", "healthChecks", "images", "interval",
    "kubeConfig", "patches", "patchesJson6902", "patchesStrategicMerge", "path", "postBuild", "prune",
    "retryInterval", "serviceAccountName", "sourceRef", "suspend", "targetNamespace", "timeout", "validation",
    "wait",
})
_V1BETA1_SPEC: Final = _V1BETA2_SPEC - {"commonMetadata", "components", "wait"}
_V1ALPHA1_SPEC: Final = frozenset({
    "decryption", "dependsOn", "healthChecks", "interval", "kubeConfig", "path", "prune", "serviceAccount",
    "sourceRef", "suspend", "targetNamespace", "timeout", "validation",
})

SPEC_FIELDS: Final[dict[str, frozenset[str]]] = {
    "v1beta2": _V1BETA2_SPEC,
    "v1beta1": _V1BETA1_SPEC,
    "v1alpha1": _V1ALPHA1_SPEC,
}

_OLD_STATUS: Final = frozenset({
    "conditions", "lastAppliedRevision", "lastAttemptedRevision", "lastHandledReconcileAt", "observedGeneration",
})
STATUS_FIELDS: Final[dict[str, frozenset[str]]] = {
    "v1beta2": _OLD_STATUS | {"inventory"},
    "v1beta1": _OLD_STATUS | {"snapshot"},
    "v1alpha1": _OLD_STATUS | {"snapshot"},
}

#: The values ``spec.validation`` accepted in each version.
VALIDATION_VALUES: Final[dict[str, tuple[str, ...]]] = {
    "v1beta2": ("none", "client", "server"),
    "v1beta1": ("none", "client", "server"),
    "v1alpha1": ("client", "server"),
}

_SOURCE_KINDS: Final[dict[str, list[str]]] = {
    "v1beta2": ["OCIRepository", "GitRepository", "Bucket"],
    "v1beta1": ["GitRepository", "Bucket"],
    "v1alpha1": ["GitRepository", "Bucket"],
}


def _warning(version: str) -> str:
    text = f"{GROUP}/{version} Kustomization is deprecated, upgrade to {GROUP}/{HUB}"
    if "validation" in SPEC_FIELDS[version]:
        text += " (spec.validation is ignored: objects are always dry-run on the server)"
    return text


DEPRECATION_WARNINGS: Final[dict[str, str]] = {version: _warning(version) for version in OLD_VERSIONS}

_ANY: Final = {"x-kubernetes-preserve-unknown-fields": True}
_STRING: Final = {"type": "string"}


def _patches_json6902(target: dict[str, Any]) -> dict[str, Any]:
    operation = {
        "description": "A JSON 6902 operation.",
        "type": "object",
        "required": ["op", "path"],
        "properties": {
            "op": {"description": "The operation.", "type": "string",
                   "enum": ["test", "remove", "add", "replace", "move", "copy"]},
            "path": {"description": "JSON pointer of the target location.", "type": "string"},
            "from": {"description": "JSON pointer of the source location (move, copy).", "type": "string"},
            "value": {"description": "The value (add, replace, test).", **_ANY},
        },
    }
    return {
        "description": "Deprecated (v1: spec.patches): JSON 6902 patches and the objects they apply to.",
        "type": "array",
        "items": {
            "type": "object",
            "required": ["patch", "target"],
            "properties": {
                "patch": {"description": "The operations.", "type": "array", "items": operation},
                "target": copy.deepcopy(target),
            },
        },
    }


def _snapshot() -> dict[str, Any]:
    return {
        "description": "The last applied objects by namespace and kind (v1: status.inventory).",
        "type": "object",
        "required": ["checksum", "entries"],
        "properties": {
            "checksum": {"description": "Checksum of the applied manifests.", "type": "string"},
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["kinds"],
                    "properties": {
                        "namespace": _STRING,
                        "kinds": {"type": "object", "additionalProperties": _STRING},
                    },
                },
            },
        },
    }


def version_schema(v1_schema: dict[str, Any], version: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``version``, derived from the v1 schema."""
    if version not in SPEC_FIELDS:
        raise ValueError(f"unknown Kustomization version {version!r}")
    schema = copy.deepcopy(v1_schema)
    schema["properties"]["apiVersion"]["description"] = f"The versioned schema of this object ({GROUP}/{version})."
    spec = schema["properties"]["spec"]
    props: dict[str, Any] = spec["properties"]
    target = props["patches"]["items"]["properties"]["target"]
    for key in list(props):
        if key not in SPEC_FIELDS[version]:
            del props[key]
    props["dependsOn"]["items"]["properties"].pop("readyExpr", None)
    props["decryption"]["properties"].pop("serviceAccountName", None)
    props["sourceRef"]["properties"]["kind"]["enum"] = list(_SOURCE_KINDS[version])
    kube_config = props["kubeConfig"]
    kube_config.pop("x-kubernetes-validations", None)
    kube_config["properties"].pop("configMapRef", None)
    kube_config["required"] = ["secretRef"]
    props["validation"] = {
        "description": "Deprecated and ignored (v1 has no replacement: objects are always dry-run on the server).",
        "type": "string",
        "enum": list(VALIDATION_VALUES[version]),
    }
    if version != "v1alpha1":
        props["postBuild"]["properties"].pop("substituteStrategy", None)
        props["patchesStrategicMerge"] = {
            "description": "Deprecated (v1: spec.patches): strategic merge patches.",
            "type": "array",
            "items": dict(_ANY),
        }
        props["patchesJson6902"] = _patches_json6902(target)
    if version in ("v1beta1", "v1alpha1"):
        # a Secret holding the kubeconfig under the key 'value'
        kube_config["properties"]["secretRef"]["properties"].pop("key", None)
    if version == "v1beta1":
        props["postBuild"]["properties"]["substituteFrom"]["items"]["properties"].pop("optional", None)
    if version == "v1alpha1":
        props["serviceAccount"] = {
            "description": "Removed (v1: spec.serviceAccountName, an account in the Kustomization's namespace).",
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {"name": _STRING, "namespace": _STRING},
        }
        props["path"]["pattern"] = r"^\./"
        props["prune"]["default"] = False
        spec["required"] = ["interval", "path", "sourceRef"]
    status = schema["properties"]["status"]["properties"]
    for key in list(status):
        if key not in STATUS_FIELDS[version]:
            del status[key]
    if "snapshot" in STATUS_FIELDS[version]:
        status["snapshot"] = _snapshot()
    if version == "v1alpha1":
        condition = status["conditions"]["items"]
        condition["properties"].pop("observedGeneration", None)
    return schema
