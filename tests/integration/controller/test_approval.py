"""``approval: manual`` (docs/change-management.md): a new revision changes nothing until its plan is approved
— by ``kustomize-controller approve`` or the annotation — and then exactly that plan is applied; an approval of
an outdated plan applies nothing; drift is corrected only after approval. ``Ready`` keeps describing what is
applied, ``diff`` shows the pending plan, one ``ApprovalRequired`` event per plan, ``gotk_plan_pending``."""

from __future__ import annotations

import asyncio
import io
from typing import Any
from unittest import mock

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION, APPROVED_PLAN_ANNOTATION
from kustomize_controller.cli import main
from kustomize_controller.reconcile.gate.approval import USED, record_in
from kustomize_controller.reconcile.gate.plan import plan_id_in
from tests.integration.controller.conftest import KS_API, ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap, kustomization
from tests.integration.controller.test_diff import run_diff
from tests.integration.controller.test_metrics import scrape, values

pytestmark = pytest.mark.integration


def files(mode: str, *names: str) -> dict[str, str]:
    objects = {f"{n}.yaml": configmap(n, {"mode": mode}) for n in names}
    return {"kustomization.yaml": kustomization(*objects), **objects}


async def pending(env: ControllerEnv, revision: str, *, outdated: str = "") -> dict[str, Any]:
    """The Kustomization once it holds a plan for ``revision`` (and says ``outdated`` is outdated)."""
    def waiting(obj: dict[str, Any]) -> bool:
        message = condition_message(obj, "Approved")
        return (condition(obj, "Approved") == ("False", "ApprovalRequired") and revision in message
                and (not outdated or f"the approved plan {outdated} is outdated" in message))
    return await env.wait_for("app", waiting)


async def approve_annotation(env: ControllerEnv, plan_id: str, name: str = "app") -> None:
    await env.client.patch(KS_API, "Kustomization", name, env.namespace,
                           {"metadata": {"annotations": {APPROVED_PLAN_ANNOTATION: plan_id}}}, patch_type="merge")


