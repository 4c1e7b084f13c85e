"""``kustomize-controller diff`` output (pure): what is printed for each action, and the JSON document."""

from __future__ import annotations

import json

from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.preview import RECREATED, PreviewChange
from kustomize_controller.diff_command import render_json, render_text
from kustomize_controller.reconcile.preview import Preview


def change(name: str, action: str, **kw: str) -> PreviewChange:
    return PreviewChange(ref=ObjRef(group="", kind="ConfigMap", namespace="ns", name=name), api_version="v1",
                         action=action, **kw)


PREVIEW = Preview(
    subject="Kustomization/ns/app",
    revision="main@sha1:abc",
    changes=[
        change("new", "created"),
        change("edited", "configured", diff="--- a\n+++ b\n-x\n+y\n"),
        change("same", "unchanged"),
        change("job", RECREATED, note="an immutable field changed and force is set"),
        change("bad", "unknown", error="ConfigMap/ns/bad dry-run failed: nope"),
        change("old", "deleted"),
    ],
    errors=["ConfigMap/ns/bad dry-run failed: nope"],
)


def test_text() -> None:
    assert render_text(PREVIEW, verbose=False) == (
        "ConfigMap/ns/new created\n"
        "ConfigMap/ns/edited configured\n--- a\n+++ b\n-x\n+y\n"
        "ConfigMap/ns/job would be recreated (an immutable field changed and force is set)\n"
        "ConfigMap/ns/old deleted\n"
    )
    assert "ConfigMap/ns/same unchanged\n" in render_text(PREVIEW, verbose=True)


def test_json() -> None:
    doc = json.loads(render_json(PREVIEW, verbose=False))
    assert doc["kustomization"] == "Kustomization/ns/app" and doc["changed"] is True
    assert [(o["name"], o["action"]) for o in doc["objects"]] == [
        ("new", "created"), ("edited", "configured"), ("job", "recreated"), ("bad", "unknown"), ("old", "deleted")]
    assert doc["objects"][1]["diff"].startswith("--- a")
    assert doc["objects"][3]["error"] == doc["errors"][0]
    assert doc["plan"] == {"id": PREVIEW.plan.id,
                           "counts": {"created": 1, "configured": 1, "recreated": 1, "deleted": 1}}
    assert doc["waiting"] == []


def test_nothing_to_change() -> None:
    same = Preview(subject="Kustomization/ns/app", revision="r", changes=[change("same", "unchanged")], errors=[])
    assert not same.changed
    assert render_text(same, verbose=False) == ""
