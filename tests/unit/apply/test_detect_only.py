"""``drifted_paths``: what differs between the live object and the dry-run result, in user terms."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.detect_only import MAX_PATHS, HeldDrift, drifted_paths
from kustomize_controller.apply.drift import IgnoreRule
from kustomize_controller.apply.objects import ObjRef


def deploy(**spec: Any) -> dict[str, Any]:
    meta = spec.pop("metadata", {})
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "5", **meta}, "spec": spec}


@pytest.mark.parametrize(
    ("live", "dry_run", "paths"),
    [
        (deploy(replicas=3), deploy(replicas=1), ["spec.replicas"]),
        (deploy(replicas=1), deploy(replicas=1), []),
        (deploy(template={"spec": {"containers": [{"name": "m", "image": "a"}]}}),
         deploy(template={"spec": {"containers": [{"name": "m", "image": "b"}]}}),
         ["spec.template.spec.containers[0].image"]),
        (deploy(template={"spec": {"containers": [{"name": "m"}]}}),
         deploy(template={"spec": {"containers": [{"name": "m"}, {"name": "side"}]}}),
         ["spec.template.spec.containers[1]"]),
        (deploy(metadata={"labels": {"team": "x", "keep": "1"}}), deploy(metadata={"labels": {"keep": "1"}}),
         ["metadata.labels.team"]),
        (deploy(metadata={"annotations": {"a": "1"}}), deploy(metadata={"annotations": {"a": "2"}}),
         ["metadata.annotations.a"]),
        # status and server-owned metadata are not drift
        ({**deploy(replicas=1), "status": {"replicas": 4}}, deploy(replicas=1), []),
        (deploy(replicas=1, metadata={"resourceVersion": "9", "generation": 4}), deploy(replicas=1), []),
        # a map only one side has is named, not its leaves
        (deploy(strategy={"type": "Recreate", "x": {"y": 1}}), deploy(), ["spec.strategy"]),
    ],
)
def test_drifted_paths(live: dict[str, Any], dry_run: dict[str, Any], paths: list[str]) -> None:
    assert drifted_paths(live, dry_run) == paths


def test_ignored_paths_are_not_reported() -> None:
    rules = (IgnoreRule(paths=("/spec/replicas",)),)
    assert drifted_paths(deploy(replicas=3, paused=True), deploy(replicas=1), rules) == ["spec.paused"]


def test_paths_are_capped() -> None:
    live = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {f"k{i:03d}": "a" for i in range(100)}}
    dry = {**live, "data": {f"k{i:03d}": "b" for i in range(100)}}
    assert len(drifted_paths(live, dry)) == MAX_PATHS


def test_describe() -> None:
    ref = ObjRef(group="apps", kind="Deployment", namespace="ns", name="web")
    assert HeldDrift(ref=ref, version="v1", paths=("spec.replicas",)).describe() == "Deployment/ns/web (spec.replicas)"
    recreate = HeldDrift(ref=ref, version="v1", paths=(), recreate=True)
    assert recreate.describe() == "Deployment/ns/web (immutable fields)"
