"""The Kustomization model: round trips, validation tables with field paths, derived values."""

from __future__ import annotations

import copy
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError
from ruamel.yaml import YAML

from kustomize_controller.api.base import validation_messages
from kustomize_controller.api.kustomization import (
    DeletionPolicy,
    InvalidKustomizationError,
    Kustomization,
    KustomizationSpec,
    effective_retry_interval,
    effective_timeout,
    parse_kustomization,
    parse_kustomization_strict,
)

from .strategies import kustomizations

REPO = Path(__file__).resolve().parents[3]
UPSTREAM_EXAMPLES = Path(__file__).with_name("testdata") / "upstream_doc_examples.yaml"
UPSTREAM_CRD = REPO.parent / "shared" / "reference" / "crds" / "kustomize.toolkit.fluxcd.io_kustomizations.yaml"
OUR_DOC = REPO / "docs" / "api.md"

_REQUIRED_SPEC = {"interval": "10m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "repo"}}


def _yaml_docs(text: str) -> list[Any]:
    return [doc for doc in YAML(typ="safe", pure=True).load_all(text) if doc]


def _is_kustomization(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") == "Kustomization"
        and str(doc.get("apiVersion", "")).startswith("kustomize.toolkit.fluxcd.io/")
    )


def _upstream_examples() -> list[dict[str, Any]]:
    return [doc for doc in _yaml_docs(UPSTREAM_EXAMPLES.read_text()) if _is_kustomization(doc)]


def _our_doc_examples() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", OUR_DOC.read_text(), re.S)
    return [doc for block in blocks for doc in _yaml_docs(block) if _is_kustomization(doc)]


def _complete(doc: dict[str, Any]) -> dict[str, Any]:
    """Documentation snippets often show only the fields they explain; add the required ones."""
    out = copy.deepcopy(doc)
    out["spec"] = {**_REQUIRED_SPEC, **(out.get("spec") or {})}
    return out


def _round_trip(doc: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    model = parse_kustomization(doc, strict=strict)
    return model.model_dump(by_alias=True, exclude_none=True)


def _minimal(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "apps"},
        "spec": {**copy.deepcopy(_REQUIRED_SPEC), **spec},
    }


def _errors(doc: dict[str, Any], *, strict: bool = False) -> list[str]:
    with pytest.raises(InvalidKustomizationError) as err:
        parse_kustomization(doc, strict=strict)
    assert str(err.value).startswith("Kustomization/apps/app: ")
    return err.value.messages


# --- round trips ---------------------------------------------------------------------------------


def test_upstream_examples_are_all_extracted() -> None:
    assert len(_upstream_examples()) == 25


@pytest.mark.parametrize("index", range(25))
def test_round_trip_upstream_doc_examples(index: int) -> None:
    doc = _complete(_upstream_examples()[index])
    assert _round_trip(doc, strict=True) == doc


def test_complete_upstream_examples_round_trip_without_completion() -> None:
    complete = [doc for doc in _upstream_examples() if all(k in (doc.get("spec") or {}) for k in _REQUIRED_SPEC)]
    assert len(complete) >= 9
    for doc in complete:
        assert _round_trip(doc, strict=True) == doc


def test_round_trip_our_doc_examples() -> None:
    examples = _our_doc_examples()
    assert examples, "docs/api.md must contain a complete example"
    for doc in examples:
        assert _round_trip(doc, strict=True) == doc


def _upstream_schema() -> dict[str, Any]:
    crd = YAML(typ="safe", pure=True).load(UPSTREAM_CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


_SCHEMA = _upstream_schema()


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(kustomizations(_SCHEMA))
def test_round_trip_generated_documents(doc: dict[str, Any]) -> None:
    assert _round_trip(doc, strict=True) == doc
    assert _round_trip(doc, strict=False) == doc


def test_absent_defaults_stay_absent_and_explicit_ones_stay() -> None:
    doc = _minimal(postBuild={"substituteFrom": [{"kind": "Secret", "name": "vars"}]})
    model = Kustomization.model_validate(doc)
    assert model.spec.force is False
    assert model.spec.post_build is not None
    assert model.spec.post_build.substitute_from[0].optional is False
    assert model.spec.depends_on == []
    assert model.status.observed_generation == -1
    assert model.model_dump(by_alias=True, exclude_none=True) == doc
    explicit = _minimal(force=False, dependsOn=[], wait=False)
    assert _round_trip(explicit, strict=True) == explicit


def test_fields_set_in_code_are_written() -> None:
    model = Kustomization.model_validate(_minimal())
    model.spec.force = True
    model.status.observed_generation = 3
    out = model.model_dump(by_alias=True, exclude_none=True)
    assert out["spec"]["force"] is True
    assert out["status"] == {"observedGeneration": 3}


def test_snake_case_names_are_accepted_and_camel_case_written() -> None:
    spec = KustomizationSpec.model_validate(
        {"interval": "1m", "prune": False, "source_ref": {"kind": "Bucket", "name": "b"}, "target_namespace": "x"}
    )
    assert spec.model_dump(exclude_none=True) == {
        "interval": "1m",
        "prune": False,
        "sourceRef": {"kind": "Bucket", "name": "b"},
        "targetNamespace": "x",
    }


# --- tolerant vs strict --------------------------------------------------------------------------


def test_tolerant_mode_ignores_fields_of_a_newer_crd() -> None:
    doc = _minimal(futureField={"x": 1})
    doc["status"] = {"observedGeneration": 2, "futureStatus": "x"}
    model = Kustomization.model_validate(doc)
    assert model.status.observed_generation == 2
    assert "futureField" not in model.model_dump(by_alias=True)["spec"]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("spec", "intervall"), "5m", "spec.intervall: unknown field"),
        (("spec", "sourceRef", "nmae"), "x", "spec.sourceRef.nmae: unknown field"),
        (("metadata", "labelz"), {}, "metadata.labelz: unknown field"),
        (("spec", "validation"), "client", "spec.validation: unknown field"),  # v1beta1 field, gone in v1
        (("spec", "patchesStrategicMerge"), [], "spec.patchesStrategicMerge: unknown field"),
        (("statuz",), {}, "statuz: unknown field"),
    ],
)
def test_strict_mode_rejects_unknown_fields(path: tuple[str, ...], value: Any, expected: str) -> None:
    doc = _minimal()
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    parse_kustomization(doc)  # tolerant: fine
    assert _errors(doc, strict=True) == [expected]
    with pytest.raises(InvalidKustomizationError):
        parse_kustomization_strict(doc)


