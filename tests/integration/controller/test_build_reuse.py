"""The artifact and build caches seen from the API: a monorepo revision that changes one app is
downloaded once, rebuilds only that app, and every Kustomization still reports the new revision;
a reused build is still compared with (and corrects) the live objects."""

from __future__ import annotations

import pytest

from tests.integration.controller.conftest import ControllerEnv
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


def sample(env: ControllerEnv, name: str, result: str) -> float:
    assert env.manager is not None
    value = env.manager.metrics.registry.get_sample_value(name, {"result": result})
    return value or 0.0


async def test_one_app_changed_one_download_one_rebuild_and_drift_still_corrected(env: ControllerEnv) -> None:
    ns = env.namespace
    files = {f"apps/{a}/cm.yaml": configmap(f"cm-{a}", {"v": "1"}) for a in ("a", "b", "c")}
    first = await env.publish(files)
    await env.start()
    await env.metrics_url()
    for app in ("a", "b", "c"):
        await env.create(env.kustomization(app, path=f"apps/{app}", targetNamespace=ns))
    for app in ("a", "b", "c"):
        await env.wait_ready(app, revision=first["revision"])
    assert env.artifacts.request_count(first["path"]) == 1
    misses = sample(env, "kustomize_controller_build_cache_requests_total", "miss")
    hits = sample(env, "kustomize_controller_build_cache_requests_total", "hit")

    second = await env.publish({**files, "apps/b/cm.yaml": configmap("cm-b", {"v": "2"})})
    for app in ("a", "b", "c"):
        await env.wait_ready(app, revision=second["revision"])
    assert env.artifacts.request_count(second["path"]) == 1
    assert sample(env, "kustomize_controller_build_cache_requests_total", "miss") == misses + 1
    assert sample(env, "kustomize_controller_build_cache_requests_total", "hit") >= hits + 2
    assert (await env.client.get("v1", "ConfigMap", "cm-b", ns))["data"] == {"v": "2"}
    assert (await env.get_ks("a"))["status"]["lastAttemptedRevision"] == second["revision"]

    # Drift on an app whose build is reused: the reconcile still compares and corrects it.
    await env.client.patch("v1", "ConfigMap", "cm-a", ns, {"data": {"v": "edited"}}, patch_type="merge")
    hits = sample(env, "kustomize_controller_build_cache_requests_total", "hit")
    token = await env.request_reconcile("a")
    await env.wait_handled(token, "a")
    assert (await env.client.get("v1", "ConfigMap", "cm-a", ns))["data"] == {"v": "1"}
    assert sample(env, "kustomize_controller_build_cache_requests_total", "hit") == hits + 1
    assert sample(env, "kustomize_controller_artifact_cache_requests_total", "miss") == 2
    assert env.manager is not None
    assert (env.manager.metrics.registry.get_sample_value("kustomize_controller_artifact_cache_bytes") or 0) > 0
