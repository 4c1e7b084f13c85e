"""An approval allows one change, once (issue 38; docs/change-management.md "An approval is used once").

The approval is the pair ``approved-plan``/``approved-at``; the apply it allowed uses it up, and the status
(the ``Approved`` condition) records that. A later plan with the same id — a drift correction towards the
same desired state, a revert to earlier content — waits for a new approval, which ``approve_plan`` (what
``kustomize-controller approve`` and the web UI call) gives with a new ``approved-at``.

Each plan here is built so that the plan that must wait has *the same id* as the approval still in the
annotations (one ConfigMap, one field): an approval that stood as a permission would let it through.
"""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION, APPROVED_PLAN_ANNOTATION
from kustomize_controller.approve_command import approve_plan
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.runtime.clock import RealClock
from tests.integration.controller.conftest import KS_API, ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap, kustomization

pytestmark = pytest.mark.integration


def tree(**modes: str) -> dict[str, str]:
    objects = {f"{name}.yaml": configmap(name, {"mode": mode}) for name, mode in modes.items()}
    return {"kustomization.yaml": kustomization(*objects), **objects}


async def approve(env: ControllerEnv, plan_id: str) -> None:
    await approve_plan(env.client, namespace=env.namespace, name="app", plan_id=plan_id, clock=RealClock())


async def waiting_plan(env: ControllerEnv, revision: str) -> str:
    """The id of the plan the Kustomization holds for ``revision``."""
    obj = await env.wait_for("app", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired")
                             and revision in condition_message(o, "Approved"))
    return plan_id_in(condition_message(obj, "Approved"))


async def approved_and_applied(env: ControllerEnv, files: dict[str, str], *, revision: str | None = None
                               ) -> tuple[dict[str, Any], str]:
    """Publish ``files``, approve the plan that waits with ``approve_plan`` and wait until it is applied."""
    artifact = await env.publish(files, revision=revision)
    plan_id = await waiting_plan(env, artifact["revision"])
    await approve(env, plan_id)
    obj = await env.wait_ready(revision=artifact["revision"])
    assert condition(obj, "Approved") == ("True", "PlanApproved")
    return artifact, plan_id