# --- validation tables (each error names the field path) ----------------------------------------

ENUMS = [
    ("sourceRef.kind", ["OCIRepository", "GitRepository", "Bucket", "ExternalArtifact"], "HelmRepository"),
    ("deletionPolicy", ["MirrorPrune", "Delete", "WaitForTermination", "Orphan"], "Keep"),
    ("buildMetadata[0]", ["originAnnotations", "transformerAnnotations"], "managedByLabel"),
    ("postBuild.substituteFrom[0].kind", ["Secret", "ConfigMap"], "secret"),
    ("postBuild.substituteStrategy", ["WithVariables", "Always"], "Never"),
    ("decryption.provider", ["sops"], "age"),
]


def _with(path: str, value: Any) -> dict[str, Any]:
    """A minimal valid document with ``spec.<path>`` set (parents created with their required fields)."""
    parents: dict[str, Any] = {
        "postBuild.substituteFrom[0]": {"kind": "Secret", "name": "vars"},
        "decryption": {"provider": "sops"},
    }
    doc = _minimal()
    spec = doc["spec"]
    if path.startswith("postBuild.substituteFrom[0]."):
        spec["postBuild"] = {"substituteFrom": [dict(parents["postBuild.substituteFrom[0]"])]}
        spec["postBuild"]["substituteFrom"][0][path.rsplit(".", 1)[1]] = value
    elif path.startswith("postBuild."):
        spec["postBuild"] = {path.split(".")[1]: value}
    elif path.startswith("decryption."):
        spec["decryption"] = {**parents["decryption"], path.split(".")[1]: value}
    elif path == "buildMetadata[0]":
        spec["buildMetadata"] = [value]
    elif path.startswith("sourceRef."):
        spec["sourceRef"][path.split(".")[1]] = value
    else:
        spec[path] = value
    return doc


