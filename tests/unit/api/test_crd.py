"""Models ↔ our CRD ↔ upstream CRD.

1. The checked-in CRD is exactly what ``crdgen`` generates from the models (run ``make crd``).
2. Our CRD equals the upstream CRD once descriptions (prose) are removed: any property, type,
   enum, pattern, default, length limit, required list, validation rule, printer column or name that
   differs fails the test.
3. The models enforce every constraint of the *upstream* schema: for each enum, pattern, length
   limit, minimum, required field and type in it, a document breaking just that rule is rejected
   with an error naming the field path, and the same document without the break is accepted.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from ruamel.yaml import YAML

from kustomize_controller.api.base import validation_messages
from kustomize_controller.api.crdgen import CRD_FILE_NAME, build_crd, render_crd
from kustomize_controller.api.kustomization import Kustomization

REPO = Path(__file__).resolve().parents[3]
OUR_CRD = REPO / "manifests" / "crd" / "bases" / CRD_FILE_NAME
UPSTREAM_CRD = REPO.parent / "shared" / "reference" / "crds" / CRD_FILE_NAME


def _load(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_text())


def _without_prose(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_prose(item) for key, item in value.items() if key != "description"}
    if isinstance(value, list):
        return [_without_prose(item) for item in value]
    return value


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            where = f"{path}.{key}" if path else str(key)
            if key not in a:
                out.append(f"{where}: only in upstream")
            elif key not in b:
                out.append(f"{where}: only in ours")
            else:
                out.extend(_differences(a[key], b[key], where))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: ours {a!r} != upstream {b!r}"]


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    if not UPSTREAM_CRD.exists():
        pytest.fail(f"upstream CRD not found at {UPSTREAM_CRD} (expected shared/ next to the repository)")
    crd: dict[str, Any] = _load(UPSTREAM_CRD)
    return crd


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    (v1,) = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
    schema: dict[str, Any] = v1["schema"]["openAPIV3Schema"]
    return schema


def _v1_only(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD as upstream has it: v1 alone, no conversion (the old versions are ours, issue 18)."""
    crd = copy.deepcopy(crd)
    crd["spec"]["versions"] = [version for version in crd["spec"]["versions"] if version["name"] == "v1"]
    crd["spec"].pop("conversion", None)
    return crd


def test_checked_in_crd_is_generated_from_the_models() -> None:
    assert OUR_CRD.read_text() == render_crd(), "run `make crd` after changing the models"
    assert _load(OUR_CRD) == build_crd()


def test_generator_command_writes_the_checked_in_file() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kustomize_controller.api.crdgen"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout == OUR_CRD.read_text()


def test_crd_kustomization_lists_the_base() -> None:
    kustomization = _load(REPO / "manifests" / "crd" / "kustomization.yaml")
    assert kustomization["resources"] == [f"bases/{CRD_FILE_NAME}"]


def test_equivalent_to_upstream(upstream: dict[str, Any]) -> None:
    ours = _without_prose(_v1_only(build_crd()))
    assert ours["spec"]["versions"][0]["storage"] is True
    theirs = _without_prose(copy.deepcopy(upstream))
    # The generator's version stamp is the only metadata we do not carry.
    theirs["metadata"]["annotations"].pop("controller-gen.kubebuilder.io/version")
    assert _differences(ours, theirs) == []


def test_difference_detector_sees_changes(upstream: dict[str, Any]) -> None:
    """Guard against a comparison that can never fail: break one detail of each kind and look."""
    base = _without_prose(upstream)
    for mutate in (
        lambda s: s["sourceRef"]["properties"]["kind"]["enum"].pop(),
        lambda s: s.__setitem__("interval", {**s["interval"], "pattern": "^x$"}),
        lambda s: s["force"].pop("default"),
        lambda s: s["targetNamespace"].__setitem__("maxLength", 64),
        lambda s: s.pop("wait"),
        lambda s: s["kubeConfig"]["x-kubernetes-validations"].pop(),
    ):
        changed = copy.deepcopy(base)
        mutate(_schema(changed)["properties"]["spec"]["properties"])
        assert _differences(changed, base), mutate


# --- the models enforce the upstream schema ---------------------------------------------------------

_SAMPLE_BY_PATTERN = {
    r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$": "1m",
    r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$": "Succeeded",
}