async def manual(env: ControllerEnv, files: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A Kustomization with ``approval: manual`` whose first revision was approved and applied."""
    await env.start()
    ks = env.kustomization(targetNamespace=env.namespace, **spec)
    ks["metadata"]["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    artifact = await env.publish(files)
    await env.create(ks)
    plan_id = await waiting_plan(env, artifact["revision"])
    await approve(env, plan_id)
    await env.wait_ready(revision=artifact["revision"])
    return artifact


async def mode_of(env: ControllerEnv, name: str = "a") -> str:
    return str((await env.get("v1", "ConfigMap", name))["data"]["mode"])


async def hand_edit(env: ControllerEnv, mode: str, name: str = "a") -> None:
    await env.client.patch("v1", "ConfigMap", name, env.namespace, {"data": {"mode": mode}}, patch_type="merge",
                           field_manager="kubectl-edit")


def used_up(obj: dict[str, Any], plan_id: str) -> bool:
    message = condition_message(obj, "Approved")
    return (condition(obj, "Approved") == ("False", "ApprovalRequired") and plan_id_in(message) == plan_id
            and f"the approval of plan {plan_id} was already used" in message)


async def test_a_hand_edit_after_an_approved_apply_waits_for_a_new_approval(env: ControllerEnv) -> None:
    """The issue's scenario: revision 2 approved and applied; a hand edit of its ConfigMap and a requestedAt
    must not revert the edit on the strength of revision 2's approval; approving again does."""
    ns = env.namespace
    await manual(env, tree(a="one", b="one"))
    second, approved = await approved_and_applied(env, tree(a="two", b="one"))
    assert await mode_of(env) == "two"

    await hand_edit(env, "hotfix")
    obj = await env.wait_handled(await env.request_reconcile())
    assert await mode_of(env) == "hotfix"  # not reverted
    assert used_up(obj, approved), condition_message(obj, "Approved")  # the same id: a standing approval applied it
    message = condition_message(obj, "Approved")
    assert f"kustomize-controller approve app -n {ns}" in message and "approved-at" in message
    assert obj["status"]["lastAppliedRevision"] == second["revision"]
    assert condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
    events = [e["message"] for e in await env.events() if e.get("reason") == "ApprovalRequired"]
    assert any("was already used" in m for m in events), events

    await approve(env, approved)  # the same plan id, a new approval
    await env.wait_for("app", lambda o: condition(o, "Approved") == ("True", "PlanApproved")
                       and "applied" in condition_message(o, "Approved"))
    assert await mode_of(env) == "two"
    # and used up again: the next hand edit waits too
    await hand_edit(env, "hotfix-2")
    obj = await env.wait_handled(await env.request_reconcile())
    assert used_up(obj, approved) and await mode_of(env) == "hotfix-2"


async def test_a_revert_to_earlier_content_waits(env: ControllerEnv) -> None:
    """Revision 3 applied with its own approval, then the source goes back to revision 2's exact revision and
    content: its plan has revision 2's plan id, and waits."""
    await manual(env, tree(a="one"))
    second, plan_2 = await approved_and_applied(env, tree(a="two"))
    third, plan_3 = await approved_and_applied(env, tree(a="three"))
    assert plan_3 != plan_2

    await env.publish(tree(a="two"), revision=second["revision"])
    assert await waiting_plan(env, second["revision"]) == plan_2
    obj = await env.wait_handled(await env.request_reconcile())
    assert await mode_of(env) == "three" and obj["status"]["lastAppliedRevision"] == third["revision"]


async def test_a_revert_after_approvals_were_switched_off_and_on_waits(env: ControllerEnv) -> None:
    """An approval left in the annotations while ``approval`` was ``auto`` counts as used when ``manual``
    comes back: revision 2 approved, revision 3 applied without approvals, then the source back at revision 2
    (the plan has the id the annotation still names) waits."""
    await manual(env, tree(a="one"))
    second, plan_2 = await approved_and_applied(env, tree(a="two"))
    await env.client.patch(KS_API, "Kustomization", "app", env.namespace,
                           {"metadata": {"annotations": {APPROVAL_ANNOTATION: "auto"}}}, patch_type="merge")
    await env.wait_for("app", lambda o: condition(o, "Approved") is None)
    third = await env.publish(tree(a="three"))
    await env.wait_ready(revision=third["revision"])
    await env.client.patch(KS_API, "Kustomization", "app", env.namespace,
                           {"metadata": {"annotations": {APPROVAL_ANNOTATION: "manual"}}}, patch_type="merge")
    await env.wait_for("app", lambda o: condition(o, "Approved") == ("True", "NoChanges"))

    await env.publish(tree(a="two"), revision=second["revision"])
    obj = await env.wait_for("app", lambda o: used_up(o, plan_2))
    assert (await env.get_ks())["metadata"]["annotations"][APPROVED_PLAN_ANNOTATION] == plan_2
    assert await mode_of(env) == "three" and obj["status"]["lastAppliedRevision"] == third["revision"]


async def test_drift_right_after_an_approved_apply_waits(env: ControllerEnv) -> None:
    """A hand edit made just after the approved apply, found by the next periodic reconcile (no request)."""
    await manual(env, tree(a="one"), interval="2s")
    _, approved = await approved_and_applied(env, tree(a="two"))
    await hand_edit(env, "hotfix")
    await env.wait_for("app", lambda o: used_up(o, approved))
    assert await mode_of(env) == "hotfix"


async def test_a_failed_apply_that_wrote_nothing_keeps_the_approval_for_its_retry(env: ControllerEnv) -> None:
    """The first write of the approved plan is refused (a webhook that skips dry-runs): nothing was written,
    so the retry applies the plan with the same approval."""
    ns = env.namespace
    await manual(env, tree(a="one", b="one"), retryInterval="2s")
    refused = env.server.faults.fail(method="PATCH", path=rf"/namespaces/{ns}/configmaps/a$", dry_run=False,
                                     status=403, count=1, message="denied for now")
    second = await env.publish(tree(a="two", b="two"))
    await approve(env, await waiting_plan(env, second["revision"]))
    obj = await env.wait_ready(revision=second["revision"])
    assert refused.hits == 1
    assert (await mode_of(env, "a"), await mode_of(env, "b")) == ("two", "two")
    assert condition(obj, "Approved") == ("True", "PlanApproved") and condition_message(obj, "Approved").endswith(
        " used]")


async def test_a_failed_apply_that_wrote_something_uses_the_approval_up(env: ControllerEnv) -> None:
    """The second write of the approved plan is refused after the first was written: the approval is used,
    the rest of the plan waits for its own."""
    ns = env.namespace
    await manual(env, tree(a="one", b="one"), retryInterval="2s")
    refused = env.server.faults.fail(method="PATCH", path=rf"/namespaces/{ns}/configmaps/b$", dry_run=False,
                                     status=403, count=1, message="denied for now")
    second = await env.publish(tree(a="two", b="two"))
    approved = await waiting_plan(env, second["revision"])
    await approve(env, approved)
    obj = await env.wait_for("app", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired")
                             and f"the approval of plan {approved} was used" in condition_message(o, "Approved"))
    assert refused.hits == 1
    assert (await mode_of(env, "a"), await mode_of(env, "b")) == ("two", "one")
    rest = plan_id_in(condition_message(obj, "Approved"))
    assert rest != approved and "(1 configured)" in condition_message(obj, "Approved")
    await approve(env, rest)
    await env.wait_ready(revision=second["revision"])
    assert await mode_of(env, "b") == "two"
