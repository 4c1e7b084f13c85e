"""The *monorepo* scenario of issue 17: one GitRepository holding N app directories, one Kustomization each.

Layout of the artifact: ``apps/app-<i>/{kustomization.yaml, app.yaml}`` (the 4 objects of
``bench.workload``), and ``platform/`` — a kustomize Component that annotates every object of the
apps that include it (every tenth app, ``shared_every``). Phases, each measured from the moment the
source status is written to the moment the driver's watch sees every Kustomization Ready at the new
``lastAppliedRevision``:

1. cold start: the controller starts on N Kustomizations and revision 1;
2. one app changed (revision 2); the changed app's ConfigMap is checked in the cluster;
3. the shared platform component changed (revision 3): its N/10 dependants must rebuild;
4. a periodic no-op round (``requestedAt`` on all).

For each phase: seconds, controller CPU seconds, kustomize CPU seconds (the controller's reaped
children), artifact downloads and kustomize runs — both read from the controller's own
``kustomize_controller_*_cache_requests_total`` counters (runs = build misses + bypasses).
With ``--profile-dir`` py-spy is attached to the controller for phases 2 and 3 only
(``monorepo-<n>-<phase>.txt``).
"""

from __future__ import annotations

import time
from typing import Any

from bench.procs import ControllerProcess, metric_sum, profiled, scrape
from bench.scenarios import Config, Metrics, _settled, api_cpu, cluster, controller
from bench.workload import (
    APPS_NS,
    FLUX_NS,
    KS_API,
    Tracker,
    _app_objects,
    bounded,
    create_namespaces,
    install_crds,
    request_reconcile,
)
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source

SOURCE = "monorepo"


def monorepo_files(
    n: int, *, changed: int | None = None, platform_rev: int = 1, shared_every: int = 10
) -> dict[str, str]:
    files = {
        "platform/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
        f"commonAnnotations:\n  platform.example.com/revision: \"{platform_rev}\"\n",
    }
    for i in range(n):
        components = "components:\n- ../../platform\n" if i % shared_every == 0 else ""
        files[f"apps/app-{i}/kustomization.yaml"] = (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- app.yaml\n" + components
        )
        files[f"apps/app-{i}/app.yaml"] = _app_objects(i, 0, 2 if i == changed else 1)
    return files


def kustomization(i: int) -> dict[str, Any]:
    return {
        "apiVersion": KS_API,
        "kind": "Kustomization",
        "metadata": {"name": f"app-{i}", "namespace": FLUX_NS},
        "spec": {
            "interval": "60m",
            "retryInterval": "10s",
            "timeout": "5m",
            "path": f"./apps/app-{i}",
            "prune": True,
            "wait": False,
            "sourceRef": {"kind": "GitRepository", "name": SOURCE},
        },
    }


async def _publish(client: KubeClient, artifacts: ArtifactServer, files: dict[str, str]) -> tuple[str, float]:
    """Serve the artifact, then write the source status; returns the revision and when the write began."""
    artifact = await artifacts.publish_files(files, name=f"{FLUX_NS}/{SOURCE}")
    written = time.perf_counter()
    await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name=SOURCE, artifact=artifact)
    return str(artifact["revision"]), written


class _Counters:
    def __init__(self, samples: dict[tuple[str, str], float]) -> None:
        self.downloads = metric_sum(samples, "kustomize_controller_artifact_cache_requests_total", result="miss")
        self.runs = metric_sum(samples, "kustomize_controller_build_cache_requests_total", result="miss") + metric_sum(
            samples, "kustomize_controller_build_cache_requests_total", result="bypass"
        )
        self.reused = metric_sum(samples, "kustomize_controller_build_cache_requests_total", result="hit")


async def _phase(m: Metrics, key: str, ctrl: ControllerProcess, before: _Counters, cpu0: float, kcpu0: float) -> None:
    after = _Counters(await _settled(ctrl))
    stats = ctrl.stats()
    m[f"{key}.downloads"] = after.downloads - before.downloads
    m[f"{key}.kustomize_runs"] = after.runs - before.runs
    m[f"{key}.builds_reused"] = after.reused - before.reused
    m[f"{key}.cpu_s"] = stats.cpu_s - cpu0
    m[f"{key}.kustomize_cpu_s"] = stats.children_cpu_s - kcpu0
    m[f"{key}.rss_mib"] = stats.rss_mib


async def monorepo(cfg: Config, n: int, *, shared_every: int = 10, into: Metrics | None = None) -> Metrics:
    m: Metrics = into if into is not None else {}
    names = [f"app-{i}" for i in range(n)]
    async with cluster(cfg, f"monorepo-{n}") as (api, client, artifacts), Tracker(client) as tracker:
        await install_crds(client)
        await create_namespaces(client, FLUX_NS, APPS_NS)
        rev1, _ = await _publish(client, artifacts, monorepo_files(n, shared_every=shared_every))
        await bounded(client.create(kustomization(i)) for i in range(n))
        api0 = api_cpu(api)
        started = time.perf_counter()
        ctrl = controller(cfg, api, name=f"monorepo-{n}")
        async with ctrl:
            ready = await tracker.wait_ready(dict.fromkeys(names, rev1), within=max(300.0, n * 1.0))
            m["cold.seconds"] = ready - started
            zero = _Counters({})
            await _phase(m, "cold", ctrl, zero, 0.0, 0.0)
            m["cold.peak_rss_mib"] = ctrl.stats().peak_rss_mib
            if api.pid:
                m["cold.apiserver_cpu_s"] = api_cpu(api) - api0

            changed = 1 % n
            phases: list[tuple[str, dict[str, str]]] = [
                ("one_app", monorepo_files(n, changed=changed, shared_every=shared_every)),
                ("shared_base", monorepo_files(n, changed=changed, platform_rev=2, shared_every=shared_every)),
            ]
            for key, files in phases:
                before = _Counters(await _settled(ctrl))
                stats = ctrl.stats()
                profile = cfg.profile_dir / f"monorepo-{n}-{key}.txt" if cfg.profile_dir else None
                async with profiled(ctrl.pid, profile):
                    revision, t0 = await _publish(client, artifacts, files)
                    ready = await tracker.wait_ready(dict.fromkeys(names, revision), within=max(300.0, n * 1.0))
                m[f"{key}.seconds"] = ready - t0
                await _phase(m, key, ctrl, before, stats.cpu_s, stats.children_cpu_s)
                if key == "one_app":
                    cm = await client.get("v1", "ConfigMap", f"app-{changed}", APPS_NS)
                    m["one_app.changed_object_updated"] = 1.0 if cm["data"]["revision"] == "2" else 0.0

            before = _Counters(await _settled(ctrl))
            stats = ctrl.stats()
            token = f"bench-monorepo-noop-{time.time_ns()}"
            t0 = time.perf_counter()
            await request_reconcile(client, names, token)
            handled = await tracker.wait_handled(names, token, within=max(120.0, n * 0.5))
            m["noop.seconds"] = handled - t0
            await _phase(m, "noop", ctrl, before, stats.cpu_s, stats.children_cpu_s)
            m["end.peak_rss_mib"] = ctrl.stats().peak_rss_mib
            samples = await scrape(ctrl.metrics_url)
            m["end.build_cache_mib"] = metric_sum(samples, "kustomize_controller_build_cache_bytes") / (1 << 20)
            m["end.artifact_cache_mib"] = metric_sum(samples, "kustomize_controller_artifact_cache_bytes") / (1 << 20)
    return m
