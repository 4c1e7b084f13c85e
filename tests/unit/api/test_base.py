"""The base model: serialisation of defaults, the two validation modes, readable error lines."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field, StrictBool, ValidationError

from kustomize_controller.api.base import (
    ApiModel,
    format_validation_error,
    validate_strict,
    validation_messages,
)
from kustomize_controller.api.crdgen import model_schema


class Inner(ApiModel):
    """An inner object."""

    item_name: str
    """The name."""
    enabled: StrictBool = False


class Outer(ApiModel):
    """An outer object."""

    inner: Inner | None = None
    items: list[Inner] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    size: Annotated[str, Field(min_length=1, max_length=3)] | None = None


def test_aliases_and_defaults() -> None:
    outer = Outer.model_validate({"inner": {"itemName": "a"}})
    assert outer.inner is not None and outer.inner.item_name == "a" and outer.inner.enabled is False
    assert outer.model_dump() == {"inner": {"itemName": "a"}}
    outer.items.append(Inner(item_name="b"))
    outer.labels["x"] = "y"
    assert outer.model_dump(exclude_none=True) == {
        "inner": {"itemName": "a"},
        "items": [{"itemName": "b"}],
        "labels": {"x": "y"},
    }
    assert Inner(item_name="c", enabled=False).model_dump() == {"itemName": "c", "enabled": False}


def test_strict_rejects_unknown_at_depth_and_tolerant_ignores() -> None:
    doc: dict[str, Any] = {"inner": {"itemName": "a", "typo": 1}, "items": [{"itemName": "b", "x": 2}], "y": 3}
    assert Outer.model_validate(doc).model_dump() == {"inner": {"itemName": "a"}, "items": [{"itemName": "b"}]}
    with pytest.raises(ValidationError) as err:
        validate_strict(Outer, doc)
    assert validation_messages(err.value) == [
        "inner.typo: unknown field",
        "items[0].x: unknown field",
        "y: unknown field",
    ]


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ({"inner": {}}, "inner.itemName: required value"),
        ({"inner": {"itemName": 1}}, "inner.itemName: invalid value 1: must be a string"),
        (
            {"inner": {"itemName": "a", "enabled": "yes"}},
            'inner.enabled: invalid value "yes": must be a boolean (true or false)',
        ),
        ({"items": {}}, "items: invalid value {...}: must be a list"),
        ({"labels": []}, "labels: invalid value [...]: must be an object"),
        ({"labels": {"k": None}}, "labels.k: invalid value null: must be a string"),
        ({"size": ""}, 'size: invalid value "": must have at least 1 character'),
        ({"size": "abcd"}, 'size: invalid value "abcd": must have at most 3 characters'),
        ({"inner": "x"}, 'inner: invalid value "x": must be an object'),
    ],
)
def test_messages(doc: dict[str, Any], line: str) -> None:
    with pytest.raises(ValidationError) as err:
        Outer.model_validate(doc)
    assert validation_messages(err.value) == [line]
    assert validation_messages(err.value, prefix=("spec", "x")) == [f"spec.x.{line}"]


def test_format_joins_lines_and_root_errors_have_no_path() -> None:
    with pytest.raises(ValidationError) as err:
        Outer.model_validate({"inner": {}, "size": ""})
    assert format_validation_error(err.value) == (
        'inner.itemName: required value; size: invalid value "": must have at least 1 character'
    )
    with pytest.raises(ValidationError) as err:
        Outer.model_validate(5)
    assert validation_messages(err.value) == ["invalid value 5: must be an object"]


def test_crdgen_schema_of_a_model() -> None:
    assert model_schema(Outer) == {
        "type": "object",
        "description": "An outer object.",
        "properties": {
            "inner": {
                "type": "object",
                "description": "An inner object.",
                "properties": {
                    "itemName": {"type": "string", "description": "The name."},
                    "enabled": {"type": "boolean"},
                },
                "required": ["itemName"],
            },
            "items": {"type": "array", "items": model_schema(Inner)},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "size": {"type": "string", "minLength": 1, "maxLength": 3},
        },
    }


def test_crdgen_refuses_shapes_it_cannot_express() -> None:
    class Bad(ApiModel):
        value: int | str

    with pytest.raises(TypeError, match="unions"):
        model_schema(Bad)

    class AlsoBad(ApiModel):
        value: dict[str, int]

    with pytest.raises(TypeError, match=r"dict\[str, str\]"):
        model_schema(AlsoBad)