@pytest.mark.parametrize(("path", "allowed", "bad"), ENUMS)
def test_enums(path: str, allowed: list[str], bad: str) -> None:
    for value in allowed:
        assert _round_trip(_with(path, value), strict=True) == _with(path, value)
    choices = ", ".join(f"'{v}'" for v in allowed[:-1])
    choices = f"{choices} or '{allowed[-1]}'" if choices else f"'{allowed[-1]}'"
    assert _errors(_with(path, bad)) == [f'spec.{path}: unsupported value "{bad}": must be one of {choices}']


DURATION_FIELDS = ["interval", "retryInterval", "timeout"]
GOOD_DURATIONS = ["5m", "1h30m", "500ms", "1.5h", "0s", "10m0s", "1h0m0.5s"]
BAD_DURATIONS = ["5", "-1m", "1d", "5 m", "1us", "", "1.m", "+3s", "0"]


@pytest.mark.parametrize("field", DURATION_FIELDS)
@pytest.mark.parametrize("value", GOOD_DURATIONS)
def test_duration_pattern_accepts(field: str, value: str) -> None:
    doc = _minimal(**{field: value})
    assert _round_trip(doc, strict=True) == doc


@pytest.mark.parametrize("field", DURATION_FIELDS)
@pytest.mark.parametrize("value", BAD_DURATIONS)
def test_duration_pattern_rejects(field: str, value: str) -> None:
    assert _errors(_minimal(**{field: value})) == [
        f"spec.{field}: invalid value \"{value}\": must match '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$'"
    ]


def test_duration_beyond_go_range_is_rejected() -> None:
    assert _errors(_minimal(interval="9999999h")) == ['spec.interval: invalid duration "9999999h": out of range']


@pytest.mark.parametrize(
    ("field", "good", "bad", "message"),
    [
        ("targetNamespace", "a" * 63, "a" * 64, "must have at most 63 characters"),
        ("targetNamespace", "a", "", "must have at least 1 character"),
        ("namePrefix", "p" * 200, "p" * 201, "must have at most 200 characters"),
        ("namePrefix", "p-", "", "must have at least 1 character"),
        ("nameSuffix", "s" * 200, "s" * 201, "must have at most 200 characters"),
        ("nameSuffix", "-s", "", "must have at least 1 character"),
    ],
)
def test_length_limits(field: str, good: str, bad: str, message: str) -> None:
    assert _round_trip(_minimal(**{field: good}), strict=True) == _minimal(**{field: good})
    assert _errors(_minimal(**{field: bad})) == [f'spec.{field}: invalid value "{bad}": {message}']


def test_substitute_from_name_length() -> None:
    ok = _with("postBuild.substituteFrom[0].name", "n" * 253)
    assert _round_trip(ok, strict=True) == ok
    assert _errors(_with("postBuild.substituteFrom[0].name", "n" * 254)) == [
        f'spec.postBuild.substituteFrom[0].name: invalid value "{"n" * 254}": must have at most 253 characters'
    ]
    assert _errors(_with("postBuild.substituteFrom[0].name", "")) == [
        'spec.postBuild.substituteFrom[0].name: invalid value "": must have at least 1 character'
    ]


