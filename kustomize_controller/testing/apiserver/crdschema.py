"""Structural-schema handling of custom resources: pruning, defaulting and validation.

Applied to every stored write of a custom resource whose CRD version has an ``openAPIV3Schema``, in the
real server's order: drop unknown fields (pruning; ``x-kubernetes-preserve-unknown-fields`` keeps them),
fill ``default``s of absent properties, then validate. Validation covers ``type`` (with
``x-kubernetes-int-or-string`` and ``nullable``), ``required``, ``enum``, ``pattern``, ``minLength``/
``maxLength``, ``minimum``/``maximum`` (and exclusive forms), ``minItems``/``maxItems``,
``minProperties``/``maxProperties`` and ``x-kubernetes-validations`` CEL rules with ``self`` (transition
rules using ``oldSelf`` are checked on updates only, as on a real server). Messages follow the real ones
(``spec.interval: Invalid value: "1x": spec.interval in body should match '<pattern>'``).

Not done: ``format`` checks, ``messageExpression``, CEL cost limits, the ``metadata`` schema beyond
what validation.py checks.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import cel

from .errors import FieldError, render_value

Schema = Mapping[str, Any]

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prune_and_default(schema: Schema, obj: dict[str, Any], unknown: list[str] | None = None) -> dict[str, Any]:
    """A copy of ``obj`` with unknown fields dropped and defaults filled in (metadata left alone).

    The dotted paths of dropped fields are appended to ``unknown`` (for field validation).
    """
    result = {k: obj[k] for k in _ROOT_KEEP if k in obj}
    rest = {k: v for k, v in obj.items() if k not in _ROOT_KEEP}
    processed = _walk(schema, rest, "", unknown if unknown is not None else [], root=True)
    if isinstance(processed, dict):
        result.update(processed)
    return result


def _walk(schema: Schema, value: Any, path: str, unknown: list[str], *, root: bool = False) -> Any:
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        out: dict[str, Any] = {}
        for key, child in value.items():
            child_path = f"{path}.{key}" if path else key
            if key in props:
                if child is None and not props[key].get("nullable"):
                    continue
                out[key] = _walk(props[key], child, child_path, unknown)
            elif isinstance(additional, Mapping):
                out[key] = _walk(additional, child, child_path, unknown)
            elif preserve or additional is True:
                out[key] = child
            else:
                unknown.append(child_path)
        for key, sub in props.items():
            if key not in out and "default" in sub and not (root and key in _ROOT_KEEP):
                out[key] = _walk(sub, copy.deepcopy(sub["default"]), f"{path}.{key}" if path else key, unknown)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            return [_walk(items, item, f"{path}[{i}]", unknown) for i, item in enumerate(value)]
        return value
    return value


_TYPES = {"string": str, "boolean": bool, "object": dict, "array": list}


def _type_ok(schema: Schema, value: Any) -> bool:
    if value is None:
        return bool(schema.get("nullable"))
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    wanted = schema.get("type")
    if wanted is None:
        return True
    if wanted == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if wanted == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    expected = _TYPES.get(wanted)
    return expected is None or isinstance(value, expected)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _shown(value: Any) -> Any:
    """How 'Invalid value:' shows a value: scalars as themselves, containers by their type name."""
    return _type_name(value) if isinstance(value, (dict, list)) else value


@lru_cache(maxsize=512)
def _program(rule: str) -> Any:
    return cel.compile(rule)


def validate(schema: Schema, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    props: Mapping[str, Any] = schema.get("properties") or {}
    for key, value in obj.items():
        if key in _ROOT_KEEP or key not in props:
            continue
        _validate(props[key], value, key, errors, (old or {}).get(key) if old is not None else None,
                  old is not None)
    for key in schema.get("required") or []:
        if key not in obj and key not in _ROOT_KEEP:
            errors.append(FieldError(key, "Required value", ""))
    return errors


def _validate(schema: Schema, value: Any, path: str, errors: list[FieldError], old: Any, updating: bool) -> None:
    if not _type_ok(schema, value):
        wanted = schema.get("type", "string")
        errors.append(FieldError(path, "Invalid value", f"{path} in body must be of type {wanted}: "
                                 f'"{_type_name(value)}"', _type_name(value), reason="FieldValueTypeInvalid"))
        return
    if value is None:
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in enum)
        errors.append(FieldError(path, "Unsupported value", f"supported values: {supported}", value))
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if pattern is not None and re.search(pattern, value) is None:
            errors.append(FieldError(path, "Invalid value", f"{path} in body should match '{pattern}'", value))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(FieldError(path, "Invalid value", f"{path} in body should be at least "
                                     f"{schema['minLength']} chars long", value))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(FieldError(path, "Too long", f"may not be more than {schema['maxLength']} bytes",
                                     value, show_value=False))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_bounds(schema, value, path, errors)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(FieldError(path, "Invalid value", f"{path} in body should have at least "
                                     f"{schema['minItems']} items", _shown(value)))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(FieldError(path, "Too many", f"must have at most {schema['maxItems']} items",
                                     _shown(value), show_value=False))
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                _validate(items, item, f"{path}[{index}]", errors, None, False)
        if schema.get("x-kubernetes-list-type") == "set":
            for index, item in enumerate(value):
                if item in value[:index]:
                    errors.append(FieldError(f"{path}[{index}]", "Duplicate value", render_value(item)))
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            child_path = f"{path}.{key}" if key in props else f"{path}[{key}]"
            old_child = old.get(key) if isinstance(old, dict) else None
            if key in props:
                _validate(props[key], child, child_path, errors, old_child, updating and old_child is not None)
            elif isinstance(additional, Mapping):
                _validate(additional, child, child_path, errors, old_child, updating and old_child is not None)
        for key in schema.get("required") or []:
            if key not in value:
                errors.append(FieldError(f"{path}.{key}", "Required value", ""))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            errors.append(FieldError(path, "Invalid value", f"{path} in body should have at least "
                                     f"{schema['minProperties']} properties", _shown(value)))
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(FieldError(path, "Too many", f"must have at most {schema['maxProperties']} items",
                                     _shown(value), show_value=False))
    _cel_rules(schema, value, path, errors, old, updating)


def _check_bounds(schema: Schema, value: float, path: str, errors: list[FieldError]) -> None:
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") is True and value == low):
            relation = "greater than" if schema.get("exclusiveMinimum") is True else "greater than or equal to"
            errors.append(FieldError(path, "Invalid value", f"{path} in body should be {relation} {low}", value))
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") is True and value == high):
            relation = "less than" if schema.get("exclusiveMaximum") is True else "less than or equal to"
            errors.append(FieldError(path, "Invalid value", f"{path} in body should be {relation} {high}", value))


def _cel_rules(schema: Schema, value: Any, path: str, errors: list[FieldError], old: Any, updating: bool) -> None:
    for rule in schema.get("x-kubernetes-validations") or []:
        expression = rule.get("rule", "")
        transition = "oldSelf" in expression
        if transition and not updating:
            continue
        context: dict[str, Any] = {"self": value}
        if transition:
            context["oldSelf"] = old
        try:
            ok = _program(expression).execute(context)
        except (ValueError, KeyError, TypeError, RuntimeError) as err:
            errors.append(FieldError(path, "Invalid value", f"rule evaluation failed: {err}", _shown(value)))
            continue
        if ok is not True:
            message = rule.get("message") or f"failed rule: {expression}"
            field = path + (rule.get("fieldPath") or "")
            errors.append(FieldError(field, "Invalid value", message,
                                     _shown(value)))
