"""``apply_options``: the one place a Kustomization and the controller's apply flags become the engine's
options (used by the apply and by its preview alike)."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.apply.drift import IgnoreRuleError
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.takeover import FieldManagerRule
from kustomize_controller.reconcile.apply_options import ApplySettings, apply_options
from kustomize_controller.reconcile.drift_mode import WarnPolicy


def ks(**spec: Any) -> Any:
    return parse_kustomization({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "apps"},
        "spec": {"interval": "10m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "repo"}, **spec},
        "status": {"inventory": {"entries": [{"id": "apps_settings__ConfigMap", "v": "v1"},
                                             {"id": "_team__Namespace", "v": "v1"}]}},
    })


def test_the_flags_and_the_spec_make_the_options() -> None:
    settings = ApplySettings(override_managers=("lens",), custom_stage_kinds=frozenset({("example.com", "Widget")}),
                             migrate_api_version=True)
    policy = WarnPolicy(known={}, build_unchanged=False)
    options = apply_options(ks(force=True, ignore=[{"paths": ["/data"]}]), settings, detect_only=policy)
    assert options.force and options.migrate_api_version and options.detect_only is policy
    assert options.custom_stage_kinds == frozenset({("example.com", "Widget")})
    assert options.cleanup is not None
    managers = {(r.name, r.operation) for r in options.cleanup.field_managers}
    assert {("lens", "Apply"), ("lens", "Update"), ("kubectl", "Update"), ("before-first-apply", "Update")} <= managers
    assert FieldManagerRule("kustomize-controller", "Update") in options.cleanup.field_managers
    assert [tuple(r.paths) for r in options.ignore_rules] == [("/data",)]
    assert options.expected == frozenset({
        ObjRef(group="", kind="ConfigMap", namespace="apps", name="settings"),
        ObjRef(group="", kind="Namespace", namespace="", name="team"),
    })
    # the owner labels select the list that reads a large group of objects (apply/plan.py)
    assert options.owner == {"kustomize.toolkit.fluxcd.io/name": "app", "kustomize.toolkit.fluxcd.io/namespace": "apps"}


def test_defaults_take_over_only_kubectl_and_legacy_managers() -> None:
    options = apply_options(ks(), ApplySettings())
    assert options.cleanup is not None
    assert not options.force and not options.migrate_api_version and options.detect_only is None
    assert {r.name for r in options.cleanup.field_managers} == {"kubectl", "before-first-apply", "kustomize-controller"}


def test_an_invalid_ignore_rule_is_an_error() -> None:
    with pytest.raises(IgnoreRuleError):
        apply_options(ks(ignore=[{"paths": ["no-leading-slash"]}]), ApplySettings())
