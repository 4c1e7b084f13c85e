from __future__ import annotations

import pytest

from kustomize_controller.testing.apiserver.crdschema import prune_and_default, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["interval"],
            "properties": {
                "interval": {"type": "string", "pattern": "^[0-9]+[smh]$"},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 5},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "port": {"x-kubernetes-int-or-string": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
                    "name": {"type": "string", "minLength": 1}}}},
                "pair": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                         "x-kubernetes-validations": [{"rule": "has(self.a) != has(self.b)",
                                                       "message": "exactly one of a or b"}]},
                "fixed": {"type": "string",
                          "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]},
            },
        },
        "status": {"type": "object", "default": {"observedGeneration": -1},
                   "properties": {"observedGeneration": {"type": "integer"}}},
    },
}


def obj(**spec):
    return {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "unknown": 1},
            "spec": {"interval": "1m", **spec}}


def test_prune_keeps_known_and_preserved_fields_and_fills_defaults():
    result = prune_and_default(SCHEMA, {**obj(junk=1, free={"any": {"thing": 1}}, labels={"a": "b"},
                                             items=[{"name": "n", "extra": 2}]), "top": 1})
    assert "top" not in result
    assert result["metadata"] == {"name": "x", "unknown": 1}  # metadata is not pruned here
    assert result["spec"] == {"interval": "1m", "free": {"any": {"thing": 1}}, "labels": {"a": "b"},
                              "items": [{"name": "n"}], "mode": "a"}
    assert result["status"] == {"observedGeneration": -1}


def test_null_without_nullable_is_dropped_then_defaulted():
    result = prune_and_default(SCHEMA, obj(mode=None))
    assert result["spec"]["mode"] == "a"


@pytest.mark.parametrize(("spec", "field", "kind"), [
    ({"interval": 5}, "spec.interval", "Invalid value"),
    ({"interval": "5x"}, "spec.interval", "Invalid value"),
    ({"replicas": 9}, "spec.replicas", "Invalid value"),
    ({"replicas": -1}, "spec.replicas", "Invalid value"),
    ({"replicas": "1"}, "spec.replicas", "Invalid value"),
    ({"mode": "c"}, "spec.mode", "Unsupported value"),
    ({"port": 1.5}, "spec.port", "Invalid value"),
    ({"labels": {"a": 1}}, "spec.labels[a]", "Invalid value"),
    ({"items": [{}, {}, {}]}, "spec.items", "Too many"),
    ({"items": [{"name": ""}]}, "spec.items[0].name", "Invalid value"),
    ({"pair": {}}, "spec.pair", "Invalid value"),
    ({"pair": {"a": "1", "b": "2"}}, "spec.pair", "Invalid value"),
])
def test_violations(spec, field, kind):
    errors = validate(SCHEMA, prune_and_default(SCHEMA, obj(**spec)), None)
    assert [(e.field, e.error_type) for e in errors] == [(field, kind)]


def test_required_and_valid_objects():
    assert validate(SCHEMA, prune_and_default(SCHEMA, obj(port="http", pair={"a": "1"})), None) == []
    missing = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {}}
    errors = validate(SCHEMA, missing, None)
    assert [(e.field, e.error_type) for e in errors] == [("spec.interval", "Required value")]
    assert str(errors[0]) == "spec.interval: Required value"


def test_pattern_message_matches_the_real_server():
    errors = validate(SCHEMA, obj(interval="5x"), None)
    assert str(errors[0]) == "spec.interval: Invalid value: \"5x\": spec.interval in body should match '^[0-9]+[smh]$'"


def test_transition_rules_only_on_update():
    assert validate(SCHEMA, obj(fixed="a"), None) == []
    assert validate(SCHEMA, obj(fixed="b"), obj(fixed="b")) == []
    errors = validate(SCHEMA, obj(fixed="b"), obj(fixed="a"))
    assert [(e.field, e.detail) for e in errors] == [("spec.fixed", "immutable")]
