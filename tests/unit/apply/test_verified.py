"""VerifiedApplies: a no-op re-apply skips the dry-run only while object, manifest and options are unchanged."""

from __future__ import annotations

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.drift import compile_ignore_rules
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.verified import VerifiedApplies, fingerprint
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.apply.fakes import FakeClient, cm

KEY = ("", "ConfigMap", "default", "a")
REF = ObjRef(group="", kind="ConfigMap", namespace="default", name="a")


def manager(client: FakeClient, verified: VerifiedApplies | None) -> ResourceManager:
    return ResourceManager(client=client, clock=FakeClock(), concurrency=2, verified=verified)


def dry_runs(client: FakeClient, since: int = 0) -> int:
    return sum(1 for c in client.calls[since:] if c.verb == "apply" and c.dry_run)


class _Rule:
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.target = None


async def test_an_object_written_by_the_apply_is_not_dry_run_on_the_next_interval() -> None:
    client, verified = FakeClient(), VerifiedApplies()
    rm = manager(client, verified)
    objs = [cm("a"), cm("b")]
    await rm.apply_all_staged(objs, ApplyOptions())  # created: remembered as the apply left them
    assert len(verified) == 2
    mark = len(client.calls)
    cs = await rm.apply_all_staged(objs, ApplyOptions())
    assert str(cs) == "ConfigMap/default/a unchanged\nConfigMap/default/b unchanged"
    assert [c.verb for c in client.calls[mark:]] == ["get", "get"]  # one request per object


async def test_an_unchanged_object_is_remembered_after_its_verifying_dry_run() -> None:
    client, verified = FakeClient(), VerifiedApplies()
    await manager(client, None).apply_all_staged([cm("a")], ApplyOptions())  # written without the memory
    rm = manager(client, verified)
    mark = len(client.calls)
    cs = await rm.apply_all_staged([cm("a")], ApplyOptions())
    assert [e.action for e in cs] == [Action.UNCHANGED]
    assert dry_runs(client, mark) == 1 and len(verified) == 1
    mark = len(client.calls)
    await rm.apply_all_staged([cm("a")], ApplyOptions())
    assert [c.verb for c in client.calls[mark:]] == ["get"]


async def test_out_of_band_edit_changes_resource_version_and_is_reverted() -> None:
    client, verified = FakeClient(), VerifiedApplies()
    rm = manager(client, verified)
    objs = [cm("a", data={"k": "v"})]
    for _ in range(3):
        await rm.apply_all_staged(objs, ApplyOptions())
    client.objects[KEY]["data"] = {"k": "edited"}
    client.objects[KEY]["metadata"]["resourceVersion"] = "9999"
    mark = len(client.calls)
    cs = await rm.apply_all_staged(objs, ApplyOptions())
    assert str(cs) == "ConfigMap/default/a configured"
    assert dry_runs(client, mark) == 1
    assert client.objects[KEY]["data"] == {"k": "v"}
    mark = len(client.calls)
    await rm.apply_all_staged(objs, ApplyOptions())  # the correcting apply was remembered
    assert dry_runs(client, mark) == 0


async def test_changed_manifest_is_dry_run_and_applied() -> None:
    client, verified = FakeClient(), VerifiedApplies()
    rm = manager(client, verified)
    for _ in range(2):
        await rm.apply_all_staged([cm("a", data={"k": "v1"})], ApplyOptions())
    cs = await rm.apply_all_staged([cm("a", data={"k": "v2"})], ApplyOptions())
    assert str(cs) == "ConfigMap/default/a configured"
    assert client.objects[KEY]["data"] == {"k": "v2"}


async def test_changed_ignore_rules_invalidate_the_proof() -> None:
    client, verified = FakeClient(), VerifiedApplies()
    rm = manager(client, verified)
    objs = [cm("a")]
    for _ in range(2):
        await rm.apply_all_staged(objs, ApplyOptions())
    options = ApplyOptions(ignore_rules=compile_ignore_rules([_Rule(["/data"])]))
    mark = len(client.calls)
    await rm.apply_all_staged(objs, options)
    assert dry_runs(client, mark) == 1


