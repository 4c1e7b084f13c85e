from __future__ import annotations

import copy
from typing import Any

import pytest

from kustomize_controller.api.kustomization import IgnoreRule as IgnoreRuleModel
from kustomize_controller.api.meta import Selector
from kustomize_controller.apply.drift import (
    DriftAction,
    IgnoreRuleError,
    apply_resolutions,
    compile_ignore_rules,
    has_drifted,
    resolve_ignored_drift,
)


def deploy(replicas: int = 1, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app", "resourceVersion": "7", "uid": "u1", **meta},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
        "status": {"replicas": replicas},
    }


def rules(*specs: dict[str, Any]) -> Any:
    return compile_ignore_rules([IgnoreRuleModel.model_validate(s) for s in specs])


def test_new_object_is_drifted() -> None:
    dry = deploy()
    dry["metadata"]["resourceVersion"] = ""
    assert has_drifted(None, dry)
    assert has_drifted(deploy(), dry)


@pytest.mark.parametrize(
    ("change", "drifted"),
    [
        (lambda d: None, False),
        (lambda d: d["metadata"].update(managedFields=[{"manager": "x"}], generation=9), False),
        (lambda d: d["status"].update(replicas=5), False),
        (lambda d: d["metadata"].update(labels={"a": "b"}), True),
        (lambda d: d["metadata"].update(annotations={"a": "b"}), True),
        (lambda d: d["metadata"].update(labels={}), False),  # empty map == missing map
        (lambda d: d["spec"].update(replicas=2), True),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image="i:2"), True),
        (lambda d: d["spec"].update(paused=None), True),  # null is a value
        (lambda d: d.update(extra={}), True),
    ],
)
def test_drift_comparison(change: Any, drifted: bool) -> None:
    live = deploy()
    dry = copy.deepcopy(live)
    change(dry)
    assert has_drifted(live, dry) is drifted


def test_int_and_float_are_different_values() -> None:
    live, dry = deploy(), deploy()
    dry["spec"]["replicas"] = 1.0
    assert has_drifted(live, dry)
    dry["spec"]["replicas"] = True
    assert has_drifted(live, dry)


def test_ignore_rule_without_target_applies_everywhere() -> None:
    live, dry = deploy(replicas=3), deploy(replicas=1)
    assert not has_drifted(live, dry, rules({"paths": ["/spec/replicas"]}))
    dry["spec"]["template"]["spec"]["containers"][0]["image"] = "i:2"
    assert has_drifted(live, dry, rules({"paths": ["/spec/replicas"]}))


@pytest.mark.parametrize(
    ("target", "matches"),
    [
        ({"kind": "Deployment"}, True),
        ({"kind": "Deploy"}, False),  # anchored regex
        ({"kind": "Deploy.*"}, True),
        ({"group": "apps", "version": "v1"}, True),
        ({"group": "app"}, False),
        ({"name": "w.b", "namespace": "app|other"}, True),
        ({"namespace": "other"}, False),
        ({"labelSelector": "tier=web"}, True),
        ({"labelSelector": "tier in (api, db)"}, False),
        ({"labelSelector": "!tier"}, False),
        ({"annotationSelector": "hpa"}, True),
        ({"annotationSelector": "hpa!=on"}, False),
    ],
)
def test_ignore_rule_targets(target: dict[str, Any], matches: bool) -> None:
    meta = {"labels": {"tier": "web"}, "annotations": {"hpa": "on"}}
    live, dry = deploy(replicas=3, **meta), deploy(replicas=1, **meta)
    compiled = rules({"paths": ["/spec/replicas"], "target": target})
    assert has_drifted(live, dry, compiled) is not matches


def test_ignore_metadata_annotation_path_with_escaped_slash() -> None:
    live = deploy(annotations={"example.com/stamp": "1"})
    dry = deploy(annotations={"example.com/stamp": "2"})
    assert not has_drifted(live, dry, rules({"paths": ["/metadata/annotations/example.com~1stamp"]}))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"paths": ["spec/replicas"]}, "ignore[0]: JSON pointer 'spec/replicas' must be empty or start with '/'"),
        ({"paths": ["/x"], "target": {"kind": "("}}, "ignore[0]: invalid kind regex"),
        ({"paths": ["/x"], "target": {"labelSelector": "a in b"}}, "ignore[0]: invalid label selector"),
    ],
)
def test_invalid_rules(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(IgnoreRuleError, match=message.replace("(", r"\(").replace("[", r"\[")):
        rules(spec)


def test_adopt_when_we_are_the_sole_owner() -> None:
    live = deploy(replicas=3)
    live["metadata"]["managedFields"] = [
        {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
    ]
    dry = deploy(replicas=1)
    compiled = rules({"paths": ["/spec/replicas", "/spec/paused"]})
    res = resolve_ignored_drift(live, dry, compiled, field_manager="kustomize-controller")
    assert [(r.path, r.action, r.value) for r in res] == [("/spec/replicas", DriftAction.ADOPT, 3)]
    payload = deploy(replicas=1)
    apply_resolutions(payload, res)
    assert payload["spec"]["replicas"] == 3


def test_strip_when_another_apply_manager_owns_the_path() -> None:
    live = deploy(replicas=3)
    live["metadata"]["managedFields"] = [
        {"manager": "kustomize-controller", "operation": "Apply", "fieldsV1": {"f:spec": {"f:template": {}}}},
        {"manager": "hpa-applier", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
    ]
    res = resolve_ignored_drift(
        live, deploy(replicas=1), rules({"paths": ["/spec/replicas"]}), field_manager="kustomize-controller"
    )
    assert [(r.path, r.action) for r in res] == [("/spec/replicas", DriftAction.STRIP)]
    payload = deploy(replicas=1)
    apply_resolutions(payload, res)
    assert "replicas" not in payload["spec"]


def test_list_item_ownership_resolved_by_merge_key() -> None:
    live = deploy()
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "i:9"
    live["metadata"]["managedFields"] = [
        {
            "manager": "image-bot",
            "operation": "Apply",
            "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"c"}': {"f:image": {}}}}}}},
        }
    ]
    compiled = rules({"paths": ["/spec/template/spec/containers/0/image"]})
    res = resolve_ignored_drift(live, deploy(), compiled, field_manager="kustomize-controller")
    assert [r.action for r in res] == [DriftAction.STRIP]


def test_adopt_of_a_path_missing_live_removes_it_from_payload() -> None:
    live = deploy()
    dry = deploy()
    dry["spec"]["paused"] = True
    res = resolve_ignored_drift(live, dry, rules({"paths": ["/spec/paused"]}), field_manager="kc")
    payload = deploy()
    payload["spec"]["paused"] = True
    apply_resolutions(payload, res)
    assert "paused" not in payload["spec"]


def test_selector_model_is_accepted() -> None:
    compiled = compile_ignore_rules([IgnoreRuleModel(paths=["/spec/replicas"], target=Selector(kind="Deployment"))])
    assert compiled[0].matches(deploy())
