"""The base of every API model: aliases, the two validation modes, and how models serialise.

Contract (every model in ``kustomize_controller.api`` derives from ``ApiModel``):

- Python attributes are the snake_case of the JSON names; the JSON (camelCase) name is the alias.
  Both are accepted on input (``validate_by_name``); ``model_dump(by_alias=True)`` writes JSON names.
- Two validation modes over the same classes:

  * tolerant (default, ``Model.model_validate(obj)``): unknown fields are ignored. Objects read from
    the cluster use it, because a newer CRD may add fields this controller does not know yet.
  * strict (``validate_strict(Model, obj)``, or ``Model.model_validate(obj, extra="forbid")``):
    unknown fields anywhere in the tree are errors. Files handed to the CLI use it, so typos do not
    pass silently.

- Round trip: fields that were absent on input stay absent on output. A field whose value came from
  a default (``force: false``, an empty list, an empty status) is not written unless it was set
  explicitly (input, constructor, assignment) or changed in place (``obj.status.x = 1``, a list
  append). With ``exclude_none=True``,
  ``Model.model_validate(doc).model_dump(by_alias=True, exclude_none=True) == doc`` for valid input.
- Values are not coerced: ``prune: "true"`` or ``interval: 300`` are errors, as the API server
  refuses them (bool and int fields are strict; timestamps are RFC 3339 strings, or datetimes in code).
- Enum-typed attributes hold the plain string (``use_enum_values``), so dumps contain only builtin
  types and YAML writers need no representers. Compare them with the ``StrEnum`` members (equal to
  their values); do not call ``.value`` on them.
- ``format_validation_error`` turns a pydantic ``ValidationError`` into one readable line per problem,
  each starting with the JSON field path (``spec.interval: ...``); these lines end up in status
  conditions and CLI output.

Not promised: unknown fields are dropped, not preserved, in tolerant mode.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "ApiModel",
    "crd_default",
    "format_validation_error",
    "validate_strict",
    "validation_messages",
]

_M = TypeVar("_M", bound=BaseModel)


class ApiModel(BaseModel):
    """Base class: camelCase aliases, tolerant by default, unset defaults omitted on output."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        use_enum_values=True,
        use_attribute_docstrings=True,
        validate_assignment=False,
    )

    @model_serializer(mode="wrap")
    def _omit_unset_defaults(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        defaults = _defaults_of(type(self))
        if not defaults:
            return data
        fields_set = self.model_fields_set
        for name, key, default in defaults:
            # Written when set explicitly, or when a default was changed in place
            # (``obj.status.observedGeneration = 3``, a list append).
            if name in fields_set or getattr(self, name) != default:
                continue
            # ``serialize_by_alias`` in the config wins over ``info.by_alias``; drop whichever key is there.
            data.pop(key, None)
            data.pop(name, None)
        return data


def _defaults_of(model: type[ApiModel]) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, JSON name, default value) of the optional fields of ``model``, computed once.

    Stored on the class itself; the default values are only compared with, never handed out, so one
    shared instance per class is safe.
    """
    cached: tuple[tuple[str, str, Any], ...] | None = model.__dict__.get("_api_defaults")
    if cached is None:
        cached = tuple(
            (name, field.alias or name, field.get_default(call_default_factory=True))
            for name, field in model.model_fields.items()
            if not field.is_required()
        )
        type.__setattr__(model, "_api_defaults", cached)
    return cached


def validate_strict(model: type[_M], obj: Any) -> _M:
    """Validate ``obj`` rejecting unknown fields at every depth (for files given to the CLI)."""
    return model.model_validate(obj, extra="forbid")


def crd_default(value: Any) -> dict[str, Any]:
    """Mark a field's ``default:`` in the generated CRD (``json_schema_extra=crd_default(False)``).

    Kept apart from the Python default on purpose: the CRD defaults only a few fields, while the
    models give every list an empty default for the convenience of callers.
    """
    return {"x-crd-default": value}


_MESSAGES: Final[dict[str, str]] = {
    "missing": "required value",
    "extra_forbidden": "unknown field",
    "bool_type": "must be a boolean (true or false)",
    "bool_parsing": "must be a boolean (true or false)",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, list | tuple):
        return "[...]"
    return type(value).__name__


def _plural(count: Any, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _message(error: Any) -> str:
    kind: str = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    value = error.get("input")
    if kind in _MESSAGES:
        text = _MESSAGES[kind]
        if kind not in ("missing", "extra_forbidden"):
            text = f"invalid value {_quote(value)}: {text}"
        return text
    if kind == "string_pattern_mismatch":
        return f"invalid value {_quote(value)}: must match '{ctx.get('pattern')}'"
    if kind == "enum" or kind == "literal_error":
        return f"unsupported value {_quote(value)}: must be one of {ctx.get('expected')}"
    if kind == "string_too_short":
        return f"invalid value {_quote(value)}: must have at least {_plural(ctx.get('min_length'), 'character')}"
    if kind == "string_too_long":
        return f"invalid value {_quote(value)}: must have at most {_plural(ctx.get('max_length'), 'character')}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        msg: str = error["msg"]
        return f"invalid value {_quote(value)}: {msg[0].lower()}{msg[1:]}"
    if kind == "value_error":
        # Our validators raise ValueError with a complete sentence; pydantic prefixes "Value error, ".
        return str(ctx.get("error", error["msg"]))
    msg = str(error["msg"]) or kind
    return f"invalid value {_quote(value)}: {msg[0].lower()}{msg[1:]}"


def validation_messages(err: ValidationError, *, prefix: tuple[str | int, ...] = ()) -> list[str]:
    """One ``<field path>: <problem>`` line per error, in pydantic's order (field order of the model).

    ``prefix`` is prepended to every path, e.g. ``("spec",)`` when ``err`` came from validating a spec.
    """
    lines: list[str] = []
    for error in err.errors(include_url=False):
        loc = prefix + tuple(error["loc"])
        path = _path(loc)
        text = _message(error)
        lines.append(f"{path}: {text}" if path else text)
    return lines


def format_validation_error(err: ValidationError, *, prefix: tuple[str | int, ...] = ()) -> str:
    """All problems of ``err`` as one string, ``; `` separated (fits a condition message)."""
    return "; ".join(validation_messages(err, prefix=prefix))