def _sample(schema: dict[str, Any]) -> Any:
    """A small value valid for ``schema`` (objects get their required properties only)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        out = {key: _sample(props[key]) for key in schema.get("required", [])}
        if "x-kubernetes-validations" in schema:  # kubeConfig: exactly one of two refs
            first = sorted(props)[0]
            out[first] = _sample(props[first])
        return out
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if schema.get("format") == "date-time":
        return "2024-05-01T10:00:00Z"
    if "pattern" in schema:
        return _SAMPLE_BY_PATTERN.get(schema["pattern"], "Ready")
    return "x" * max(1, schema.get("minLength", 1))


def _leaves(schema: dict[str, Any], path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], dict]]:
    out = [(path, schema)]
    if schema.get("type") == "object":
        for key, prop in sorted(schema.get("properties", {}).items()):
            out.extend(_leaves(prop, (*path, key)))
    elif schema.get("type") == "array":
        out.extend(_leaves(schema["items"], (*path, 0)))
    return out


def _schema_at(root: dict[str, Any], path: tuple[str | int, ...]) -> dict[str, Any]:
    node = root
    for part in path:
        node = node["items"] if isinstance(part, int) else node["properties"][part]
    return node


def _document_with(root: dict[str, Any], path: tuple[str | int, ...]) -> dict[str, Any]:
    """A valid Kustomization in which every object/array on ``path`` exists."""
    doc: dict[str, Any] = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization"}
    doc["metadata"] = {"name": "app", "namespace": "apps"}
    doc["spec"] = _sample(root["properties"]["spec"])
    node: Any = doc
    for depth, part in enumerate(path[:-1]):
        child_schema = _schema_at(root, path[: depth + 1])
        if isinstance(part, int):
            if not node:
                node.append(_sample(child_schema))
        elif part not in node:
            if depth > 0 and "x-kubernetes-validations" in _schema_at(root, path[:depth]):
                node.clear()  # kubeConfig: the sample's other ref would make two
            node[part] = _sample(child_schema)
        node = node[part]
    return doc


def _set(doc: dict[str, Any], path: tuple[str | int, ...], value: Any, *, delete: bool = False) -> None:
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    if delete:
        del node[path[-1]]
    elif isinstance(path[-1], int) and not node:
        node.append(value)
    else:
        node[path[-1]] = value


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _wrong_type(schema: dict[str, Any]) -> Any:
    return {"string": 7, "boolean": "true", "integer": "7", "array": "x", "object": "x"}[schema["type"]]


def _cases(root: dict[str, Any]) -> list[tuple[str, tuple[str | int, ...], Any, str]]:
    """(case id, path, bad value or DELETE, expected message fragment) for every rule in ``root``."""
    cases: list[tuple[str, tuple[str | int, ...], Any, str]] = []
    for section in ("spec", "status"):
        for path, schema in _leaves(root["properties"][section], (section,)):
            if path == ("status",):
                continue
            name = _dotted(path)
            if "type" in schema and path != ("spec",):
                cases.append((f"{name}:type", path, _wrong_type(schema), "value "))
            if "enum" in schema:
                cases.append((f"{name}:enum", path, "NotInTheEnum", "unsupported value"))
            if "pattern" in schema:
                cases.append((f"{name}:pattern", path, "not valid!", "must match"))
            if "minLength" in schema:
                cases.append((f"{name}:minLength", path, "x" * (schema["minLength"] - 1), "at least"))
            if "maxLength" in schema:
                value = "A" * (schema["maxLength"] + 1)
                cases.append((f"{name}:maxLength", path, value, "at most"))
            if "minimum" in schema:
                cases.append((f"{name}:minimum", path, schema["minimum"] - 1, "greater than or equal"))
            for key in schema.get("required", []):
                cases.append((f"{name}.{key}:required", (*path, key), _DELETE, "required value"))
    return cases


_DELETE = object()


@functools.cache
def _upstream_schema() -> dict[str, Any]:
    """Read once; callers must not mutate it."""
    return _schema(_load(UPSTREAM_CRD))


@pytest.mark.parametrize(
    ("path", "bad", "fragment"),
    [pytest.param(p, b, f, id=i) for i, p, b, f in _cases(_upstream_schema())],
)
def test_models_enforce_every_upstream_rule(path: tuple[str | int, ...], bad: Any, fragment: str) -> None:
    root = _upstream_schema()
    doc = _document_with(root, path)
    Kustomization.model_validate(doc)  # valid before the break
    _set(doc, path, bad, delete=bad is _DELETE)
    with pytest.raises(ValidationError) as err:
        Kustomization.model_validate(doc)
    expected = _dotted(path)
    lines = validation_messages(err.value)
    assert any(line.startswith(f"{expected}: ") and fragment in line for line in lines), lines


def test_rule_table_covers_every_kind_of_rule() -> None:
    cases = {case_id.rsplit(":", 1)[1] for case_id, *_ in _cases(_upstream_schema())}
    assert cases == {"type", "enum", "pattern", "minLength", "maxLength", "minimum", "required"}
    assert len(_cases(_upstream_schema())) > 100


def test_strict_mode_rejects_unknown_fields_at_every_object_level() -> None:
    root = _upstream_schema()
    objects = [
        path
        for path, schema in _leaves(root["properties"]["spec"], ("spec",))
        if schema.get("type") == "object" and "properties" in schema
    ]
    assert len(objects) > 10
    for path in objects:
        doc = _document_with(root, (*path, "x"))
        _set(doc, (*path, "unknownField"), "1")
        Kustomization.model_validate(doc)  # tolerant mode ignores it
        with pytest.raises(ValidationError) as err:
            Kustomization.model_validate(doc, extra="forbid")
        assert f"{_dotted((*path, 'unknownField'))}: unknown field" in validation_messages(err.value)


def test_old_versions_are_served_deprecated_and_converted_by_the_webhook() -> None:
    crd = build_crd()
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert list(versions) == ["v1", "v1beta2", "v1beta1", "v1alpha1"]
    assert [name for name, v in versions.items() if v["storage"]] == ["v1"]
    for name in ("v1beta2", "v1beta1", "v1alpha1"):
        version = versions[name]
        assert version["served"] and version["deprecated"]
        assert "upgrade to kustomize.toolkit.fluxcd.io/v1" in version["deprecationWarning"]
        assert version["subresources"] == {"status": {}}
        assert "conditions" in version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    spec = {name: v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] for name, v in versions.items()}
    assert "patchesStrategicMerge" in spec["v1beta2"] and "patchesStrategicMerge" not in spec["v1"]
    assert "serviceAccount" in spec["v1alpha1"] and "serviceAccountName" not in spec["v1alpha1"]
    assert spec["v1beta1"]["sourceRef"]["properties"]["kind"]["enum"] == ["GitRepository", "Bucket"]
    assert "conversion" not in crd["spec"]  # the controller owns spec.conversion (conversion/crd.py)
