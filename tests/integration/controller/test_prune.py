"""Garbage collection on a new revision (upstream ``kustomization_prune_test.go``): objects that left the
source are deleted, unless the live object says ``prune: disabled`` or no longer carries this
Kustomization's owner labels; objects the Kustomization never applied are never touched."""

from __future__ import annotations

import pytest

from kustomize_controller.reconcile.unreachable import QuickRetries
from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


async def test_objects_removed_from_the_source_are_pruned(env: ControllerEnv) -> None:
    ns = env.namespace
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "bystander", "namespace": ns}, "data": {"k": "v"}})
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b"), "c.yaml": configmap("c"),
                               "d.yaml": configmap("d")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=first["revision"])

    # out of band: "c" opts out of pruning, "d" is taken over by another Kustomization
    await env.client.patch("v1", "ConfigMap", "c", ns,
                           {"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/prune": "disabled"}}},
                           patch_type="merge")
    await env.client.patch("v1", "ConfigMap", "d", ns,
                           {"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "other"}}},
                           patch_type="merge")

    second = await env.publish({"a.yaml": configmap("a")})
    obj = await env.wait_ready(revision=second["revision"])

    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
    assert await env.exists("v1", "ConfigMap", "a")
    assert not await env.exists("v1", "ConfigMap", "b")
    assert await env.exists("v1", "ConfigMap", "c")
    assert await env.exists("v1", "ConfigMap", "d")
    assert await env.exists("v1", "ConfigMap", "bystander")
    event = await env.wait_event(lambda e: "deleted" in e.get("message", ""))
    assert event["type"] == "Normal"
    assert event["reason"] == "Progressing"
    lines = event["message"].splitlines()
    assert f"ConfigMap/{ns}/b deleted" in lines
    assert f"ConfigMap/{ns}/c deleted" not in lines
    assert f"ConfigMap/{ns}/d deleted" not in lines


async def test_prune_false_keeps_removed_objects(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, prune=False))
    await env.wait_ready(revision=first["revision"])
    second = await env.publish({"a.yaml": configmap("a")})
    obj = await env.wait_ready(revision=second["revision"])
    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
    assert await env.exists("v1", "ConfigMap", "b")