async def test_a_new_cache_after_restart_dry_runs_again_and_finds_no_change() -> None:
    client = FakeClient()
    objs = [cm("a"), cm("b")]
    first = manager(client, VerifiedApplies())
    for _ in range(2):
        await first.apply_all_staged(objs, ApplyOptions())
    restarted = manager(client, VerifiedApplies())
    mark, writes = len(client.calls), len(client.writes())
    cs = await restarted.apply_all_staged(objs, ApplyOptions())
    assert [e.action for e in cs] == [Action.UNCHANGED, Action.UNCHANGED]
    assert dry_runs(client, mark) == 2 and len(client.writes()) == writes
    mark = len(client.calls)
    await restarted.apply_all_staged(objs, ApplyOptions())
    assert dry_runs(client, mark) == 0


async def test_without_a_cache_every_reconcile_dry_runs_as_upstream() -> None:
    client = FakeClient()
    rm = manager(client, None)
    for _ in range(3):
        await rm.apply_all_staged([cm("a")], ApplyOptions())
    assert dry_runs(client) == 3  # every apply dry-runs, the no-op ones too


def test_is_verified_needs_same_uid_resource_version_and_fingerprint() -> None:
    verified = VerifiedApplies()
    live = {"metadata": {"uid": "u1", "resourceVersion": "5"}}
    fp = fingerprint(cm("a"), context="m")
    verified.remember(REF, fp, live)
    assert verified.is_verified(REF, fp, live)
    assert not verified.is_verified(REF, fp, {"metadata": {"uid": "u2", "resourceVersion": "5"}})
    assert not verified.is_verified(REF, fp, {"metadata": {"uid": "u1", "resourceVersion": "6"}})
    assert not verified.is_verified(REF, fingerprint(cm("a"), context="other-manager"), live)
    assert not verified.is_verified(REF, fingerprint(cm("a", data={"x": "y"}), context="m"), live)
    assert not verified.is_verified(REF, fp, None)
    assert len(verified) == 1


def test_objects_without_uid_or_resource_version_are_never_remembered() -> None:
    verified = VerifiedApplies()
    fp = fingerprint(cm("a"), context="")
    verified.remember(REF, fp, {"metadata": {"uid": "u1"}})
    verified.remember(REF, fp, None)
    assert len(verified) == 0


def test_least_recently_used_entries_are_evicted_at_the_bound() -> None:
    verified = VerifiedApplies(max_entries=2)
    refs = [ObjRef(group="", kind="ConfigMap", namespace="default", name=n) for n in "abc"]
    live = {"metadata": {"uid": "u", "resourceVersion": "1"}}
    verified.remember(refs[0], "f", live)
    verified.remember(refs[1], "f", live)
    assert verified.is_verified(refs[0], "f", live)  # a is now the most recently used
    verified.remember(refs[2], "f", live)
    assert verified.is_verified(refs[0], "f", live)
    assert not verified.is_verified(refs[1], "f", live)
    assert len(verified) == 2


def test_fingerprint_is_independent_of_key_order() -> None:
    a = {"kind": "ConfigMap", "apiVersion": "v1", "data": {"x": "1", "y": "2"}}
    b = {"apiVersion": "v1", "data": {"y": "2", "x": "1"}, "kind": "ConfigMap"}
    assert fingerprint(a, context="c") == fingerprint(b, context="c")


def _deployment(*, rv: str = "10", generation: int = 1, status: dict[str, object] | None = None,
                labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
                managed: list[dict[str, object]] | None = None, uid_: str = "u1") -> dict[str, object]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": uid_, "resourceVersion": rv, "generation": generation,
            "labels": labels if labels is not None else {"app": "web"},
            "annotations": annotations if annotations is not None else {},
            "managedFields": managed if managed is not None else [
                {"manager": "kustomize-controller", "operation": "Apply", "apiVersion": "apps/v1",
                 "time": "2026-11-24T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
            ],
        },
        "spec": {"replicas": 1},
        "status": status or {},
    }


