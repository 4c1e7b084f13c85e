"""No object lost after a failed write (issue 38), and a prune that finds an object already gone says so.

- The write of one object is answered by a dropped connection after the server stored it: the apply fails,
  the inventory written with the failure keeps the object (the server may have stored it — here it did),
  and a revision without it prunes it. (A 5xx after the commit: ``test_prune.py``.)
- A write refused with a 4xx (the server certainly stored nothing) is not in that inventory, although the
  inventory recorded before the apply listed it.
- An object of the inventory deleted behind the controller's back is reported ``deleted`` by prune, as
  upstream reports it, and logged ``already gone``.
"""

from __future__ import annotations

import json

import pytest

from kustomize_controller.reconcile.unreachable import QuickRetries
from tests.integration.controller.conftest import ControllerEnv, condition
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def ids(obj: dict[str, object], ns: str) -> list[str]:
    entries = ((obj.get("status") or {}).get("inventory") or {}).get("entries") or []  # type: ignore[union-attr]
    return [str(e["id"]).removeprefix(f"{ns}_") for e in entries]


def failed(obj: dict[str, object]) -> bool:
    return condition(obj, "Ready") == ("False", "ReconciliationFailed") or condition(
        obj, "Reconciling") == ("True", "ProgressingWithRetry")


async def test_an_object_whose_connection_dropped_after_the_commit_is_kept_and_pruned_later(
    env: ControllerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = env.namespace
    # a lost connection is retried within a second (reconcile/unreachable.py), and that retry would find "b"
    # unchanged and record it anyway: held off, so that the next reconcile is the new revision's
    monkeypatch.setattr(QuickRetries, "next_delay", lambda self, key: 3600.0)
    rule = env.server.faults.fail(method="PATCH", path=rf"/namespaces/{ns}/configmaps/b$", dry_run=False,
                                  after_store=True, drop=True)
    await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b"), "c.yaml": configmap("c")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    obj = await env.wait_for("app", failed)
    await env.stop()
    assert rule.hits == 1
    message = next(c["message"] for c in obj["status"]["conditions"] if c["type"] in ("Reconciling", "Ready")
                   and c["reason"] in ("ProgressingWithRetry", "ReconciliationFailed"))
    assert f"ConfigMap/{ns}/b apply failed: " in message and "Server disconnected" in message, message
    assert await env.exists("v1", "ConfigMap", "b")  # stored all the same
    assert not await env.exists("v1", "ConfigMap", "c")  # never attempted
    assert ids(obj, ns) == ["a__ConfigMap", "b__ConfigMap"]

    second = await env.publish({"a.yaml": configmap("a")})
    await env.start()
    obj = await env.wait_ready(revision=second["revision"])
    assert ids(obj, ns) == ["a__ConfigMap"]
    assert not await env.exists("v1", "ConfigMap", "b")  # pruned, not orphaned


async def test_an_object_refused_with_a_4xx_is_not_in_the_inventory(env: ControllerEnv) -> None:
    ns = env.namespace
    # its dry-run passes (a webhook that skips dry-runs, a quota): only the real write is refused
    env.server.faults.fail(method="PATCH", path=rf"/namespaces/{ns}/configmaps/b$", dry_run=False, status=403,
                           count=None, message='admission webhook "deny.example.com" denied the request: no')
    await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start()
    await env.create(env.kustomization(targetNamespace=ns))
    obj = await env.wait_for("app", lambda o: condition(o, "Ready") == ("False", "ReconciliationFailed"))
    assert f"ConfigMap/{ns}/b apply failed: " in next(
        c["message"] for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert not await env.exists("v1", "ConfigMap", "b")
    assert ids(obj, ns) == ["a__ConfigMap"]  # the inventory recorded before the apply listed b too


async def test_a_prune_of_an_object_deleted_behind_our_back_logs_already_gone(
    env: ControllerEnv, capfd: pytest.CaptureFixture[str]
) -> None:
    ns = env.namespace
    first = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
    await env.start(log_level="info")
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=first["revision"])
    await env.client.delete("v1", "ConfigMap", "b", ns)  # by hand

    second = await env.publish({"a.yaml": configmap("a")})
    obj = await env.wait_ready(revision=second["revision"])
    assert ids(obj, ns) == ["a__ConfigMap"]
    # as upstream: the event lists it deleted
    await env.wait_event(lambda e: e.get("message") == f"ConfigMap/{ns}/b deleted")
    await env.stop()
    captured = capfd.readouterr()
    lines = [json.loads(line) for line in (captured.out + captured.err).splitlines() if line.startswith("{")]
    gone = [line for line in lines if line.get("msg") == "already gone"]
    assert [(line["object"], line["namespace"], line["name"]) for line in gone] == [(f"ConfigMap/{ns}/b", ns, "app")]
    assert not any(line.get("msg") == "already gone" and "/a" in line["object"] for line in lines)