REQUIRED = [
    ({}, "interval", "spec.interval"),
    ({}, "prune", "spec.prune"),
    ({}, "sourceRef", "spec.sourceRef"),
    ({"sourceRef": {"name": "repo"}}, None, "spec.sourceRef.kind"),
    ({"sourceRef": {"kind": "Bucket"}}, None, "spec.sourceRef.name"),
    ({"dependsOn": [{"namespace": "x"}]}, None, "spec.dependsOn[0].name"),
    ({"healthChecks": [{"name": "web"}]}, None, "spec.healthChecks[0].kind"),
    ({"healthChecks": [{"kind": "Deployment"}]}, None, "spec.healthChecks[0].name"),
    ({"healthCheckExprs": [{"current": "true"}]}, None, "spec.healthCheckExprs[0].apiVersion"),
    ({"healthCheckExprs": [{"apiVersion": "x/v1"}]}, None, "spec.healthCheckExprs[0].current"),
    ({"patches": [{"target": {"kind": "Deployment"}}]}, None, "spec.patches[0].patch"),
    ({"images": [{"newTag": "1.0"}]}, None, "spec.images[0].name"),
    ({"ignore": [{"target": {}}]}, None, "spec.ignore[0].paths"),
    ({"decryption": {"secretRef": {"name": "k"}}}, None, "spec.decryption.provider"),
    ({"decryption": {"provider": "sops", "secretRef": {}}}, None, "spec.decryption.secretRef.name"),
    ({"kubeConfig": {"secretRef": {"key": "value"}}}, None, "spec.kubeConfig.secretRef.name"),
    ({"kubeConfig": {"configMapRef": {}}}, None, "spec.kubeConfig.configMapRef.name"),
    ({"postBuild": {"substituteFrom": [{"name": "v"}]}}, None, "spec.postBuild.substituteFrom[0].kind"),
    ({"postBuild": {"substituteFrom": [{"kind": "Secret"}]}}, None, "spec.postBuild.substituteFrom[0].name"),
]


@pytest.mark.parametrize(("spec", "drop", "path"), REQUIRED, ids=[r[2] for r in REQUIRED])
def test_required_fields(spec: dict[str, Any], drop: str | None, path: str) -> None:
    doc = _minimal(**spec)
    if drop:
        del doc["spec"][drop]
    assert _errors(doc) == [f"{path}: required value"]


def test_status_required_fields() -> None:
    doc = _minimal()
    doc["status"] = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded"}],
        "inventory": {},
        "history": [{"digest": "sha256:00"}],
    }
    assert _errors(doc) == [
        "status.conditions[0].lastTransitionTime: required value",
        "status.conditions[0].message: required value",
        "status.history[0].firstReconciled: required value",
        "status.history[0].lastReconciled: required value",
        "status.history[0].lastReconciledDuration: required value",
        "status.history[0].lastReconciledStatus: required value",
        "status.history[0].totalReconciliations: required value",
        "status.inventory.entries: required value",
    ]


KUBECONFIG_ONE_OF = (
    "spec.kubeConfig: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified"
)


@pytest.mark.parametrize(
    ("kube_config", "valid"),
    [
        ({"secretRef": {"name": "kc"}}, True),
        ({"secretRef": {"name": "kc", "key": "value.yaml"}}, True),
        ({"configMapRef": {"name": "wi"}}, True),
        ({}, False),
        ({"secretRef": {"name": "kc"}, "configMapRef": {"name": "wi"}}, False),
    ],
)
def test_kube_config_exactly_one_ref(kube_config: dict[str, Any], valid: bool) -> None:
    doc = _minimal(kubeConfig=kube_config)
    if valid:
        assert _round_trip(doc, strict=True) == doc
    else:
        assert _errors(doc) == [KUBECONFIG_ONE_OF]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"prune": "true"}, 'spec.prune: invalid value "true": must be a boolean (true or false)'),
        ({"wait": 1}, "spec.wait: invalid value 1: must be a boolean (true or false)"),
        ({"interval": 300}, "spec.interval: invalid value 300: must be a string"),
        ({"components": "a"}, 'spec.components: invalid value "a": must be a list'),
        ({"commonMetadata": {"labels": {"a": 1}}}, "spec.commonMetadata.labels.a: invalid value 1: must be a string"),
        ({"sourceRef": "repo"}, 'spec.sourceRef: invalid value "repo": must be an object'),
    ],
)
def test_wrong_types_are_not_coerced(spec: dict[str, Any], expected: str) -> None:
    assert _errors(_minimal(**spec)) == [expected]


