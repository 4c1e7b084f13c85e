"""An approval survives a crash of the controller exactly once (issue 38; ``reconcile/gate/approval.py``).

The controller runs as its own user; the embedded server's client faults (``clientfaults.py``) kill it right
after one chosen write, counting only the writes of one resource: a SIGKILLed process, nothing it sends
afterwards reaches the API. The test looks at the state the dead controller left, then starts another
(a restarted pod) and counts the writes to the objects in the server's request log.

- Killed right after the approved apply wrote its object, before the status write: the restarted controller
  applies nothing again, and records the approval as used (a hand edit with the same plan id then waits).
- Killed right after the ``applying`` record, before any object write: the restarted controller applies the
  approved plan, once, without a new approval.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION
from kustomize_controller.approve_command import approve_plan
from kustomize_controller.reconcile.gate.approval import approval_key, record_in
from kustomize_controller.runtime.clock import RealClock
from tests.integration.controller.conftest import ControllerEnv, Instance, condition, condition_message
from tests.integration.controller.test_approval_once import hand_edit, mode_of, tree, used_up, waiting_plan

pytestmark = pytest.mark.integration

#: what the controller writes besides the objects (and Leases, Events: the clock's)
NOT_OBJECTS = frozenset({"leases", "events", "kustomizations"})
NOT_STATUS = frozenset({"leases", "events", "configmaps"})


class Crashing:
    """The controller ``ctl-1`` (its writes counted from the start), killed at an armed write; ``restart()``
    starts ``ctl-2``."""

    def __init__(self, env: ControllerEnv, directory: Path) -> None:
        self.env = env
        self.directory = directory
        self.first = env.instance("ctl-1", directory)
        self.crashed = asyncio.Event()
        env.server.client_faults.watch("ctl-1")  # its connections tracked from the start: a crash cuts them
        self.first.start()
        self.second: Instance | None = None

    def arm(self, *, counting_only_not: frozenset[str]) -> None:
        """Kill ``ctl-1`` right after its next write to a resource outside ``counting_only_not``."""
        faults = self.env.server.client_faults
        faults.crash_after("ctl-1", writes=faults.stats("ctl-1").writes + 1, on_crash=self._crash,
                           ignore=counting_only_not)

    def _crash(self) -> None:
        assert self.first.task is not None
        self.first.task.cancel()
        self.crashed.set()

    async def restart(self) -> None:
        self.second = self.env.instance("ctl-2", self.directory)
        self.second.start()

    async def stop(self) -> None:
        for instance in (self.first, self.second):
            if instance is not None:
                await instance.kill()


def object_writes(env: ControllerEnv, name: str = "a") -> list[str]:
    """The users of every successful write (not a dry-run) to ConfigMap ``name``, in order."""
    return [r.user for r in env.server.requests.select(writes_only=True, successful_only=True, resource="configmaps",
                                                       namespace=env.namespace, name=name)]


async def approved_revision_2(env: ControllerEnv, tmp_path: Path) -> tuple[Crashing, dict[str, Any], str]:
    """``approval: manual``, revision 1 approved and applied by ``ctl-1``; revision 2 published and waiting.
    Returns the controller, revision 2's artifact and its plan id."""
    crashing = Crashing(env, tmp_path)
    first = await env.publish(tree(a="one"))
    ks = env.kustomization(targetNamespace=env.namespace)
    ks["metadata"]["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    await env.create(ks)
    await approve_plan(env.client, namespace=env.namespace, name="app", clock=RealClock(),
                       plan_id=await waiting_plan(env, first["revision"]))
    await env.wait_ready(revision=first["revision"])
    second = await env.publish(tree(a="two"))
    return crashing, second, await waiting_plan(env, second["revision"])


async def test_a_crash_between_the_approved_apply_and_the_status_write_applies_nothing_twice(
    env: ControllerEnv, tmp_path: Path
) -> None:
    crashing, second, plan_id = await approved_revision_2(env, tmp_path)
    try:
        crashing.arm(counting_only_not=NOT_OBJECTS)  # right after the approved apply's write of ConfigMap a
        token = await approve_plan(env.client, namespace=env.namespace, name="app", plan_id=plan_id, clock=RealClock())
        key = approval_key(plan_id, token)
        await asyncio.wait_for(crashing.crashed.wait(), 60)

        # what the dead controller left: the object written, the status still "applying"
        assert await mode_of(env) == "two"
        left = await env.get_ks()
        assert left["status"]["lastAppliedRevision"] != second["revision"]
        record = record_in(condition_message(left, "Approved"))
        assert record is not None and (record.key, record.plan, record.state) == (key, plan_id, "applying")
        assert object_writes(env) == ["ctl-1", "ctl-1"]  # revision 1's create, revision 2's apply

        await crashing.restart()
        obj = await env.wait_ready(revision=second["revision"])
        assert object_writes(env) == ["ctl-1", "ctl-1"]  # nothing applied twice
        assert condition(obj, "Approved") == ("True", "NoChanges")
        record = record_in(condition_message(obj, "Approved"))
        assert record is not None and (record.key, record.plan, record.state) == (key, plan_id, "used")

        # and used up: a hand edit (a plan with the same id) waits
        await hand_edit(env, "hotfix")
        obj = await env.wait_handled(await env.request_reconcile())
        assert used_up(obj, plan_id), condition_message(obj, "Approved")
        assert await mode_of(env) == "hotfix"
        assert [user for user in object_writes(env) if user.startswith("ctl-")] == ["ctl-1", "ctl-1"]
    finally:
        await crashing.stop()


async def test_a_crash_after_the_approval_record_before_any_write_applies_the_plan_once(
    env: ControllerEnv, tmp_path: Path
) -> None:
    crashing, second, plan_id = await approved_revision_2(env, tmp_path)
    try:
        crashing.arm(counting_only_not=NOT_STATUS)  # right after the next status write: the "applying" record
        token = await approve_plan(env.client, namespace=env.namespace, name="app", plan_id=plan_id, clock=RealClock())
        key = approval_key(plan_id, token)
        await asyncio.wait_for(crashing.crashed.wait(), 60)

        left = await env.get_ks()
        record = record_in(condition_message(left, "Approved"))
        assert record is not None and (record.key, record.plan, record.state) == (key, plan_id, "applying")
        assert await mode_of(env) == "one" and object_writes(env) == ["ctl-1"]  # nothing of the plan written

        await crashing.restart()
        obj = await env.wait_ready(revision=second["revision"])
        assert await mode_of(env) == "two"
        assert object_writes(env) == ["ctl-1", "ctl-2"]  # applied once, by the restarted controller
        assert condition(obj, "Approved") == ("True", "PlanApproved")
        record = record_in(condition_message(obj, "Approved"))
        assert record is not None and (record.key, record.plan, record.state) == (key, plan_id, "used")
    finally:
        await crashing.stop()
