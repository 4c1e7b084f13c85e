"""Sync windows (docs/change-management.md): an open deny window holds a new revision and a drift correction
and says so (``SyncAllowed=False`` ``SyncWindowClosed``), lets a manual request through only with
``manualSync: true``, and the change lands when the window closes — by a timer at the closing moment,
not the interval; the fleet-wide ConfigMap selects Kustomizations by namespace glob and by label; an
invalid window holds changes and names itself.

A window here fires in the current minute and lasts past now. The test of a window closing runs the
controller on a ``JumpClock`` and jumps to the closing moment: it never waits for the wall clock, so
a loaded machine cannot make it miss the held state.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION, SYNC_WINDOWS_ANNOTATION
from kustomize_controller.api.duration import format_duration
from kustomize_controller.approve_command import approve_plan
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.runtime.clock import RealClock
from tests.integration.controller.conftest import KS_API, ControllerEnv, condition, condition_message
from tests.integration.controller.jumpclock import JumpClock
from tests.integration.controller.manifests import configmap, kustomization

pytestmark = pytest.mark.integration


def files(mode: str) -> dict[str, str]:
    return {"kustomization.yaml": kustomization("a.yaml"), "a.yaml": configmap("a", {"mode": mode})}


def deny_until(until: datetime, *, now: datetime | None = None, manual: bool = False,
               **selectors: Any) -> dict[str, Any]:
    """A deny window active at ``now`` (it fires in that UTC minute) that closes at ``until``."""
    fired = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    duration = timedelta(seconds=int((until - fired).total_seconds()) + 1)
    return {"kind": "deny", "schedule": f"{fired.minute} {fired.hour} * * *", "duration": format_duration(duration),
            "timeZone": "UTC", "manualSync": manual, **selectors}


def an_hour(**kwargs: Any) -> dict[str, Any]:
    return deny_until(datetime.now(UTC) + timedelta(hours=1), **kwargs)


async def set_windows(env: ControllerEnv, windows: list[dict[str, Any]] | str, name: str = "app") -> None:
    text = windows if isinstance(windows, str) else json.dumps(windows)
    await env.client.patch(KS_API, "Kustomization", name, env.namespace,
                           {"metadata": {"annotations": {SYNC_WINDOWS_ANNOTATION: text}}}, patch_type="merge")


async def mode_of(env: ControllerEnv, namespace: str | None = None) -> str | None:
    try:
        cm = await env.client.get("v1", "ConfigMap", "a", namespace or env.namespace)
    except Exception:
        return None
    return str(cm["data"]["mode"])


def closed(obj: dict[str, Any], revision: str | None = None) -> bool:
    return (condition(obj, "SyncAllowed") == ("False", "SyncWindowClosed")
            and (revision is None or (obj.get("status") or {}).get("lastAttemptedRevision") == revision))


async def applied(env: ControllerEnv, clock: JumpClock | None = None) -> dict[str, Any]:
    artifact = await env.publish(files("one"))
    await env.start(clock=clock)
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=artifact["revision"])
    return artifact


async def test_a_deny_window_holds_a_revision_and_drift_and_manual_sync_lets_a_request_through(
    env: ControllerEnv,
) -> None:
    ns = env.namespace
    first = await applied(env)
    await set_windows(env, [an_hour()])
    obj = await env.wait_for("app", closed)
    assert "manual requests are not allowed" in condition_message(obj, "SyncAllowed")

    second = await env.publish(files("two"))
    obj = await env.wait_for("app", lambda o: closed(o, second["revision"]) and "waits" in condition_message(
        o, "SyncAllowed"))
    message = condition_message(obj, "SyncAllowed")
    assert "active: deny window" in message and f"Kustomization/{ns}/app annotation" in message
    assert "changes are allowed from " in message and "(1 configured)" in message
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    assert condition_message(obj, "Ready") == f"Applied revision: {first['revision']}"
    assert await mode_of(env) == "one"
    assert any(e.get("reason") == "SyncWindowClosed" for e in await env.events())

    # a drift correction waits too, and so does a manual request without manualSync
    await env.client.patch("v1", "ConfigMap", "a", ns, {"data": {"mode": "hotfix"}}, patch_type="merge",
                           field_manager="kubectl-edit")
    obj = await env.wait_handled(await env.request_reconcile())
    assert closed(obj) and (obj["status"]["lastAppliedRevision"], await mode_of(env)) == (first["revision"], "hotfix")

    # manualSync: the window itself is not a request; a requestedAt is
    await set_windows(env, [an_hour(manual=True)])
    obj = await env.wait_for("app", lambda o: "manual requests are allowed" in condition_message(o, "SyncAllowed"))
    assert await mode_of(env) == "hotfix"
    obj = await env.wait_handled(await env.request_reconcile())
    assert obj["status"]["lastAppliedRevision"] == second["revision"]
    assert "a manual request was let through" in condition_message(obj, "SyncAllowed")
    assert await mode_of(env) == "two"


async def test_one_manual_request_lets_one_change_through_and_the_next_revision_waits(env: ControllerEnv) -> None:
    """manualSync: a ``requestedAt`` not handled yet is one manual request; once handled, the next revision
    waits for the window (or another request)."""
    await applied(env)
    await set_windows(env, [an_hour(manual=True)])
    await env.wait_for("app", lambda o: "manual requests are allowed" in condition_message(o, "SyncAllowed"))
    second = await env.publish(files("two"))
    await env.wait_for("app", lambda o: closed(o, second["revision"])
                       and "waits" in condition_message(o, "SyncAllowed"))

    token = await env.request_reconcile()
    obj = await env.wait_handled(token)
    assert obj["status"]["lastAppliedRevision"] == second["revision"] and await mode_of(env) == "two"
    assert "a manual request was let through" in condition_message(obj, "SyncAllowed")

    third = await env.publish(files("three"))
    obj = await env.wait_for("app", lambda o: closed(o, third["revision"]) and "waits" in condition_message(
        o, "SyncAllowed"))
    assert obj["status"]["lastHandledReconcileAt"] == token  # the request is handled: it let one change through
    assert obj["status"]["lastAppliedRevision"] == second["revision"] and await mode_of(env) == "two"


async def test_an_approval_is_the_manual_request_of_one_plan_once(env: ControllerEnv) -> None:
    """With ``approval: manual`` and a window that allows manual syncs, an approval of exactly the plan lets it
    through the closed window, once: a later plan with the same id (drift back) waits for a new approval."""
    artifact = await env.publish(files("one"))
    await env.start()
    ks = env.kustomization(targetNamespace=env.namespace)
    ks["metadata"]["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    await env.create(ks)

    async def approve_waiting(revision: str) -> str:
        obj = await env.wait_for("app", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired")
                                 and revision in condition_message(o, "Approved"))
        plan_id = plan_id_in(condition_message(obj, "Approved"))
        await approve_plan(env.client, namespace=env.namespace, name="app", clock=RealClock(), plan_id=plan_id)
        return plan_id

    await approve_waiting(artifact["revision"])
    await env.wait_ready(revision=artifact["revision"])
    await set_windows(env, [an_hour(manual=True)])
    second = await env.publish(files("two"))
    plan_id = await approve_waiting(second["revision"])
    obj = await env.wait_ready(revision=second["revision"])
    assert "a manual request was let through" in condition_message(obj, "SyncAllowed")

    await env.client.patch("v1", "ConfigMap", "a", env.namespace, {"data": {"mode": "hotfix"}}, patch_type="merge",
                           field_manager="kubectl-edit")
    obj = await env.wait_handled(await env.request_reconcile())
    # the drift plan is the approved one (the same id): used up, it waits; a requestedAt approves nothing
    message = condition_message(obj, "Approved")
    assert plan_id_in(message) == plan_id and f"the approval of plan {plan_id} was already used" in message
    assert await mode_of(env) == "hotfix"


async def test_the_change_lands_when_the_window_closes(env: ControllerEnv) -> None:
    clock = JumpClock()
    await applied(env, clock)
    closes = clock.now() + timedelta(minutes=5)
    await set_windows(env, [deny_until(closes, now=clock.now())])
    await env.wait_for("app", closed)
    second = await env.publish(files("two"))
    obj = await env.wait_for("app", lambda o: closed(o, second["revision"]))
    assert await mode_of(env) == "one"
    opens = condition_message(obj, "SyncAllowed").split("changes are allowed from ")[1].split(";")[0]
    assert abs(datetime.strptime(opens, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) - closes) <= timedelta(seconds=2)
    # the hold's requeue is a timer at the opening, well before the interval (10m)
    requeued = await _requeued(env, clock)
    assert timedelta(seconds=requeued - clock.monotonic()) <= closes - clock.now() + timedelta(seconds=2)
    # nothing but that timer can bring the change: time jumps to the opening, no other event
    clock.jump((closes - clock.now()).total_seconds() + 2)
    obj = await env.wait_ready(revision=second["revision"], within=90)
    assert condition(obj, "SyncAllowed") == ("True", "SyncWindowOpen")
    assert await mode_of(env) == "two"


async def _requeued(env: ControllerEnv, clock: JumpClock) -> float:
    """When the held reconcile's delayed requeue is due (the controller files it right after the status)."""
    for _ in range(600):
        due = env.requeued_at()
        if due is not None and due > clock.monotonic():
            return due
        await asyncio.sleep(0.1)
    raise AssertionError("the held reconcile filed no delayed requeue")