def _status_entry(time: str) -> dict[str, object]:
    return {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1", "time": time,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}, "subresource": "status"}


DEPLOY = ObjRef(group="apps", kind="Deployment", namespace="default", name="web")


def test_a_status_write_of_a_workload_controller_is_not_drift() -> None:
    verified = VerifiedApplies()
    proof = _deployment()
    verified.remember(DEPLOY, "f", proof)
    managed = [*proof["metadata"]["managedFields"], _status_entry("2026-11-24T10:05:00Z")]  # type: ignore[index]
    later = _deployment(rv="17", status={"readyReplicas": 1}, managed=managed)
    assert verified.is_verified(DEPLOY, "f", later)  # a new resourceVersion: the second proof matched
    assert not verified.is_verified(DEPLOY, "other", later)


def test_main_resource_changes_are_never_hidden_by_the_memory() -> None:
    """Every way a write to the main resource could slip past the second proof: each one misses."""
    verified = VerifiedApplies()
    proof = _deployment()
    verified.remember(DEPLOY, "f", proof)
    ours = proof["metadata"]["managedFields"]  # type: ignore[index]
    edit = {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-11-24T10:06:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}}
    fooling = {
        "spec edit (generation bumped)": _deployment(rv="11", generation=2, managed=[*ours, edit]),
        "spec edit, generation kept (impossible, still caught by managed fields)": _deployment(
            rv="11", managed=[*ours, edit]),
        "label added by another manager": _deployment(rv="11", labels={"app": "web", "x": "y"}),
        "annotation added": _deployment(rv="11", annotations={"a": "b"}),
        "our own entry rewritten (kubectl apply --server-side --field-manager=kustomize-controller)": _deployment(
            rv="11", managed=[{**ours[0], "time": "2026-11-24T10:07:00Z"}]),
        "deleted and re-created": _deployment(rv="11", uid_="u2"),
        "managed fields stripped from the read": _deployment(rv="11", managed=[]),
    }
    for what, live in fooling.items():
        assert not verified.is_verified(DEPLOY, "f", live), what
    assert not verified.is_verified(DEPLOY, "other-manifest", _deployment(rv="11", managed=[*ours,
                                                                          _status_entry("2026-11-24T10:05:00Z")]))
    finalizer = _deployment(rv="11")
    finalizer["metadata"]["finalizers"] = ["example.com/hold"]  # type: ignore[index]
    assert not verified.is_verified(DEPLOY, "f", finalizer)


def test_kinds_without_generation_keep_the_exact_proof_only() -> None:
    verified = VerifiedApplies()
    live = {"metadata": {"uid": "u1", "resourceVersion": "5", "managedFields": [{"manager": "m"}]}, "data": {}}
    verified.remember(REF, "f", live)
    assert not verified.is_verified(REF, "f", {**live, "metadata": {**live["metadata"], "resourceVersion": "6"}})


def test_metadata_the_status_writer_owns_is_not_drift_but_a_main_resource_writer_of_it_is() -> None:
    verified = VerifiedApplies()
    proof = _deployment()
    verified.remember(DEPLOY, "f", proof)
    ours = proof["metadata"]["managedFields"]  # type: ignore[index]
    revision_entry = {**_status_entry("2026-11-24T10:05:00Z"),
                      "fieldsV1": {"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}},
                                   "f:status": {}}}
    rolled = _deployment(rv="12", annotations={"deployment.kubernetes.io/revision": "1"},
                         managed=[*ours, revision_entry])
    assert verified.is_verified(DEPLOY, "f", rolled)
    edit = {"manager": "kubectl-annotate", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-11-24T10:06:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}}}
    forged = _deployment(rv="13", annotations={"deployment.kubernetes.io/revision": "7"},
                         managed=[*ours, revision_entry, edit])
    assert not verified.is_verified(DEPLOY, "f", forged)
