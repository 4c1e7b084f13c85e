"""Generate the Kustomization CRD from the pydantic models (the models are the source of truth).

Usage: ``python -m kustomize_controller.api.crdgen > manifests/crd/bases/<file>.yaml`` (``make crd``).

Contract:

- ``build_crd()`` returns the CRD as plain data; ``render_crd()`` returns it as YAML text with keys
  sorted at every level, so regenerating an unchanged model gives a byte-identical file.
- The structural schema is derived from the field types: ``str`` → string, ``bool`` → boolean,
  ``int`` → integer/int64, timestamps → string/date-time, ``StrEnum`` → string with ``enum`` (in
  definition order), ``list[X]`` → array, ``dict[str, str]`` → object with string values, models →
  objects with ``properties`` and a sorted ``required`` list. Constraints come from field metadata
  (``pattern``, ``min_length``, ``max_length``, ``ge``). Descriptions come from the attribute
  docstrings and class docstrings.
- Schema details that are not Python types are explicit markers in ``json_schema_extra``:
  ``x-crd-default`` (``base.crd_default``), ``x-crd-schema`` (replace the derived schema),
  ``x-crd-required: False`` (required in Python, optional in the CRD) and, in a model's config,
  ``x-kubernetes-validations``.

Not promised: only the type shapes used by our models are supported; anything else raises
``TypeError`` at generation time rather than producing a wrong schema.
"""

from __future__ import annotations

import inspect
import io
import types
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Final, Union, get_args, get_origin

import annotated_types
from pydantic import AwareDatetime, BaseModel
from pydantic.fields import FieldInfo

from kustomize_controller.api.kustomization import GROUP, KIND, PLURAL, VERSION, Kustomization
from kustomize_controller.api.meta import Key
from kustomize_controller.api.versions import DEPRECATION_WARNINGS, OLD_VERSIONS, version_schema

__all__ = [
    "CONVERSION_PATH",
    "CONVERSION_SERVICE",
    "CRD_FILE_NAME",
    "CRD_NAME",
    "build_crd",
    "model_schema",
    "render_crd",
]

CRD_FILE_NAME: Final = f"{GROUP}_{PLURAL}.yaml"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"
#: The Service in front of the controller's conversion webhook (manifests/webhook), and its path.
CONVERSION_SERVICE: Final = "kustomize-controller-webhook"
CONVERSION_PATH: Final = "/convert"

_API_VERSION_DOC: Final = "The versioned schema of this object (kustomize.toolkit.fluxcd.io/v1)."
_KIND_DOC: Final = "The REST resource this object represents (Kustomization)."

_PRINTER_COLUMNS: Final = [
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    {"jsonPath": '.status.conditions[?(@.type=="Ready")].status', "name": "Ready", "type": "string"},
    {"jsonPath": '.status.conditions[?(@.type=="Ready")].message', "name": "Status", "type": "string"},
]


def _doc(text: str | None) -> str | None:
    return inspect.cleandoc(text) if text else None


def _constraints(metadata: list[Any] | tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, FieldInfo):
            out.update(_constraints(item.metadata))
        elif isinstance(item, annotated_types.MinLen):
            out["minLength"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            out["maxLength"] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            out["minimum"] = item.ge
        elif getattr(item, "pattern", None) is not None:
            out["pattern"] = item.pattern
    return out


def _type_schema(annotation: Any) -> dict[str, Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        schema = _type_schema(base)
        schema.update(_constraints(metadata))
        return schema
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"crdgen: unions other than X | None are not supported: {annotation!r}")
        return _type_schema(members[0])
    if origin is list:
        (item,) = get_args(annotation)
        return {"type": "array", "items": _type_schema(item)}
    if origin is dict:
        key, value = get_args(annotation)
        if key is not str or value is not str:
            raise TypeError(f"crdgen: only dict[str, str] is supported: {annotation!r}")
        return {"type": "object", "additionalProperties": {"type": "string"}}
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return model_schema(annotation)
        if issubclass(annotation, Enum):
            return {"type": "string", "enum": [member.value for member in annotation]}
        if issubclass(annotation, bool):
            return {"type": "boolean"}
        if issubclass(annotation, int):
            return {"type": "integer", "format": "int64"}
        if issubclass(annotation, str):
            return {"type": "string"}
        if issubclass(annotation, datetime | AwareDatetime):
            return {"type": "string", "format": "date-time"}
    raise TypeError(f"crdgen: unsupported type {annotation!r}")


def _field_schema(field: FieldInfo) -> dict[str, Any]:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "x-crd-schema" in extra:
        schema = dict(extra["x-crd-schema"])  # type: ignore[arg-type]
    else:
        schema = _type_schema(field.annotation)
        schema.update(_constraints(field.metadata))
    if "x-crd-default" in extra:
        schema["default"] = extra["x-crd-default"]
    description = _doc(field.description)
    if description:
        schema["description"] = description
    return schema


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI v3 structural schema of ``model`` (properties keyed by JSON name)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        properties[key] = _field_schema(field)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if field.is_required() and extra.get("x-crd-required", True):
            required.append(key)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = sorted(required)
    description = _doc(model.__doc__)
    if description:
        schema["description"] = description
    config_extra = model.model_config.get("json_schema_extra")
    if isinstance(config_extra, dict) and "x-kubernetes-validations" in config_extra:
        schema["x-kubernetes-validations"] = config_extra["x-kubernetes-validations"]
    return schema


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def _old_version(schema: dict[str, Any], version: str) -> dict[str, Any]:
    """A served, deprecated old version (schema as it had it; see ``api.versions``)."""
    return {
        "name": version,
        "served": True,
        "storage": False,
        "deprecated": True,
        "deprecationWarning": DEPRECATION_WARNINGS[version],
        "additionalPrinterColumns": _PRINTER_COLUMNS,
        "schema": {"openAPIV3Schema": version_schema(schema, version)},
        "subresources": {"status": {}},
    }


def build_crd() -> dict[str, Any]:
    """The Kustomization CustomResourceDefinition as plain data.

    ``v1`` (first, the storage version) is upstream's; the old versions follow, served and deprecated,
    converted by the controller's webhook. ``spec.conversion`` is not declared here (as upstream's CRD
    has none): the controller owns it and writes it at start (``conversion/crd.py`` says why).
    """
    schema = model_schema(Kustomization)
    schema["properties"]["apiVersion"]["description"] = _API_VERSION_DOC
    schema["properties"]["kind"]["description"] = _KIND_DOC
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            # Flux must never run variable substitution over its own CRD.
            "annotations": {Key.SUBSTITUTE: Key.DISABLED},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "categories": ["all", "fluxcd", "fluxcd-appliers"],
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "shortNames": ["ks"],
                "singular": KIND.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": _PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                },
                *(_old_version(schema, version) for version in OLD_VERSIONS),
            ],
        },
    }
    return _sorted(crd)  # type: ignore[no-any-return]


def render_crd() -> str:
    """``build_crd()`` as a YAML document (``---`` first, block style, 2-space indent)."""
    # imported here: the controller imports this module for its constants, and never renders the CRD
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.explicit_start = True
    out = io.StringIO()
    yaml.dump(build_crd(), out)
    return out.getvalue()


if __name__ == "__main__":
    print(render_crd(), end="")