async def test_objects_applied_by_a_controller_killed_before_its_status_write_are_pruned_later(
    env: ControllerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the chaos soak (issue 25): revision 2 adds "b", the controller dies right after the apply
    (no status written), revision 3 drops "b" before anyone reconciled revision 2 again. "b" must be
    pruned: it was in no inventory when the inventory was only written after the apply, and stayed
    behind for ever, labelled as ours."""
    import asyncio

    from kustomize_controller.apply.manager import ResourceManager

    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=first["revision"])

    original = ResourceManager.apply_all_staged
    applied = asyncio.Event()

    async def apply_then_die(self: ResourceManager, *args: object, **kwargs: object) -> object:
        result = await original(self, *args, **kwargs)  # type: ignore[arg-type]
        applied.set()
        await asyncio.Event().wait()  # as good as dead: nothing after the apply happens
        return result

    monkeypatch.setattr(ResourceManager, "apply_all_staged", apply_then_die)
    await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await asyncio.wait_for(applied.wait(), 60)
    assert await env.exists("v1", "ConfigMap", "b")
    await env.stop()
    monkeypatch.setattr(ResourceManager, "apply_all_staged", original)

    third = await env.publish({"a.yaml": configmap("a"), "c.yaml": configmap("c")})
    await env.start()
    obj = await env.wait_ready(revision=third["revision"])
    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap", f"{ns}_c__ConfigMap"]
    assert not await env.exists("v1", "ConfigMap", "b")


async def test_a_status_written_during_the_prune_keeps_what_is_being_pruned_in_the_inventory(
    env: ControllerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the soak on a real control plane (issue 38): revision 2 drops "b"; while the prune runs a
    progress status is written (the progress timer, ``--progress-status-delay``, fires whenever the
    reconcile has run that long); the prune then fails and the final status write fails too (the controller
    dies, or the API server restarting answers 403 before its RBAC cache is filled). The status on the
    server listed only "a": the next reconcile found nothing stale and "b" stayed for ever, labelled as ours.
    Whatever is written while the prune runs must still list what it prunes."""
    import asyncio

    from kustomize_controller.reconcile import apply_step
    from kustomize_controller.reconcile.apply_step import ApplyStep

    ns = env.namespace
    await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready()

    contexts: list[object] = []
    original_step = ApplyStep._apply_and_check
    original_prune = apply_step.delete_all
    written = asyncio.Event()

    async def remember_context(self: ApplyStep, ctx: object, *args: object, **kwargs: object) -> None:
        contexts.append(ctx)
        await original_step(self, ctx, *args, **kwargs)  # type: ignore[arg-type]

    async def progress_then_die(*args: object, **kwargs: object) -> object:
        ctx = contexts[-1]
        await ctx.patcher.patch(ctx.ks)  # type: ignore[attr-defined]  # the progress timer's write, here at once
        written.set()
        await asyncio.Event().wait()  # as good as dead: the prune never ends, no final status
        return None

    monkeypatch.setattr(ApplyStep, "_apply_and_check", remember_context)
    monkeypatch.setattr(apply_step, "delete_all", progress_then_die)
    second = await env.publish({"a.yaml": configmap("a")})
    await asyncio.wait_for(written.wait(), 60)
    await env.stop()
    stored = await env.get_ks()
    assert [e["id"] for e in stored["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap",
                                                                           f"{ns}_b__ConfigMap"]
    monkeypatch.setattr(ApplyStep, "_apply_and_check", original_step)
    monkeypatch.setattr(apply_step, "delete_all", original_prune)

    await env.start()
    obj = await env.wait_ready(revision=second["revision"])
    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
    assert not await env.exists("v1", "ConfigMap", "b")


async def test_an_object_whose_apply_answer_was_lost_stays_in_the_inventory_and_is_pruned_later(
    env: ControllerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: the server stores "b" but its answer is lost (a 500 after the commit), so the apply fails.
    "b" exists, labelled as ours: the failed reconcile's inventory must still list it, or a revision
    without it, reconciled before any successful apply, orphans it. The error is upstream's, unchanged."""
    ns = env.namespace
    # a 5xx is retried within a second (reconcile/unreachable.py), and that retry would find "b" unchanged
    # and record it: held off, so that the next reconcile is the new revision's
    monkeypatch.setattr(QuickRetries, "next_delay", lambda self, key: 3600.0)
    env.server.faults.fail(method="PATCH", path=rf"/namespaces/{ns}/configmaps/b$", status=500, count=1,
                           message="etcd request timed out", after_store=True)
    await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b"), "c.yaml": configmap("c")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    failed = await env.wait_for("app", lambda o: condition(o, "Reconciling") == ("True", "ProgressingWithRetry"))
    await env.stop()
    message = next(c["message"] for c in failed["status"]["conditions"] if c["type"] == "Reconciling")
    assert f"ConfigMap/{ns}/b apply failed: etcd request timed out" in message, message
    assert await env.exists("v1", "ConfigMap", "b")  # stored all the same
    assert not await env.exists("v1", "ConfigMap", "c")  # never attempted
    assert [e["id"] for e in failed["status"]["inventory"]["entries"]] == [
        f"{ns}_a__ConfigMap", f"{ns}_b__ConfigMap"]

    second = await env.publish({"a.yaml": configmap("a")})
    await env.start()
    obj = await env.wait_ready(revision=second["revision"])
    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
    assert not await env.exists("v1", "ConfigMap", "b")


async def test_an_unreachable_server_at_the_inventory_record_is_retried_quickly_and_applies_nothing(
    env: ControllerEnv,
) -> None:
    """The status write that records the inventory before the apply fails as an apply would: a server that
    cannot be reached is retried within seconds and shown as progressing, and nothing is applied until
    the record succeeds."""
    from tests.integration.controller.conftest import condition

    ns = env.namespace
    artifact = await env.publish({"a.yaml": configmap("a")})
    await env.create(env.kustomization(targetNamespace=ns))
    # the first status write (the record) answers 503
    env.server.faults.fail(method="PATCH", path=rf"/namespaces/{ns}/kustomizations/app/status$", status=503,
                           count=1)
    async with env.versions() as seen:
        await env.start()
        obj = await env.wait_ready(revision=artifact["revision"])
    retried = [o for o in seen if condition(o, "Reconciling") == ("True", "ProgressingWithRetry")]
    assert retried and not (retried[0]["status"].get("inventory") or {}).get("entries")
    assert "failed to record the inventory" in str(retried[0]["status"]["conditions"])
    assert [e["id"] for e in obj["status"]["inventory"]["entries"]] == [f"{ns}_a__ConfigMap"]
    failed = [o for o in seen if (condition(o, "Ready") or ("", ""))[0] == "False"]
    assert not failed, [c for o in failed for c in o["status"]["conditions"]]


async def test_an_apply_refused_although_its_dry_run_passed_prunes_nothing_and_keeps_what_was_applied(
    env: ControllerEnv,
) -> None:
    """A write the server refuses with a 4xx after its dry-run passed (a webhook that skips dry-runs, a quota):
    Ready=False with upstream's "<ref> apply failed" error, the refused object keeps what it had, nothing is
    pruned, and the inventory still lists every object of the last good revision, so the removed one is
    pruned once the apply goes through."""
    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b", {"v": "1"}),
                               "c.yaml": configmap("c")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns, retryInterval="1s"))
    await env.wait_ready(revision=first["revision"])
    refused = env.server.faults.fail(
        method="PATCH", path=rf"/namespaces/{ns}/configmaps/b$", status=403, count=None, dry_run=False,
        message='admission webhook "quota.example.com" denied the request: over quota')
    second = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b", {"v": "2"})})
    failed = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    assert refused.hits >= 1
    message = condition_message(failed, "Ready")
    assert message.startswith(f"ConfigMap/{ns}/b apply failed: ") and "over quota" in message, message
    assert (await env.get("v1", "ConfigMap", "b"))["data"] == {"v": "1"}
    assert await env.exists("v1", "ConfigMap", "c")  # removed from the source, but the apply failed
    assert sorted(e["id"] for e in failed["status"]["inventory"]["entries"]) == [
        f"{ns}_a__ConfigMap", f"{ns}_b__ConfigMap", f"{ns}_c__ConfigMap"]
    assert failed["status"]["lastAppliedRevision"] == first["revision"]

    env.server.faults.clear()
    obj = await env.wait_ready(revision=second["revision"])
    assert sorted(e["id"] for e in obj["status"]["inventory"]["entries"]) == [
        f"{ns}_a__ConfigMap", f"{ns}_b__ConfigMap"]
    assert (await env.get("v1", "ConfigMap", "b"))["data"] == {"v": "2"}
    assert not await env.exists("v1", "ConfigMap", "c")
