"""The sharding overlays (docs/sharding.md) build, and each shard is a controller of its own.

``manifests/sharding`` is the main instance (Kustomizations without ``sharding.fluxcd.io/key``) plus
shards 1-4 (``sharding.fluxcd.io/key in (shardN)``): five Deployments with disjoint pod selectors, one
lease each (derived from the selector), the conversion webhook served by the main instance only.
"""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.app import leader_election_id
from kustomize_controller.apply.labelselector import parse_label_selector
from tests.integration.manifests.test_manifests import build_manifests

pytestmark = [pytest.mark.integration, pytest.mark.builder]

SHARDS = ("shard1", "shard2", "shard3", "shard4")


def _deployments(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}


def _args(deployment: dict[str, Any]) -> list[str]:
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def _selector(deployment: dict[str, Any]) -> str:
    (arg,) = [a for a in _args(deployment) if a.startswith("--watch-label-selector=")]
    return arg.split("=", 1)[1]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_sharded_install_has_a_main_instance_and_four_shards() -> None:
    objects = build_manifests("manifests/sharding")
    deployments = _deployments(objects)
    assert sorted(deployments) == ["kustomize-controller", *(f"kustomize-controller-{s}" for s in SHARDS)]
    main = deployments["kustomize-controller"]
    assert _selector(main) == "!sharding.fluxcd.io/key"
    for shard in SHARDS:
        assert _selector(deployments[f"kustomize-controller-{shard}"]) == f"sharding.fluxcd.io/key in ({shard})"
    # the rest of the install is there once: CRD, RBAC, webhook Service
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] != "Deployment"]
    assert len(kinds) == len(set(kinds))
    assert ("CustomResourceDefinition", "kustomizations.kustomize.toolkit.fluxcd.io") in kinds
    assert {o["metadata"].get("namespace") for o in objects if o["kind"] == "Deployment"} == {"kustomize-system"}


def test_each_shard_selects_only_its_own_kustomizations() -> None:
    deployments = _deployments(build_manifests("manifests/sharding"))
    selectors = {name: parse_label_selector(_selector(d)) for name, d in deployments.items()}
    for labels, owner in [({}, "kustomize-controller"), ({"team": "a"}, "kustomize-controller"),
                          *(({"sharding.fluxcd.io/key": s}, f"kustomize-controller-{s}") for s in SHARDS)]:
        matching = [name for name, selector in selectors.items() if selector.matches(labels)]
        assert matching == [owner], labels
    # a key naming no shard is reconciled by nobody, as upstream
    assert not [n for n, s in selectors.items() if s.matches({"sharding.fluxcd.io/key": "shard9"})]


def test_each_shard_has_its_own_lease_pods_and_no_webhook() -> None:
    objects = build_manifests("manifests/sharding")
    deployments = _deployments(objects)
    leases = {leader_election_id(_selector(d)) for d in deployments.values()}
    assert len(leases) == len(deployments)
    assert all("--enable-leader-election" in _args(d) for d in deployments.values())
    (service,) = [o for o in objects if o["kind"] == "Service"]
    for name, deployment in deployments.items():
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        owners = [n for n, d in deployments.items() if _selects(d["spec"]["selector"]["matchLabels"], pod_labels)]
        assert owners == [name]  # no two Deployments fight over the same pods
        webhook = _selects(service["spec"]["selector"], pod_labels)
        assert webhook == (name == "kustomize-controller")
        ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
        assert ("webhook-server" in ports) == webhook
        assert ("--webhook-addr=0" in _args(deployment)) == (not webhook)


@pytest.mark.parametrize("shard", ["1", "2", "3", "4"])
def test_a_single_shard_overlay_builds_alone(shard: str) -> None:
    (deployment,) = build_manifests(f"manifests/sharding/shard-{shard}")
    assert deployment["metadata"]["name"] == f"kustomize-controller-shard{shard}"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "kustomize-controller"
