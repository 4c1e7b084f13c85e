"""Issue 37: the web UI with 1,000 Kustomizations (scenario ``ui``, not in the default run).

``ui(cfg, n)`` starts the API server process, creates ``n`` Kustomizations in 10 namespaces (each depending
on the one before it in its namespace) with statuses written as the controller writes them (a mix of ready
and failing), then runs ``kustomize-controller ui`` as its own process and measures, in Debian's headless
chromium:

- ``ui.first_render_ms``: the fleet page's first render, from navigation start to the mark ``fleet-rendered``
  that fleet.js sets once the table is filtered and shown (Performance API), median of ``renders`` fresh
  page loads (``first_render_max_ms`` the slowest);
- ``ui.rss_before_mib`` / ``ui.rss_after_mib``: the UI process's resident memory before and after a burst of
  ``rounds`` × ``n`` status writes while a fleet page is open (flat: the hub keeps no history);
- ``ui.updates`` / ``ui.messages``: the status writes of the burst and the stream messages the open page
  received for them (batched every 250 ms); ``ui.last_seen_ms``: from the burst's last write to the page
  showing it.
No controller runs: the statuses are written directly, so the figures are the UI's alone.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.procs import _status_kib, bench_env
from bench.scenarios import Config, Metrics, cluster
from bench.workload import bounded, create_namespaces, install_crds

KS_API = "kustomize.toolkit.fluxcd.io/v1"
NAMESPACES = 10
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _status(i: int, round_: int) -> dict[str, Any]:
    failing = i % 10 == 3
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"observedGeneration": 1, "lastAppliedRevision": f"main@sha1:{round_:040x}",
            "conditions": [{"type": "Ready", "status": "False" if failing else "True",
                            "reason": "BuildFailed" if failing else "ReconciliationSucceeded",
                            "message": f"round {round_}: " + ("kustomize build failed" if failing else
                                                              f"Applied revision: main@sha1:{round_:040x}"),
                            "lastTransitionTime": now, "observedGeneration": 1}]}


async def ui(cfg: Config, n: int, *, renders: int = 5, rounds: int = 3, into: Metrics | None = None) -> Metrics:
    from playwright.async_api import async_playwright

    m: Metrics = into if into is not None else {}
    names = [(f"ui-{i % NAMESPACES}", f"app-{i:05d}") for i in range(n)]
    async with cluster(cfg, f"ui-{n}") as (api, client, _):
        await install_crds(client)
        await create_namespaces(client, *sorted({ns for ns, _ in names}))

        async def create(i: int) -> None:
            ns, name = names[i]
            depends = [{"name": names[i - NAMESPACES][1]}] if i >= NAMESPACES else []
            await client.create({"apiVersion": KS_API, "kind": "Kustomization",
                                 "metadata": {"name": name, "namespace": ns, "labels": {"team": f"t{i % 7}"}},
                                 "spec": {"interval": "10m", "prune": True, "dependsOn": depends,
                                          "sourceRef": {"kind": "GitRepository", "name": "repo"}}})

        async def write(i: int, round_: int) -> None:
            ns, name = names[i]
            await client.patch(KS_API, "Kustomization", name, ns, {"status": _status(i, round_)},
                               patch_type="merge", subresource="status")

        await bounded((create(i) for i in range(n)), limit=16)
        await bounded((write(i, 0) for i in range(n)), limit=16)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kustomize_controller", "ui", "--kubeconfig", api.kubeconfig, "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=bench_env())
        try:
            assert proc.stdout is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            url = line.split("ui: ", 1)[1].split(" ", 1)[0]
            async with async_playwright() as playwright:
                context = await playwright.chromium.launch_persistent_context(
                    tempfile.mkdtemp(dir=cfg.workdir), executable_path=CHROMIUM, args=ARGS)
                page = context.pages[0]
                await page.goto(url + "/")  # the informers' first list
                for _ in range(600):
                    if await page.locator("#rows tr").count() == n:
                        break
                    await asyncio.sleep(0.1)
                    await page.reload()
                times = []
                for _ in range(renders):
                    fresh = await context.new_page()
                    await fresh.goto(url + "/")
                    await fresh.wait_for_selector("body[data-rendered=true]")
                    times.append(await fresh.evaluate(
                        "performance.getEntriesByName('fleet-rendered')[0].startTime"))
                    assert await fresh.locator("#rows tr").count() == n
                    await fresh.close()
                m["ui.first_render_ms"] = statistics.median(times)
                m["ui.first_render_max_ms"] = max(times)
                await page.goto(url + "/")
                await page.wait_for_selector("body[data-rendered=true]")
                await asyncio.sleep(1.0)
                m["ui.rss_before_mib"] = _status_kib(proc.pid, "VmRSS") / 1024
                before = int(await page.evaluate("Number(document.body.dataset.updates || 0)"))
                for round_ in range(1, rounds + 1):
                    await bounded((write(i, round_) for i in range(n)), limit=16)
                last_write = time.perf_counter()
                last_ns, last_name = names[-1]
                selector = f'tr[data-key="{last_ns}/{last_name}"] td.message'
                for _ in range(600):
                    if f"round {rounds}:" in await page.inner_text(selector):
                        break
                    await asyncio.sleep(0.05)
                m["ui.last_seen_ms"] = (time.perf_counter() - last_write) * 1000
                await asyncio.sleep(2.0)
                m["ui.rss_after_mib"] = _status_kib(proc.pid, "VmRSS") / 1024
                m["ui.updates"] = float(rounds * n)
                m["ui.messages"] = float(int(await page.evaluate("Number(document.body.dataset.updates || 0)"))
                                         - before)
                m["ui.kustomizations"] = float(await page.locator("#rows tr").count())
                await context.close()
        finally:
            proc.terminate()
            await proc.wait()
    return m


def available() -> bool:
    return Path(CHROMIUM).is_file()