async def run_approve(env: ControllerEnv, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = ["approve", "app", "-n", env.namespace, "--kubeconfig", env.cluster.kubeconfig_path, *argv]
    with mock.patch("sys.stdin", io.StringIO(stdin)):
        code = await asyncio.to_thread(main, args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


async def mode_of(env: ControllerEnv, name: str) -> str | None:
    if not await env.exists("v1", "ConfigMap", name):
        return None
    return str((await env.get("v1", "ConfigMap", name))["data"]["mode"])


async def start_manual(env: ControllerEnv, tree: dict[str, str]) -> dict[str, Any]:
    """A Kustomization with ``approval: manual`` whose first revision was approved and applied."""
    artifact = await env.publish(tree)
    await env.start()
    ks = env.kustomization(targetNamespace=env.namespace)
    ks["metadata"]["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    await env.create(ks)
    first = await pending(env, artifact["revision"])
    # nothing was ever applied: Ready says why
    assert condition(first, "Ready") == ("False", "ApprovalRequired")
    assert not await env.exists("v1", "ConfigMap", "a")
    await approve_annotation(env, plan_id_in(condition_message(first, "Approved")))
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Approved") == ("True", "PlanApproved")
    return artifact


async def test_a_new_revision_waits_and_approve_applies_exactly_its_plan(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await start_manual(env, files("safe", "a", "b"))

    second = await env.publish(files("fast", "a", "c"))  # a configured, c created, b pruned
    obj = await pending(env, second["revision"])
    message = condition_message(obj, "Approved")
    plan_id = plan_id_in(message)
    assert f"plan {plan_id} (1 created, 1 configured, 1 deleted)" in message
    assert f"kustomize-controller approve app -n {ns}" in message
    status = obj["status"]
    assert status["lastAttemptedRevision"] == second["revision"]
    assert status["lastAppliedRevision"] == first["revision"]
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    assert condition_message(obj, "Ready") == f"Applied revision: {first['revision']}"
    assert not any(c["type"] == "Reconciling" for c in status["conditions"])
    assert (await mode_of(env, "a"), await mode_of(env, "b"), await mode_of(env, "c")) == ("safe", "safe", None)

    # a reconcile of the same plan says nothing new
    obj = await env.wait_handled(await env.request_reconcile())
    assert plan_id_in(condition_message(obj, "Approved")) == plan_id
    events = [e for e in await env.events() if e.get("reason") == "ApprovalRequired"]
    assert len(events) == 2 and events[-1]["type"] == "Normal" and plan_id in events[-1]["message"]
    me = {"kind": "Kustomization", "name": "app", "namespace": ns}
    assert values(await scrape(env), "gotk_plan_pending", **me, reason="ApprovalRequired") == [1.0]

    # diff shows the pending plan, with the same id
    code, out, err = await run_diff(env)
    assert code == 1
    assert f"ConfigMap/{ns}/a configured" in out and f"ConfigMap/{ns}/b deleted" in out
    assert f"plan {plan_id} (1 created, 1 configured, 1 deleted)" in err
    assert "the controller holds its plan: Approved=False ApprovalRequired" in err

    # approve shows it too and sets the annotation; the controller applies exactly it
    code, out, err = await run_approve(env, "--yes")
    assert code == 0, err
    assert f"ConfigMap/{ns}/c created" in out and f"approved plan {plan_id}" in out
    assert (await env.get_ks())["metadata"]["annotations"][APPROVED_PLAN_ANNOTATION] == plan_id
    obj = await env.wait_ready(revision=second["revision"])
    assert condition(obj, "Approved") == ("True", "PlanApproved")
    assert (await mode_of(env, "a"), await mode_of(env, "b"), await mode_of(env, "c")) == ("fast", None, "fast")
    for _ in range(600):  # the gauge is written just after the status (30 s: an upper bound on a loaded CI)
        if not values(await scrape(env), "gotk_plan_pending", **me):
            break
        await asyncio.sleep(0.05)
    assert values(await scrape(env), "gotk_plan_pending", **me) == []

    # with nothing left to change: Approved=True NoChanges
    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Approved") == ("True", "NoChanges")
    code, out, _ = await run_approve(env, "--yes")
    assert code == 0 and "nothing to approve" in out


async def test_an_outdated_approval_applies_nothing(env: ControllerEnv) -> None:
    await start_manual(env, files("one", "a"))
    second = await env.publish(files("two", "a"))
    outdated = plan_id_in(condition_message(await pending(env, second["revision"]), "Approved"))
    third = await env.publish(files("three", "a"))
    current = plan_id_in(condition_message(await pending(env, third["revision"]), "Approved"))
    assert current != outdated

    await approve_annotation(env, outdated)
    obj = await pending(env, third["revision"], outdated=outdated)
    assert plan_id_in(condition_message(obj, "Approved")) == current
    assert await mode_of(env, "a") == "one"

    await approve_annotation(env, current)
    await env.wait_ready(revision=third["revision"])
    assert await mode_of(env, "a") == "three"


async def test_drift_is_corrected_only_after_approval(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await start_manual(env, files("safe", "a"))
    await env.client.patch("v1", "ConfigMap", "a", ns, {"data": {"mode": "hotfix"}}, patch_type="merge",
                           field_manager="kubectl-edit")

    obj = await env.wait_handled(await env.request_reconcile())
    assert condition(obj, "Approved") == ("False", "ApprovalRequired")
    message = condition_message(obj, "Approved")
    assert f"revision {first['revision']}" in message and "(1 configured)" in message
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    assert await mode_of(env, "a") == "hotfix"

    code, out, err = await run_approve(env, stdin="n\n")  # asked, declined: nothing set
    assert code == 1 and "Approve plan " in err and "not approved" in err
    annotations = (await env.get_ks())["metadata"].get("annotations") or {}
    assert annotations.get(APPROVED_PLAN_ANNOTATION) != plan_id_in(message)
    code, out, err = await run_approve(env, stdin="y\n")
    assert code == 0, err
    assert f"ConfigMap/{ns}/a configured" in out and "+  mode: safe" in out
    # the approval is recorded ("applying") before the apply writes, and "used" once it has
    await env.wait_for("app", lambda o: condition(o, "Approved") == ("True", "PlanApproved")
                       and getattr(record_in(condition_message(o, "Approved")), "state", "") == USED)
    assert await mode_of(env, "a") == "safe"


async def test_approve_refuses_a_kustomization_without_manual_approval(env: ControllerEnv) -> None:
    artifact = await env.publish(files("safe", "a"))
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=artifact["revision"])
    code, _, err = await run_approve(env, "--yes")
    assert code == 2 and "does not wait for approvals" in err
