#!/usr/bin/env python3
"""Take the screenshots of docs/ui.md: ``.venv/bin/python scripts/ui_screenshots.py [OUT_DIR]``.

Starts the embedded API server, the controller and the web UI in this process, publishes ``examples/`` and a
few more Kustomizations (one failing, dependents blocked behind it, one waiting for approval), then opens the
pages in Debian's headless chromium (/usr/bin/chromium) and writes ``ui-*.png`` into OUT_DIR (default
docs/images). A development tool: not part of make test.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

from playwright.async_api import async_playwright

from kustomize_controller.app import run_controller
from kustomize_controller.demo import _install_crds, _publish_variant
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.settings import Settings
from kustomize_controller.testing.apiserver import ApiServer
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source
from kustomize_controller.ui.command import preview_defaults, ui_server
from kustomize_controller.ui.server import UiOptions

ROOT = Path(__file__).resolve().parent.parent
KS = "kustomize.toolkit.fluxcd.io/v1"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def ks(name: str, namespace: str, path: str, *, depends: list[dict[str, str]] | None = None,
       annotations: dict[str, str] | None = None, wait: bool = False) -> dict[str, object]:
    return {"apiVersion": KS, "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {},
                         "labels": {"team": "web" if "web" in name else "platform"}},
            "spec": {"interval": "10m", "prune": True, "path": path, "wait": wait, "targetNamespace": "podinfo",
                     "sourceRef": {"kind": "GitRepository", "name": "examples", "namespace": "flux-system"},
                     **({"dependsOn": depends} if depends else {})}}


async def until(check, within: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(within * 10)):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("the demo fleet did not reach the state to photograph")


async def main(out: Path) -> None:
    examples = ROOT / "examples"
    async with ApiServer(simulate_workloads=True) as api, ArtifactServer() as artifacts, \
            KubeClient(config=await load_kubeconfig(api.kubeconfig_path), qps=-1, burst=-1) as client:
        await _install_crds(client)
        for ns in ("flux-system", "infra", "apps"):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        artifact = await artifacts.publish_dir(examples, name="flux-system/examples")
        await publish_source(client, namespace="flux-system", name="examples", artifact=artifact)
        await client.create(ks("podinfo", "flux-system", "./podinfo", wait=True))
        await client.create(ks("cache", "infra", "./podinfo"))
        await client.create(ks("database", "infra", "./no-such-dir"))
        await client.create(ks("api", "apps", "./podinfo", depends=[{"name": "database", "namespace": "infra"},
                                                                    {"name": "cache", "namespace": "infra"}]))
        await client.create(ks("web", "apps", "./podinfo", depends=[{"name": "api"}]))
        await client.create(ks("web-canary", "apps", "./podinfo", depends=[{"name": "cache", "namespace": "infra"}],
                               annotations={"kustomize.toolkit.fluxcd.io/approval": "manual"}))
        settings = Settings(kubeconfig=api.kubeconfig_path, metrics_addr="127.0.0.1:0", health_addr="127.0.0.1:0",
                            webhook_addr="0", log_level="error", runtime_namespace="flux-system")
        async with contextlib.AsyncExitStack() as stack, asyncio.TaskGroup() as tasks:
            controller = tasks.create_task(run_controller(settings, handle_signals=False))
            ui = await stack.enter_async_context(ui_server(client=client, options=UiOptions(port=0),
                                                           flags=preview_defaults(), err=sys.stderr))
            try:
                async def podinfo_ready() -> bool:
                    obj = await client.get(KS, "Kustomization", "podinfo", "flux-system")
                    return (obj.get("status") or {}).get("lastAppliedRevision") == artifact["revision"]
                await until(podinfo_ready)
                # a new revision: web-canary's plan waits for approval with a configured ConfigMap
                await _publish_variant(artifacts, client, examples, "flux-system/examples", "Hello from the UI")

                async def canary_waits() -> bool:
                    obj = await client.get(KS, "Kustomization", "web-canary", "apps")
                    conds = (obj.get("status") or {}).get("conditions") or []
                    return any(c["type"] == "Approved" and c["status"] == "False" for c in conds)
                await until(canary_waits)
                await asyncio.sleep(3)
                async with async_playwright() as playwright:
                    context = await playwright.chromium.launch_persistent_context(
                        tempfile.mkdtemp(), executable_path="/usr/bin/chromium", args=ARGS,
                        viewport={"width": 1280, "height": 820})
                    page = context.pages[0]
                    shots = [("fleet", "/"), ("graph", "/graph"), ("kustomization", "/ks/flux-system/podinfo"),
                             ("plan", "/ks/apps/web-canary/plan")]
                    for name, path in shots:
                        await page.goto(ui.url + path)
                        await page.wait_for_load_state("networkidle")
                        await asyncio.sleep(1.5)
                        await page.screenshot(path=str(out / f"ui-{name}.png"), full_page=name != "graph")
                        print(f"wrote {out / f'ui-{name}.png'}")
                    await context.close()
            finally:
                controller.cancel()


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    target.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
