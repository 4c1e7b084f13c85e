"""``spec.dependsOn`` (upstream ``kustomization_dependson_test.go``): a dependent waits, polling every
``--requeue-dependency``, until each dependency is Ready for its current generation and — when both use
the same source — has applied the same revision. Every test runs with dependents woken by their
dependencies (``EnableDependencyQueueing``, our default) and with polling only (upstream)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True, params=[True, False], ids=["queueing", "polling"])
def queueing(request: pytest.FixtureRequest, env: ControllerEnv) -> bool:
    env.set_gates(EnableDependencyQueueing=request.param)
    return bool(request.param)


def not_ready(obj: dict) -> bool:  # type: ignore[type-arg]
    return condition(obj, "Ready") == ("False", "DependencyNotReady")


async def test_chain_converges_in_dependency_order(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"first/cm.yaml": configmap("first"), "second/cm.yaml": configmap("second"),
                                  "third/cm.yaml": configmap("third")})
    await env.start()
    # the last of the chain first, and its dependency missing altogether for now
    await env.create(env.kustomization("third", path="./third", targetNamespace=ns,
                                       dependsOn=[{"name": "second"}]))
    obj = await env.wait_for("third", not_ready)
    assert condition_message(obj, "Ready") == (
        f"dependency '{ns}/second' not found: kustomizations.kustomize.toolkit.fluxcd.io \"second\" not found")
    assert condition(obj, "Reconciling") is None  # failed before the reconcile proper started
    assert not await env.exists("v1", "ConfigMap", "third")
    event = await env.wait_event(lambda e: e.get("reason") == "DependencyNotReady", name="third")
    assert event["type"] == "Normal"
    assert event["message"] == "Dependencies do not meet ready condition, retrying in 1s"

    await env.create(env.kustomization("second", path="./second", targetNamespace=ns,
                                       dependsOn=[{"name": "first", "namespace": ns}], suspend=True))
    obj = await env.wait_for("third", lambda o: not_ready(o) and "is not ready" in condition_message(o, "Ready"))
    assert condition_message(obj, "Ready") == f"dependency '{ns}/second' is not ready"

    await env.patch_spec({"suspend": False}, name="second")
    obj = await env.wait_for("second", not_ready)
    assert condition_message(obj, "Ready").startswith(f"dependency '{ns}/first' not found")

    await env.create(env.kustomization("first", path="./first", targetNamespace=ns))
    for name in ("first", "second", "third"):
        await env.wait_ready(name, revision=artifact["revision"])
    assert await env.exists("v1", "ConfigMap", "third")


async def test_same_source_dependency_must_have_applied_the_revision(env: ControllerEnv) -> None:
    ns = env.namespace
    first = await env.publish({"base/cm.yaml": configmap("base", {"v": "1"}), "app/cm.yaml": configmap("app")})
    await env.start()
    await env.create(env.kustomization("base", path="./base", targetNamespace=ns))
    await env.create(env.kustomization("app", path="./app", targetNamespace=ns, dependsOn=[{"name": "base"}]))
    await env.wait_ready("app", revision=first["revision"])

    # "base" stops following the source: still Ready, but on the old revision
    await env.patch_spec({"suspend": True}, name="base")
    await env.wait_for("base", lambda o: o["status"].get("observedGeneration") == 2)
    second = await env.publish({"base/cm.yaml": configmap("base", {"v": "2"}), "app/cm.yaml": configmap("app")})
    obj = await env.wait_for("app", not_ready)
    assert condition_message(obj, "Ready") == f"dependency '{ns}/base' revision is not up to date"
    assert obj["status"]["lastAppliedRevision"] == first["revision"]

    await env.patch_spec({"suspend": False}, name="base")
    await env.wait_ready("base", revision=second["revision"])
    await env.wait_ready("app", revision=second["revision"])


async def test_ready_expr_replaces_the_builtin_check(env: ControllerEnv) -> None:
    ns = env.namespace
    artifact = await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization("dep", targetNamespace=ns, path="./none-yet", suspend=True))
    expr = "has(dep.metadata.labels) && 'ready' in dep.metadata.labels && dep.metadata.labels['ready'] == 'yes'"
    await env.create(env.kustomization("app", targetNamespace=ns, dependsOn=[{"name": "dep", "readyExpr": expr}]))
    obj = await env.wait_for("app", not_ready)
    assert condition_message(obj, "Ready") == f"dependency '{ns}/dep' is not ready according to readyExpr eval"
    await env.client.patch("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "dep", ns,
                           {"metadata": {"labels": {"ready": "yes"}}}, patch_type="merge")
    await env.wait_ready("app", revision=artifact["revision"])


async def test_invalid_ready_expr_is_terminal(env: ControllerEnv) -> None:
    await env.publish({"cm.yaml": configmap("a")})
    await env.start()
    await env.create(env.kustomization("dep", targetNamespace=env.namespace, suspend=True))
    await env.create(env.kustomization("app", targetNamespace=env.namespace,
                                       dependsOn=[{"name": "dep", "readyExpr": "dep.metadata.name =="}]))
    obj = await env.wait_for("app", lambda o: condition(o, "Stalled") == ("True", "InvalidCELExpression"))
    assert condition(obj, "Ready") == ("False", "InvalidCELExpression")
    assert condition_message(obj, "Ready").startswith(
        "Reconciliation failed terminally due to configuration error: terminal error: "
        "failed to evaluate dependency dep: ")
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]


# with polling only the chain would take three --requeue-dependency intervals: the gate on, only
@pytest.mark.parametrize("queueing", [True], ids=["queueing"], indirect=True)
async def test_a_chain_is_woken_by_its_dependencies_not_the_poll(env: ControllerEnv, queueing: bool) -> None:
    assert queueing
    ns = env.namespace
    chain = ["c1", "c2", "c3", "c4"]
    artifact = await env.publish({f"{name}/cm.yaml": configmap(name) for name in chain})
    await env.start(requeue_dependency=timedelta(minutes=10))  # only a wake-up can finish within the test
    # dependents first: each finds its dependency missing or not ready and would poll in 10 minutes
    for name, dep in reversed(list(zip(chain[1:], chain, strict=False))):
        await env.create(env.kustomization(name, targetNamespace=ns, path=f"./{name}", dependsOn=[{"name": dep}]))
        await env.wait_for(name, not_ready)
    await env.create(env.kustomization("c1", targetNamespace=ns, path="./c1"))
    for name in chain:
        await env.wait_ready(name, revision=artifact["revision"], within=60)

