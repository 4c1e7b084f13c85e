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


async def test_second_noop_skips_the_dry_run_only_after_a_verifying_dry_run() -> None:
    client, verified = FakeClient(), VerifiedApplies()
    rm = manager(client, verified)
    objs = [cm("a"), cm("b")]
    await rm.apply_all_staged(objs, ApplyOptions())  # created: written, not remembered
    assert len(verified) == 0
    mark = len(client.calls)
    cs = await rm.apply_all_staged(objs, ApplyOptions())  # verified by dry-run, remembered
    assert [e.action for e in cs] == [Action.UNCHANGED, Action.UNCHANGED]
    assert dry_runs(client, mark) == 2 and len(verified) == 2
    mark = len(client.calls)
    cs = await rm.apply_all_staged(objs, ApplyOptions())
    assert str(cs) == "ConfigMap/default/a unchanged\nConfigMap/default/b unchanged"
    assert [c.verb for c in client.calls[mark:]] == ["get", "get"]  # one request per object


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
    assert len(verified) == 0  # written: the next reconcile verifies again


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
    assert verified.stats() == {"entries": 1, "hits": 1, "misses": 5}


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
