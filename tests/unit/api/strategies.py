"""Hypothesis strategies: valid Kustomization documents drawn from the *upstream* CRD schema.

Objects get their required properties plus a random subset of the optional ones; strings honour
enum, pattern and length limits; ``kubeConfig`` gets exactly one of its two refs. Timestamps are
drawn in the canonical ``metav1.Time`` form (UTC, whole seconds, ``Z``) because that is the only
form the API server writes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

_DURATION_UNITS = ("h", "m", "s", "ms")


@st.composite
def durations(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(st.integers(0, 5000), st.sampled_from(_DURATION_UNITS)), min_size=1, max_size=3))
    out = ""
    for number, unit in parts:
        frac = draw(st.one_of(st.just(""), st.integers(0, 999).map(lambda n: f".{n}")))
        out += f"{number}{frac}{unit}"
    return out


def _timestamps() -> st.SearchStrategy[str]:
    return st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2199, 1, 1)).map(
        lambda d: d.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def _string(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("format") == "date-time":
        return _timestamps()
    if "pattern" in schema:
        if "ms|s|m|h" in schema["pattern"]:
            return durations()
        strategy: st.SearchStrategy[str] = st.from_regex(schema["pattern"], fullmatch=True)
    else:
        strategy = st.text(
            st.characters(codec="utf-8", exclude_categories=("Cs",)),
            min_size=schema.get("minLength", 0),
            max_size=min(schema.get("maxLength", 16), 16),
        )
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    return strategy.filter(lambda s: len(s) >= low and (high is None or len(s) <= high))


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind == "object" and "properties" not in schema:
        if "additionalProperties" in schema:
            return st.dictionaries(_text, _string(schema["additionalProperties"]), max_size=3)
        return st.just({})
    if kind == "object":
        return _object(schema)
    if kind == "array":
        return st.lists(from_schema(schema["items"]), max_size=2)
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum", -(2**40)), max_value=2**40)
    if kind == "string":
        return _string(schema)
    raise AssertionError(f"unexpected schema {schema}")


@st.composite
def _object(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = schema["properties"]
    required = set(schema.get("required", []))
    optional = sorted(set(props) - required)
    if "x-kubernetes-validations" in schema:  # kubeConfig: exactly one of configMapRef / secretRef
        chosen = [draw(st.sampled_from(optional))]
    else:
        chosen = draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
    return {key: draw(from_schema(props[key])) for key in sorted(required) + sorted(chosen)}


@st.composite
def kustomizations(draw: st.DrawFn, root: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "apps"},
        "spec": draw(from_schema(root["properties"]["spec"])),
    }
    if draw(st.booleans()):
        doc["status"] = draw(from_schema(root["properties"]["status"]))
    return doc