async def test_an_invalid_window_holds_changes_and_names_itself(env: ControllerEnv) -> None:
    first = await applied(env)
    await set_windows(env, [an_hour(), {"kind": "deny", "schedule": "0 25 * * *", "duration": "1h"}])
    second = await env.publish(files("two"))
    obj = await env.wait_for("app", lambda o: condition(o, "SyncAllowed") == ("False", "InvalidSyncWindow")
                             and o["status"].get("lastAttemptedRevision") == second["revision"])
    message = condition_message(obj, "SyncAllowed")
    assert f"Kustomization/{env.namespace}/app annotation {SYNC_WINDOWS_ANNOTATION}[1]" in message
    assert "invalid schedule" in message
    assert obj["status"]["lastAppliedRevision"] == first["revision"] and await mode_of(env) == "one"
    warning = await env.wait_event(lambda e: e.get("reason") == "InvalidSyncWindow")
    assert warning["type"] == "Warning"


async def test_the_fleet_configmap_selects_by_namespace_glob_and_by_label(env: ControllerEnv) -> None:
    ns = env.namespace
    prod, dev = f"{ns}-prod-eu", f"{ns}-dev"
    for namespace in (prod, dev):
        await env.create_namespace(namespace)
    windows = [an_hour(namespaces=[f"{ns}-prod-*"]), an_hour(selector="change-freeze=true")]
    await env.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "sync-windows", "namespace": ns},
                             "data": {"windows": json.dumps(windows)}})
    artifact = await env.publish(files("one"))
    await env.start(watch_all_namespaces=True, sync_windows_configmap=f"{ns}/sync-windows")

    def ks(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        obj = env.kustomization(name, targetNamespace=namespace,
                                sourceRef={"kind": "GitRepository", "name": "repo", "namespace": ns})
        obj["metadata"]["namespace"] = namespace
        if labels:
            obj["metadata"]["labels"] = labels
        return obj

    await env.create(ks("by-glob", prod))
    await env.create(ks("free", dev))
    await env.create(ks("by-label", ns, {"change-freeze": "true"}))

    async def wait(name: str, namespace: str, predicate: Any) -> dict[str, Any]:
        last: dict[str, Any] = {}
        for _ in range(600):
            last = await env.client.get(KS_API, "Kustomization", name, namespace)
            if predicate(last):
                return last
            await asyncio.sleep(0.1)
        raise AssertionError(f"Kustomization/{namespace}/{name}: {last.get('status')}")

    free = await wait("free", dev, lambda o: condition(o, "Ready") == ("True", "ReconciliationSucceeded"))
    assert free["status"]["lastAppliedRevision"] == artifact["revision"]
    assert condition(free, "SyncAllowed") is None
    for name, namespace in (("by-glob", prod), ("by-label", ns)):
        obj = await wait(name, namespace, lambda o: closed(o, artifact["revision"]))
        # nothing was ever applied: Ready says why
        assert condition(obj, "Ready") == ("False", "SyncWindowClosed")
        assert f"ConfigMap {ns}/sync-windows data.windows" in condition_message(obj, "SyncAllowed")
    assert await mode_of(env, dev) == "one"
    assert await mode_of(env, prod) is None
