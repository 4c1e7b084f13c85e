"""Conversion between v1 (hub) and v1beta2, v1beta1, v1alpha1: nothing lost, refusals that say why.

Every converted object is also checked against the target version's CRD schema (pruning must not
drop anything, validation must pass), because the API server prunes and validates what we return.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from kustomize_controller.api.conversion import (
    ORIGIN_ANNOTATION,
    V1_FIELDS_ANNOTATION,
    ConversionRefused,
    convert,
    from_hub,
    to_hub,
)
from kustomize_controller.api.crdgen import build_crd
from kustomize_controller.api.kustomization import parse_kustomization_strict
from kustomize_controller.testing.apiserver import crdschema

SEEDS = Path(__file__).resolve().parents[4] / "shared" / "reference" / "seed-kustomizations"
GROUP = "kustomize.toolkit.fluxcd.io"
OLD = ("v1beta2", "v1beta1", "v1alpha1")
# a namespace for seeds applied with `kubectl apply -n` (the service-account seed names its own)
SEED_NAMESPACE = {"v1alpha1-service-account.yaml": "webapp"}


def _schemas() -> dict[str, dict[str, Any]]:
    return {v["name"]: v["schema"]["openAPIV3Schema"] for v in build_crd()["spec"]["versions"]}


SCHEMAS = _schemas()


def _check_schema(obj: dict[str, Any], *, validate: bool = True) -> None:
    """``obj`` survives its version's pruning unchanged and (unless told otherwise) validates.

    A v1 object seen through an old version need not validate there (v1alpha1 requires a path v1 may
    omit); writing it back is then refused by the API server, which is honest. It must never be pruned.
    """
    version = obj["apiVersion"].rpartition("/")[2]
    unknown: list[str] = []
    pruned = crdschema.prune_and_default(SCHEMAS[version], obj, unknown)
    assert unknown == [], unknown
    if validate:
        assert [str(e) for e in crdschema.validate(SCHEMAS[version], pruned, None)] == []


def _seed_documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(SEEDS.glob("*.yaml")):
        for index, doc in enumerate(YAML(typ="safe", pure=True).load_all(path.read_text())):
            doc["metadata"].setdefault("namespace", SEED_NAMESPACE.get(path.name, "default"))
            out.append((f"{path.name}#{index}", doc))
    return out


SEED_DOCS = _seed_documents()


def _obj(version: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "apps", **meta},
        "spec": spec,
    }


BASE = {"interval": "5m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "repo"}, "path": "./app"}


def test_seed_files_exist() -> None:
    assert len(SEED_DOCS) >= 9


@pytest.mark.parametrize(("name", "doc"), SEED_DOCS, ids=[n for n, _ in SEED_DOCS])
def test_every_seed_converts_to_a_valid_v1_object_and_back(name: str, doc: dict[str, Any]) -> None:
    version = doc["apiVersion"].rpartition("/")[2]
    doc = crdschema.prune_and_default(SCHEMAS[version], doc)  # what the API server hands the webhook
    _check_schema(doc)
    hub = convert(doc, f"{GROUP}/v1")
    parse_kustomization_strict(hub)  # a valid v1 Kustomization, no unknown field
    _check_schema(hub)
    assert convert(hub, doc["apiVersion"]) == doc
    for other in OLD:  # and through every other version
        view = convert(hub, f"{GROUP}/{other}")
        _check_schema(view, validate="path" in hub["spec"])
        assert convert(view, f"{GROUP}/v1") == hub


def test_v1beta2_validation_is_kept_out_of_v1_and_comes_back() -> None:
    old = _obj("v1beta2", {**BASE, "validation": "client"})
    hub = to_hub(old)
    assert "validation" not in hub["spec"]
    assert json.loads(hub["metadata"]["annotations"][ORIGIN_ANNOTATION]) == {"validation": "client"}
    assert from_hub(hub, "v1beta2") == old
    assert from_hub(hub, "v1alpha1")["spec"]["validation"] == "client"
    # 'none' did not exist in v1alpha1: not shown there, yet not lost on the way back
    none = to_hub(_obj("v1beta2", {**BASE, "validation": "none"}))
    alpha = from_hub(none, "v1alpha1")
    assert "validation" not in alpha["spec"]
    assert to_hub(alpha) == none


# keys deliberately out of order: the patch strings must survive the JSON of the origin record
STRATEGIC = {"kind": "Deployment", "apiVersion": "apps/v1", "spec": {"replicas": 2}, "metadata": {"name": "web"}}
JSON6902 = {"target": {"group": "apps", "version": "v1", "kind": "Deployment", "name": "web"},
            "patch": [{"path": "/metadata/labels/x", "op": "add", "value": "y"}]}
PLAIN = {"patch": "- op: remove\n  path: /spec/replicas", "target": {"kind": "Deployment"}}


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_old_patch_lists_become_patches_in_kustomize_order(version: str) -> None:
    old = _obj(version, {**BASE, "patchesStrategicMerge": [STRATEGIC], "patches": [PLAIN],
                         "patchesJson6902": [JSON6902]})
    hub = to_hub(old)
    patches = hub["spec"]["patches"]
    assert [json.loads(p["patch"]) for p in patches[::2]] == [STRATEGIC, JSON6902["patch"]]
    assert patches[0].get("target") is None  # kustomize finds it by the patch's own kind and name
    assert patches[1] == PLAIN
    assert patches[2]["target"] == JSON6902["target"]
    assert "patchesStrategicMerge" not in hub["spec"] and "patchesJson6902" not in hub["spec"]
    parse_kustomization_strict(hub)
    assert from_hub(hub, version) == old


def test_patch_lists_come_back_after_the_records_trip_through_json() -> None:
    old = _obj("v1beta2", {**BASE, "patchesStrategicMerge": [STRATEGIC], "patchesJson6902": [JSON6902]})
    hub = json.loads(json.dumps(to_hub(old), sort_keys=True))  # as stored and read back
    assert from_hub(hub, "v1beta2") == old


def test_a_v1_edit_of_converted_patches_shows_them_all_as_patches() -> None:
    hub = to_hub(_obj("v1beta2", {**BASE, "patchesStrategicMerge": [STRATEGIC]}))
    hub["spec"]["patches"].append(PLAIN)  # edited through v1: the record no longer matches
    view = from_hub(hub, "v1beta2")
    assert "patchesStrategicMerge" not in view["spec"]
    assert view["spec"]["patches"] == hub["spec"]["patches"]
    assert to_hub(view)["spec"] == hub["spec"]


def test_v1alpha1_cannot_show_patches_yet_keeps_them() -> None:
    hub = to_hub(_obj("v1beta2", {**BASE, "patchesStrategicMerge": [STRATEGIC], "validation": "none"}))
    alpha = from_hub(hub, "v1alpha1")
    assert "patches" not in alpha["spec"]
    assert V1_FIELDS_ANNOTATION in alpha["metadata"]["annotations"]
    _check_schema(alpha)
    assert to_hub(alpha) == hub
    assert from_hub(to_hub(alpha), "v1beta2") == from_hub(hub, "v1beta2")


def test_same_namespace_service_account_becomes_service_account_name() -> None:
    old = _obj("v1alpha1", {**BASE, "serviceAccount": {"name": "deployer", "namespace": "apps"}})
    hub = to_hub(old)
    assert hub["spec"]["serviceAccountName"] == "deployer"
    assert "serviceAccount" not in hub["spec"]
    assert "annotations" not in hub["metadata"]  # nothing to remember
    assert from_hub(hub, "v1alpha1") == old


def test_cross_namespace_service_account_is_refused_naming_field_and_replacement() -> None:
    old = _obj("v1alpha1", {**BASE, "serviceAccount": {"name": "admin", "namespace": "kube-system"}})
    with pytest.raises(ConversionRefused) as err:
        to_hub(old)
    message = str(err.value)
    assert message.startswith("Kustomization/apps/app: spec.serviceAccount.namespace: ")
    assert "kube-system/admin" in message and "spec.serviceAccountName" in message


@pytest.mark.parametrize(
    ("version", "spec", "metadata"),
    [
        ("v1beta2", {"patchesStrategicMerge": True}, None),
        ("v1beta2", {"patchesJson6902": [{"patch": 1, "target": "x"}]}, None),
        ("v1beta1", {"serviceAccount": "admin"}, None),
        ("v1alpha1", {"healthChecks": "all"}, None),
        ("v1beta2", {}, {"name": "app", "namespace": "apps", "annotations": "x"}),
    ],
    ids=["bool-patches", "patch-types", "sa-string", "health-string", "annotations-string"],
)
def test_fields_of_the_wrong_type_are_refused_naming_the_object(
    version: str, spec: dict[str, Any], metadata: dict[str, Any] | None
) -> None:
    # found by fuzzing: TypeError/AttributeError escaped convert (the webhook answered 500)
    obj = _obj(version, {**BASE, **spec})
    if metadata is not None:
        obj["metadata"] = metadata
    for target in ("v1", "v1beta1"):
        try:
            convert(obj, f"kustomize.toolkit.fluxcd.io/{target}")
        except ConversionRefused as err:
            assert str(err).startswith("Kustomization/apps/app: "), str(err)


def test_a_strategic_merge_patch_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ConversionRefused, match=r"^Kustomization/apps/app: spec.patchesStrategicMerge\[1\]: "):
        to_hub(_obj("v1beta2", {**BASE, "patchesStrategicMerge": [STRATEGIC, 42]}))


def test_v1alpha1_health_checks_without_api_version_get_apps_v1() -> None:
    checks = [{"kind": "Deployment", "name": "a", "namespace": "apps"},
              {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "b", "namespace": "apps"}]
    old = _obj("v1alpha1", {**BASE, "healthChecks": checks})
    hub = to_hub(old)
    assert [c["apiVersion"] for c in hub["spec"]["healthChecks"]] == ["apps/v1", "apps/v1"]
    assert from_hub(hub, "v1alpha1") == old
    # written without apiVersion in v1: shown so in v1alpha1, and back unchanged
    plain = _obj("v1", {**BASE, "healthChecks": [checks[0]]})
    assert to_hub(from_hub(plain, "v1alpha1")) == plain


V1_ONLY = {
    "deletionPolicy": "Orphan",
    "namePrefix": "p-",
    "nameSuffix": "-s",
    "ignoreMissingComponents": True,
    "healthCheckExprs": [{"apiVersion": "x.io/v1", "kind": "X", "current": "true"}],
    "ignore": [{"paths": ["/spec/replicas"]}],
    "buildMetadata": ["originAnnotations"],
    "dependsOn": [{"name": "db", "readyExpr": "true"}],
    "decryption": {"provider": "sops", "serviceAccountName": "kms"},
    "postBuild": {"substituteStrategy": "Always", "substituteFrom": [{"kind": "Secret", "name": "v",
                                                                      "optional": True}]},
    "kubeConfig": {"secretRef": {"name": "kc", "key": "config"}},
    "commonMetadata": {"labels": {"team": "a"}},
    "components": ["../c"],
    "wait": True,
    "images": [{"name": "nginx", "newTag": "1"}],
    "patches": [PLAIN],
    "serviceAccountName": "sa",
    "retryInterval": "1m",
    "force": True,
}


@pytest.mark.parametrize("version", OLD)
def test_v1_fields_an_old_version_lacks_survive_a_round_trip(version: str) -> None:
    hub = _obj("v1", {**BASE, **V1_ONLY}, annotations={"team": "a"})
    view = from_hub(hub, version)
    _check_schema(view)
    assert view["metadata"]["annotations"]["team"] == "a"
    assert to_hub(view) == hub


def test_config_map_kubeconfig_is_kept_out_of_old_versions_and_restored() -> None:
    hub = _obj("v1", {**BASE, "kubeConfig": {"configMapRef": {"name": "wi"}}})
    for version in OLD:
        view = from_hub(hub, version)
        assert "kubeConfig" not in view["spec"]
        assert to_hub(view) == hub


def test_an_edit_through_the_old_version_wins_over_the_kept_v1_value() -> None:
    hub = _obj("v1", {**BASE, "dependsOn": [{"name": "db", "readyExpr": "true"}], "deletionPolicy": "Orphan"})
    view = from_hub(hub, "v1beta2")
    assert view["spec"]["dependsOn"] == [{"name": "db"}]
    view["spec"]["dependsOn"] = [{"name": "cache"}]
    back = to_hub(view)
    assert back["spec"]["dependsOn"] == [{"name": "cache"}]
    assert back["spec"]["deletionPolicy"] == "Orphan"  # v1beta2 cannot touch it: kept


def test_status_conditions_are_shown_in_every_version() -> None:
    condition = {"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "ok",
                 "lastTransitionTime": "2024-05-01T10:00:00Z", "observedGeneration": 2}
    hub = _obj("v1", BASE)
    hub["status"] = {"conditions": [condition], "observedGeneration": 2, "lastAppliedRevision": "main@sha1:a",
                     "history": [{"digest": "sha256:x"}], "inventory": {"entries": []}}
    for version in OLD:
        view = from_hub(hub, version)
        assert view["status"]["conditions"][0]["status"] == "True"
        assert view["status"]["lastAppliedRevision"] == "main@sha1:a"
        assert "history" not in view["status"]
        _check_schema({**view, "status": {k: v for k, v in view["status"].items() if k != "inventory"}})
    assert "inventory" in from_hub(hub, "v1beta2")["status"]
    assert "observedGeneration" not in from_hub(hub, "v1alpha1")["status"]["conditions"][0]


def test_convert_between_two_old_versions_goes_through_v1() -> None:
    old = _obj("v1beta2", {**BASE, "patchesStrategicMerge": [STRATEGIC], "wait": True})
    beta1 = convert(old, f"{GROUP}/v1beta1")
    assert beta1["spec"]["patchesStrategicMerge"] == [STRATEGIC]
    assert "wait" not in beta1["spec"]
    assert convert(beta1, f"{GROUP}/v1beta2") == old


def test_conversion_does_not_modify_its_input() -> None:
    old = _obj("v1alpha1", {**BASE, "serviceAccount": {"name": "x", "namespace": "apps"}, "validation": "client"})
    before = copy.deepcopy(old)
    hub = to_hub(old)
    snapshot = copy.deepcopy(hub)
    from_hub(hub, "v1beta1")
    assert old == before and hub == snapshot


@pytest.mark.parametrize("api_version", ["kustomize.toolkit.fluxcd.io/v2", "apps/v1"])
def test_unknown_versions_are_refused(api_version: str) -> None:
    with pytest.raises(ConversionRefused, match="unsupported version"):
        convert(_obj("v1", BASE), api_version)


def test_a_hand_edited_record_is_ignored() -> None:
    view = _obj("v1beta2", BASE, annotations={V1_FIELDS_ANNOTATION: "{not json"})
    hub = to_hub(view)
    assert "annotations" not in hub["metadata"] or V1_FIELDS_ANNOTATION not in hub["metadata"]["annotations"]
    assert hub["spec"] == BASE


def test_a_hand_edited_origin_record_never_breaks_a_read() -> None:
    hub = to_hub(_obj("v1beta2", {**BASE, "patchesStrategicMerge": [STRATEGIC]}))
    for record in ('{"patchesStrategicMerge": [42], "patches": 0}', '{"patchesStrategicMerge": "x"}', "[]",
                   '{"patchesJson6902": ["x", 1], "patches": 1}'):
        hub["metadata"]["annotations"][ORIGIN_ANNOTATION] = record
        view = from_hub(hub, "v1beta2")
        assert view["spec"]["patches"] == hub["spec"]["patches"]  # shown plainly, nothing lost


def test_a_json6902_target_in_the_target_namespace_matches_wherever_the_object_came_from() -> None:
    # kustomize ran patchesJson6902 after the namespace transformer, `patches` before it
    moved = {**JSON6902, "target": {**JSON6902["target"], "namespace": "prod"}}
    other = {**JSON6902, "target": {**JSON6902["target"], "namespace": "elsewhere"}}
    old = _obj("v1beta2", {**BASE, "targetNamespace": "prod", "patchesJson6902": [moved, other]})
    hub = to_hub(old)
    assert "namespace" not in hub["spec"]["patches"][0]["target"]
    assert hub["spec"]["patches"][1]["target"]["namespace"] == "elsewhere"
    assert from_hub(hub, "v1beta2") == old