def test_several_errors_are_all_reported_in_field_order() -> None:
    messages = _errors(_minimal(interval="5", targetNamespace="", sourceRef={"kind": "Git", "name": "x"}))
    assert [m.split(":")[0] for m in messages] == ["spec.interval", "spec.sourceRef.kind", "spec.targetNamespace"]


def test_missing_spec_and_non_object_input() -> None:
    doc = _minimal()
    del doc["spec"]
    assert _errors(doc) == ["spec: required value"]
    with pytest.raises(InvalidKustomizationError) as err:
        parse_kustomization("not a mapping")
    assert str(err.value).startswith("Kustomization//: ")


def test_validation_error_is_chained() -> None:
    with pytest.raises(InvalidKustomizationError) as err:
        parse_kustomization(_minimal(interval="x"))
    assert isinstance(err.value.__cause__, ValidationError)
    assert validation_messages(err.value.__cause__)[0].startswith("spec.interval: ")


# --- derived values --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "timeout", "expected"),
    [
        ("5m", None, timedelta(minutes=4, seconds=30)),
        ("10m", None, timedelta(minutes=9, seconds=30)),
        ("1m", None, timedelta(seconds=30)),
        ("30s", None, timedelta(seconds=30)),
        ("10s", None, timedelta(seconds=30)),
        ("10m", "2m", timedelta(minutes=2)),
        ("10m", "10s", timedelta(seconds=30)),
        ("1m", "1h", timedelta(hours=1)),
        ("1m", "30s", timedelta(seconds=30)),
    ],
)
def test_effective_timeout(interval: str, timeout: str | None, expected: timedelta) -> None:
    spec = {"interval": interval} if timeout is None else {"interval": interval, "timeout": timeout}
    model = Kustomization.model_validate(_minimal(**spec))
    assert model.get_timeout() == expected
    assert effective_timeout(model.spec) == expected


@pytest.mark.parametrize(
    ("interval", "retry", "expected"),
    [("10m", None, timedelta(minutes=10)), ("10m", "1m", timedelta(minutes=1)), ("1h", "90s", timedelta(seconds=90))],
)
def test_effective_retry_interval(interval: str, retry: str | None, expected: timedelta) -> None:
    spec = {"interval": interval} if retry is None else {"interval": interval, "retryInterval": retry}
    model = Kustomization.model_validate(_minimal(**spec))
    assert model.get_retry_interval() == expected
    assert effective_retry_interval(model.spec) == expected
    assert model.get_interval() == Kustomization.model_validate(_minimal(interval=interval)).get_interval()


def test_deletion_policy_defaults_to_mirror_prune() -> None:
    assert Kustomization.model_validate(_minimal()).get_deletion_policy() is DeletionPolicy.MIRROR_PRUNE
    model = Kustomization.model_validate(_minimal(deletionPolicy="Orphan"))
    assert model.get_deletion_policy() is DeletionPolicy.ORPHAN


def test_ref_and_conditions() -> None:
    doc = _minimal()
    doc["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "BuildFailed",
                "message": "kustomize build failed",
                "lastTransitionTime": "2024-05-01T10:00:00Z",
                "observedGeneration": 2,
            }
        ]
    }
    model = Kustomization.model_validate(doc)
    assert model.ref() == "Kustomization/apps/app"
    ready = model.get_condition("Ready")
    assert ready is not None and ready.reason == "BuildFailed"
    assert model.get_condition("Healthy") is None
    assert model.model_dump(by_alias=True, exclude_none=True) == doc
