"""``bench/workload.py``: the generated apps, their Kustomizations, and the pure parts of the driver
(``bounded``, ``request_reconcile``, ``Tracker._observe``)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest
from ruamel.yaml import YAML

from bench import workload
from kustomize_controller.api.kustomization import (
    InvalidKustomizationError,
    parse_kustomization,
    parse_kustomization_strict,
)
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kustomize.parse import parse_documents

KINDS = ["Deployment", "ServiceAccount", "Service", "ConfigMap"]


def objects_of(files: dict[str, str]) -> list[dict[str, Any]]:
    return [d.obj for d in parse_documents(files["app.yaml"])]


def by_kind(objs: list[dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs if o["metadata"]["name"] == name}


# --- the app --------------------------------------------------------------------------------------------


def test_app_files_are_a_kustomization_of_one_resource_file() -> None:
    files = workload.app_files(3)
    assert set(files) == {"kustomization.yaml", "app.yaml"}
    kustomization = YAML(typ="safe").load(files["kustomization.yaml"])
    assert kustomization == {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                             "resources": ["app.yaml"]}


def test_app_has_the_four_objects_in_the_apps_namespace() -> None:
    objs = objects_of(workload.app_files(3))
    assert [o["kind"] for o in objs] == KINDS
    assert [o["apiVersion"] for o in objs] == ["apps/v1", "v1", "v1", "v1"]
    assert {o["metadata"]["name"] for o in objs} == {"app-3"}
    assert {o["metadata"]["namespace"] for o in objs} == {workload.APPS_NS}


def test_app_objects_fit_together() -> None:
    objs = by_kind(objects_of(workload.app_files(5)), "app-5")
    deployment, service = objs["Deployment"], objs["Service"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 0  # nothing is scheduled on a real cluster
    assert deployment["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"] == {"app": "app-5"}
    assert pod["spec"]["serviceAccountName"] == objs["ServiceAccount"]["metadata"]["name"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    port_names = {p["name"] for c in pod["spec"]["containers"] for p in c["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    # a ConfigMap's data are strings only (the API server rejects anything else)
    assert all(isinstance(v, str) for v in objs["ConfigMap"]["data"].values())


def test_revision_changes_the_image_and_the_config_map() -> None:
    rev1 = by_kind(objects_of(workload.app_files(0, rev=1)), "app-0")
    rev7 = by_kind(objects_of(workload.app_files(0, rev=7)), "app-0")
    def image(objs: dict[str, dict[str, Any]]) -> str:
        return str(objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image(rev1) == "ghcr.io/stefanprodan/podinfo:6.5.1"
    assert image(rev7) == "ghcr.io/stefanprodan/podinfo:6.5.7"
    assert rev1["ConfigMap"]["data"]["revision"] == "1"
    assert rev7["ConfigMap"]["data"]["revision"] == "7"
    assert rev1["ServiceAccount"] == rev7["ServiceAccount"]


@pytest.mark.parametrize("objects", [1, 4, 8, 1000])
def test_objects_repeat_the_four_kinds_with_distinct_names(objects: int) -> None:
    objs = objects_of(workload.app_files(2, objects=objects))
    expected = max(4, objects)
    assert len(objs) == expected
    assert len({(o["kind"], o["metadata"]["name"]) for o in objs}) == expected
    assert Counter(o["kind"] for o in objs) == {kind: expected // 4 for kind in KINDS}
    assert objs[0]["metadata"]["name"] == "app-2"
    if objects >= 8:
        assert by_kind(objs, "app-2-1").keys() == set(KINDS)


def test_apps_do_not_share_object_names() -> None:
    names = [
        (o["kind"], o["metadata"]["name"])
        for i in (1, 11, 111)
        for o in objects_of(workload.app_files(i, objects=16))
    ]
    assert len(names) == len(set(names)) == 48


def test_write_app_dir_writes_the_files(tmp_path: Path) -> None:
    directory = workload.write_app_dir(tmp_path / "root", 4)
    assert directory == tmp_path / "root" / "app-4"
    assert {p.name: p.read_text() for p in directory.iterdir()} == workload.app_files(4)


def test_write_app_dir_again_overwrites_with_the_new_revision(tmp_path: Path) -> None:
    workload.write_app_dir(tmp_path, 4, rev=1)
    directory = workload.write_app_dir(tmp_path, 4, rev=2, objects=8)
    assert {p.name: p.read_text() for p in directory.iterdir()} == workload.app_files(4, rev=2, objects=8)


# --- the Kustomization ----------------------------------------------------------------------------------


@pytest.mark.parametrize("wait", [False, True])
def test_kustomization_is_valid_under_the_strict_validator(wait: bool) -> None:
    obj = workload.kustomization(9, wait=wait)
    ks = parse_kustomization_strict(json.loads(json.dumps(obj)))
    assert ks.api_version == "kustomize.toolkit.fluxcd.io/v1"
    assert ks.ref() == f"Kustomization/{workload.FLUX_NS}/app-9"
    assert ks.spec.wait is wait
    assert ks.spec.prune is True
    assert ks.spec.path == "./"
    assert (ks.spec.source_ref.kind, ks.spec.source_ref.name) == ("GitRepository", "app-9")
    assert ks.spec.source_ref.namespace is None  # the source lives next to the Kustomization
    assert ks.get_interval().total_seconds() == 3600  # nothing periodic during a measurement
    assert ks.get_timeout().total_seconds() == 300
    assert ks.get_retry_interval().total_seconds() == 10


def test_kustomization_names_follow_the_index() -> None:
    assert [workload.kustomization(i, wait=False)["metadata"]["name"] for i in range(3)] == ["app-0", "app-1", "app-2"]
    assert workload.kustomization(0, wait=False) is not workload.kustomization(0, wait=False)


def test_strict_validation_would_catch_a_typo_in_the_generated_spec() -> None:
    """The check above is meaningful: the same object with a misspelt field does not validate."""
    obj = workload.kustomization(1, wait=False)
    obj["spec"]["retryIntervall"] = obj["spec"].pop("retryInterval")
    with pytest.raises(InvalidKustomizationError):
        parse_kustomization(obj, strict=True)


def test_crd_documents_include_the_kustomization_and_git_repository() -> None:
    docs = workload.crd_documents()
    names = {d["metadata"]["name"] for d in docs}
    assert {"kustomizations.kustomize.toolkit.fluxcd.io", "gitrepositories.source.toolkit.fluxcd.io"} <= names
    assert {d["kind"] for d in docs} == {"CustomResourceDefinition"}
    json.dumps(docs)  # sent as JSON bodies


# --- driver helpers ---------------------------------------------------------------------------------------


async def test_bounded_keeps_order_and_limits_concurrency() -> None:
    running = 0
    peak = 0

    async def job(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):
            await asyncio.sleep(0)
        running -= 1
        return i * i

    assert await workload.bounded((job(i) for i in range(10)), limit=3) == [i * i for i in range(10)]
    assert peak == 3


class _PatchRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def patch(self, api_version: str, kind: str, name: str, namespace: str, body: dict[str, Any], *,
                    patch_type: str) -> dict[str, Any]:
        self.calls.append((api_version, kind, name, namespace, body, patch_type))
        return {}


async def test_request_reconcile_patches_the_requested_at_annotation() -> None:
    client = _PatchRecorder()
    await workload.request_reconcile(cast(KubeClient, client), ["app-0", "app-1"], "tok-1")
    body = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "tok-1"}}}
    assert sorted(client.calls, key=lambda c: c[2]) == [
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "app-0", workload.FLUX_NS, body, "merge"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "app-1", workload.FLUX_NS, body, "merge"),
    ]


def ks_obj(name: str, *, ready: str | None = None, message: str = "", applied: str = "", attempted: str = "",
           reconciling: bool = False, handled: str = "") -> dict[str, Any]:
    conditions = []
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "message": message})
    if reconciling:
        conditions.append({"type": "Reconciling", "status": "True"})
    status: dict[str, Any] = {"conditions": conditions}
    if applied:
        status["lastAppliedRevision"] = applied
    if attempted:
        status["lastAttemptedRevision"] = attempted
    if handled:
        status["lastHandledReconcileAt"] = handled
    return {"metadata": {"name": name}, "status": status}


def test_tracker_records_ready_started_failed_and_handled() -> None:
    tracker = workload.Tracker(cast(KubeClient, None))
    tracker._observe({"metadata": {"name": "app-0"}})  # no status yet
    tracker._observe(ks_obj("app-0", ready="Unknown", attempted="main@sha1:a"))
    tracker._observe(ks_obj("app-1", ready="False", message="x" * 400))
    tracker._observe(ks_obj("app-2", ready="False", message="old", reconciling=True, attempted="main@sha1:b"))
    tracker._observe(ks_obj("app-0", ready="True", applied="main@sha1:a", handled="tok"))
    assert set(tracker.started_at) == {("app-0", "main@sha1:a"), ("app-2", "main@sha1:b")}
    assert set(tracker.ready_at) == {("app-0", "main@sha1:a")}
    assert set(tracker.handled_at) == {("app-0", "tok")}
    assert tracker.failures == {"app-1": "x" * 300, "app-2": "old"}
    tracker._observe(ks_obj("app-1", ready="True", applied="main@sha1:c"))
    assert "app-1" not in tracker.failures  # Ready again clears the failure


def test_tracker_keeps_the_first_time_it_saw_a_state() -> None:
    tracker = workload.Tracker(cast(KubeClient, None))
    tracker._observe(ks_obj("app-0", ready="True", applied="r1", handled="tok"))
    first_ready, first_handled = tracker.ready_at[("app-0", "r1")], tracker.handled_at[("app-0", "tok")]
    tracker._observe(ks_obj("app-0", ready="True", applied="r1", handled="tok"))
    assert tracker.ready_at[("app-0", "r1")] == first_ready
    assert tracker.handled_at[("app-0", "tok")] == first_handled
    tracker._observe(ks_obj("app-0", ready="True", applied="r2"))
    assert set(tracker.ready_at) == {("app-0", "r1"), ("app-0", "r2")}


def test_first_ready_is_the_earliest_of_the_expected_revisions() -> None:
    tracker = workload.Tracker(cast(KubeClient, None))
    tracker.ready_at.update({("app-0", "r1"): 5.0, ("app-1", "r1"): 3.0, ("app-1", "r0"): 1.0, ("app-2", "r1"): 9.0})
    assert tracker.first_ready({"app-0": "r1", "app-1": "r1"}) == 3.0  # app-1 at r0 and app-2 are not expected


def test_monorepo_layout_shares_one_platform_component() -> None:
    from bench.monorepo import kustomization as mono_ks
    from bench.monorepo import monorepo_files

    files = monorepo_files(20, changed=3, platform_rev=2)
    assert sum("../../platform" in text for path, text in files.items() if path.endswith("kustomization.yaml")) == 2
    assert 'revision: "2"' in files["platform/kustomization.yaml"]
    assert 'revision: "2"' in files["apps/app-3/app.yaml"] and 'revision: "1"' in files["apps/app-4/app.yaml"]
    assert mono_ks(7)["spec"]["path"] == "./apps/app-7"
    assert mono_ks(7)["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "monorepo"}


# --- issue 27: sharding labels and a driver that stays linear ------------------------------------------


def test_kustomizations_are_labelled_round_robin_for_shards() -> None:
    assert "labels" not in workload.kustomization(0, wait=False)["metadata"]
    keys = [workload.kustomization(i, wait=False, shards=4)["metadata"]["labels"][workload.SHARD_KEY]
            for i in range(8)]
    assert keys == ["shard1", "shard2", "shard3", "shard4"] * 2


class _CountingDict(dict[tuple[str, str], float]):
    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    def __contains__(self, key: object) -> bool:
        self.lookups += 1
        return super().__contains__(key)


def test_waiting_for_n_keys_costs_o_n_lookups_in_all_not_o_n_per_check() -> None:
    n = 1000
    seen = _CountingDict()
    done = workload._drained([(f"app-{i}", "r") for i in range(n)], seen)
    for i in range(n):  # one watch event per key, each followed by a check (the worst case)
        seen[(f"app-{i}", "r")] = 0.0
        done()
    assert done()
    assert seen.lookups <= 3 * n  # all(...) on every check was n * (n + 1) / 2
