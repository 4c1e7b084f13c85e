"""Messages of detect-only drift: the Drifted condition lists objects once, sorted; the event names fields."""

from __future__ import annotations

from kustomize_controller.apply.detect_only import HeldDrift
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.reconcile.drift_report import drift_message, event_message


def held(kind: str, name: str, *paths: str, deleted: bool = False) -> HeldDrift:
    ref = ObjRef(group="apps" if kind == "Deployment" else "", kind=kind, namespace="ns", name=name)
    return HeldDrift(ref=ref, version="v1", paths=paths, deleted=deleted)


def test_condition_message_lists_each_object_once_sorted() -> None:
    drifts = [held("Deployment", "web", "spec.replicas"), held("ConfigMap", "cfg", "data.a"),
              held("Deployment", "web", "spec.paused")]
    assert drift_message(drifts) == (
        "2 object(s) drifted from the applied revision and were not corrected (drift-detection: warn):\n"
        "ConfigMap/ns/cfg\nDeployment/ns/web")


def test_event_message_names_the_fields() -> None:
    drifts = [held("Deployment", "web", "spec.replicas"), held("ConfigMap", "cfg", deleted=True)]
    assert event_message(drifts) == (
        "drift detected, not corrected (drift-detection: warn):\n"
        "ConfigMap/ns/cfg (deleted)\nDeployment/ns/web (spec.replicas)")
