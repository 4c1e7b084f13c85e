"""The web UI against the embedded API server (or TEST_KUBECONFIG) with the real controller running, driven in
headless Chromium — Debian's ``chromium`` at /usr/bin/chromium, never a browser downloaded by a test tool.

``ui``: ``kustomize-controller ui``'s server for the test's namespace, as the cluster's admin user;
``ui_as(user, rules)`` another one as a user whose only rights are ``rules`` (a Role in the test namespace;
needs the embedded server with RBAC switched on). ``browser``: a page in a fresh profile; every console error
and every content-security-policy violation of the test fails it at teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.ui.command import preview_defaults, ui_server
from kustomize_controller.ui.server import UiOptions, UiServer
from tests.integration.controller.conftest import ControllerEnv, env  # noqa: F401  (the fixture)

CHROMIUM = os.environ.get("UI_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: collects content-security-policy violations in the page (injected through the DevTools protocol, which
#: the page's own policy does not govern)
WATCH_CSP = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


def require_chromium() -> None:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run installs it)")


async def synced(server: UiServer) -> UiServer:
    """``server`` once its Kustomizations informer has listed (a page before that shows an empty fleet)."""
    for _ in range(300):
        if server.cache.synced():
            return server
        await asyncio.sleep(0.1)
    raise AssertionError(f"the UI's informers did not sync: {server.cache.errors()}")


@pytest.fixture
async def ui(env: ControllerEnv) -> AsyncIterator[UiServer]:  # noqa: F811
    async with ui_server(client=env.client, options=UiOptions(port=0, namespace=env.namespace, batch=0.1),
                         flags=preview_defaults(), err=sys.stderr) as server:
        yield await synced(server)


UiFactory = Callable[[str, list[dict[str, Any]]], Awaitable[UiServer]]


@pytest.fixture
async def ui_as(env: ControllerEnv, tmp_path: Path) -> AsyncIterator[UiFactory]:  # noqa: F811
    """A UI acting as a user with only ``rules`` in the test namespace (the embedded server's RBAC)."""
    server = env.server
    started: list[tuple[UiServer, KubeClient, Any]] = []

    async def make(user: str, rules: list[dict[str, Any]]) -> UiServer:
        server.options.rbac = True  # the admin (system:masters) and the controller keep every right
        ns = env.namespace
        await env.client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                 "metadata": {"name": user, "namespace": ns}, "rules": rules})
        await env.client.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                 "metadata": {"name": user, "namespace": ns},
                                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
                                 "subjects": [{"kind": "User", "name": user}]})
        path = tmp_path / f"{user}.kubeconfig"
        path.write_text(json.dumps(server.kubeconfig(token=server.add_user(user), user=user)))
        client = KubeClient(config=await load_kubeconfig(str(path)))
        context = ui_server(client=client, options=UiOptions(port=0, namespace=ns, batch=0.1),
                            flags=preview_defaults(), err=sys.stderr)
        ui_server_ = await context.__aenter__()
        started.append((ui_server_, client, context))
        return await synced(ui_server_)

    yield make
    for _, client, context in reversed(started):
        await context.__aexit__(None, None, None)
        await client.close()
    server.options.rbac = False


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Any]:
    """A page in a fresh Chromium profile (module docstring); console errors and CSP violations fail the test."""
    require_chromium()
    from playwright.async_api import async_playwright

    problems: list[str] = []
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1280, "height": 900})
        try:
            await context.add_init_script(WATCH_CSP)
            page = context.pages[0] if context.pages else await context.new_page()
            page.set_default_timeout(30_000)
            page.allowed_errors = []  # type: ignore[attr-defined]  # substrings a test expects (an RBAC 403)
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            yield page
            if not page.is_closed():
                violations = await page.evaluate("window.__cspViolations || []")
                problems += [f"CSP violation: {v}" for v in violations]
        finally:
            await context.close()
    allowed = getattr(page, "allowed_errors", [])
    problems = [p for p in problems if not any(a in p for a in allowed)]
    assert not problems, "\n".join(problems)
