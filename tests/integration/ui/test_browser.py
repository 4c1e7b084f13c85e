"""The UI in a real browser (issue 37): a Kustomization becomes Ready on an open fleet page without a reload,
its page shows inventory and events, a pending plan is approved and applied, suspend and resume, a dependency
found in the graph, and a user whose RBAC forbids patching sees the refusal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kustomize_controller.api.changes import APPROVAL_ANNOTATION
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.ui.server import UiServer
from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap, kustomization
from tests.integration.ui.conftest import UiFactory

pytestmark = [pytest.mark.integration, pytest.mark.browser]


def files(mode: str, *names: str) -> dict[str, str]:
    objects = {f"{n}.yaml": configmap(n, {"mode": mode}) for n in names}
    return {"kustomization.yaml": kustomization(*objects), **objects}


async def until(page: Any, expression: str, *, within: float = 60.0) -> None:
    """Poll ``expression`` in the page (``wait_for_function`` would evaluate a string, which the page's CSP
    forbids; ``evaluate`` goes through the DevTools protocol)."""
    for _ in range(int(within * 10)):
        if await page.evaluate(expression):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never true in the page: {expression}")


def row(env: ControllerEnv, name: str = "app", state: str | None = None) -> str:
    selector = f'tr[data-key="{env.namespace}/{name}"]'
    return selector + (f'[data-state="{state}"]' if state else "")


async def test_the_fleet_page_sees_a_kustomization_become_ready_live(env: ControllerEnv, ui: UiServer,
                                                                      browser: Any) -> None:
    ns = env.namespace
    artifact = await env.publish(files("one", "a", "b"))
    await browser.goto(ui.url + "/")
    await browser.wait_for_selector("body[data-rendered=true]")
    await browser.evaluate("window.__sameDocument = true")
    await env.create(env.kustomization(targetNamespace=ns))
    await browser.wait_for_selector(row(env), state="attached")  # created: a row appears without a reload
    await env.start()
    await browser.wait_for_selector(row(env, state="ready"))
    assert await browser.evaluate("window.__sameDocument") is True  # no reload: the stream brought it
    text = await browser.inner_text(row(env))
    assert artifact["revision"][:20] in text and f"GitRepository/{ns}/repo" in text
    assert "1 ready" in await browser.inner_text("#counts")

    # open it: inventory (namespace → kind → object, each with its health) and events
    await browser.click(f'{row(env)} a')
    await browser.wait_for_selector("#inventory[data-loaded=true]")
    inventory = await browser.inner_text("#inventory")
    assert ns in inventory and "ConfigMap (2)" in inventory and "Current" in inventory
    assert "ReconciliationSucceeded" in await browser.inner_text("#sec-events")
    assert "Applied revision" in await browser.inner_text("#sec-conditions")
    assert artifact["revision"] in await browser.inner_text("#sec-source")
    await browser.click('#inventory a:text-is("a")')
    assert "mode: one" in await browser.inner_text("#yaml")


async def test_a_pending_plan_is_approved_and_applied(env: ControllerEnv, ui: UiServer, browser: Any) -> None:
    ns = env.namespace
    first = await env.publish(files("safe", "a"))
    await env.start()
    ks = env.kustomization(targetNamespace=ns)
    ks["metadata"]["annotations"] = {APPROVAL_ANNOTATION: "manual"}
    await env.create(ks)
    waiting = await env.wait_for("app", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired"))
    await env.client.patch("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "app", ns, {"metadata": {
        "annotations": {"kustomize.toolkit.fluxcd.io/approved-plan": plan_id_in(
            condition_message(waiting, "Approved"))}}}, patch_type="merge")
    await env.wait_ready(revision=first["revision"])

    second = await env.publish(files("fast", "a"))
    held = await env.wait_for("app", lambda o: condition(o, "Approved") == ("False", "ApprovalRequired")
                              and second["revision"] in condition_message(o, "Approved"))
    pending = plan_id_in(condition_message(held, "Approved"))
    await browser.goto(f"{ui.url}/")
    await browser.wait_for_selector(row(env, state="waiting for approval"))
    await browser.goto(f"{ui.url}/ks/{ns}/app/plan")
    assert await browser.get_attribute("#plan-id", "data-plan") == pending  # exactly what the controller holds
    change = await browser.inner_text("section.change")
    assert f"ConfigMap/{ns}/a configured" in change and "mode: safe" in change and "mode: fast" in change
    assert await browser.locator("table.diff tr.changed").count() >= 1  # side by side
    await browser.click("#approve")
    await browser.wait_for_url(f"{ui.url}/ks/{ns}/app")
    await browser.wait_for_selector(f'#applied[title="{second["revision"]}"]')  # applied, seen live
    assert (await env.get("v1", "ConfigMap", "a"))["data"]["mode"] == "fast"


async def test_suspend_and_resume_from_the_page(env: ControllerEnv, ui: UiServer, browser: Any) -> None:
    artifact = await env.publish(files("one", "a"))
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=artifact["revision"])
    await browser.goto(f"{ui.url}/ks/{env.namespace}/app")
    await browser.click("#suspend")
    await browser.wait_for_selector("#state:text-is('suspended')")
    assert (await env.get_ks())["spec"]["suspend"] is True
    await browser.click("#resume")
    await browser.wait_for_selector("#state:text-is('ready')")
    assert (await env.get_ks())["spec"]["suspend"] is False
    await browser.click("#reconcile")
    await browser.wait_for_selector("#flash.ok")
    token = (await env.get_ks())["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"]
    await env.wait_handled(token)


async def test_a_dependency_is_found_in_the_graph(env: ControllerEnv, ui: UiServer, browser: Any) -> None:
    await env.publish(files("one", "a"))
    await env.create(env.kustomization("db", targetNamespace=env.namespace))
    await env.create(env.kustomization("api", targetNamespace=env.namespace, dependsOn=[{"name": "db"}]))
    await browser.goto(f"{ui.url}/graph")
    await browser.wait_for_selector("body[data-graph=drawn]")
    edge = await browser.evaluate(f"window.kcGraph.getElementById('{env.namespace}/db->{env.namespace}/api').length")
    assert edge == 1
    # nothing reconciled yet: api waits for db, and is drawn blocked
    assert await browser.evaluate(f"window.kcGraph.getElementById('{env.namespace}/api').data('blocked')") is True
    await browser.fill("#find", "api")
    assert await browser.get_attribute("#cy", "data-found") == "1"
    position = await browser.evaluate(f"window.kcGraph.getElementById('{env.namespace}/api').renderedPosition()")
    box = await browser.locator("#cy").bounding_box()
    await browser.mouse.click(box["x"] + position["x"], box["y"] + position["y"])
    await browser.wait_for_url(f"{ui.url}/ks/{env.namespace}/api")
    await env.start()  # live: db becomes ready, api is no longer blocked
    await browser.goto(f"{ui.url}/graph")
    await until(browser, f"window.kcGraph && window.kcGraph.getElementById('{env.namespace}/db').data('state')"
                "=== 'ready'")


async def test_a_user_without_patch_rights_sees_the_refusal(env: ControllerEnv, ui_as: UiFactory,
                                                             browser: Any) -> None:
    artifact = await env.publish(files("one", "a"))
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=artifact["revision"])
    reader = await ui_as("reader", [
        {"apiGroups": ["kustomize.toolkit.fluxcd.io"], "resources": ["kustomizations"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events", "configmaps"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["source.toolkit.fluxcd.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
    ])
    browser.allowed_errors.append("status of 403")  # the refused POST, as the browser logs it
    await browser.goto(f"{reader.url}/ks/{env.namespace}/app")
    await browser.wait_for_selector("#state:text-is('ready')")
    await browser.click("#suspend")
    flash = await (await browser.wait_for_selector("#flash.error")).inner_text()
    assert "refused by the cluster's RBAC" in flash and 'User "reader" cannot patch resource "kustomizations"' in flash
    assert (await env.get_ks())["spec"].get("suspend") is not True
    await browser.click("#reconcile")
    await browser.wait_for_selector("#flash.error:has-text('cannot patch')")
