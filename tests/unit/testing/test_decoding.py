"""What the typed decoder of a built-in refuses in managedFields, with Go's messages."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.testing.apiserver.decoding import go_json, managed_fields_error

FIELD = "Go struct field ObjectMeta.metadata.managedFields"


def error(managed_fields: Any) -> str | None:
    return managed_fields_error({"metadata": {"managedFields": managed_fields}})


@pytest.mark.parametrize(("value", "expected"), [
    (None, None),
    ([], None),
    ([None, {}], None),
    ([{"manager": "m", "operation": "Bogus", "fieldsType": "FieldsV2", "fieldsV1": 3}], None),
    (["x"], f"json: cannot unmarshal string into {FIELD} of type v1.ManagedFieldsEntry"),
    ([{}, 1.5], f"json: cannot unmarshal number into {FIELD} of type v1.ManagedFieldsEntry"),
    ([[]], f"json: cannot unmarshal array into {FIELD} of type v1.ManagedFieldsEntry"),
    (True, f"json: cannot unmarshal bool into {FIELD} of type []v1.ManagedFieldsEntry"),
    ({}, f"json: cannot unmarshal object into {FIELD} of type []v1.ManagedFieldsEntry"),
    ([{"manager": 1}], "json: cannot unmarshal number into Go struct field "
                       "ManagedFieldsEntry.metadata.managedFields.manager of type string"),
    ([{"operation": True}], "json: cannot unmarshal bool into Go struct field ManagedFieldsEntry."
                            "metadata.managedFields.operation of type v1.ManagedFieldsOperationType"),
])
def test_managed_fields_errors(value: Any, expected: str | None) -> None:
    assert error(value) == expected


def test_objects_without_metadata_decode() -> None:
    assert managed_fields_error({}) is None and managed_fields_error({"metadata": "x"}) is None


def test_go_json_is_compact_and_escapes_html() -> None:
    assert go_json({"b": "<&>", "a": ["é"]}) == '{"a":["é"],"b":"\\u003c\\u0026\\u003e"}'
