"""What a Kustomization's status says when something is wrong, as Flux's own kustomize-controller says it:
a missing source, a missing path, an object the API server refuses, an unknown kind, a missing variable,
a missing namespace, missing ConfigMaps and Secrets, a tenant without rights, a dependency not ready, a
health check that times out. Each pair of Kustomizations (ours, upstream's) must end with the same
Ready condition and revisions; the only difference allowed is the one docs/differences.md lists (upstream
names its temporary directory in a missing path's message)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from tests.flux.cli import normalise
from tests.flux.gitserver import GitServer

from ..harness import E2EError, configmap, eventually
from ..test_warn_and_diff import DEPLOYMENT
from .sides import Pair, Side, condition

pytestmark = [pytest.mark.timeout(420), pytest.mark.upstream]

FILES = {
    "ok/kustomization.yaml": "resources:\n- a.yaml\n",
    "ok/a.yaml": configmap("a"),
    "invalid/kustomization.yaml": "resources:\n- bad.yaml\n",
    "invalid/bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
    "unknown/kustomization.yaml": "resources:\n- w.yaml\n",
    "unknown/w.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
    "subst/kustomization.yaml": "resources:\n- s.yaml\n",
    "subst/s.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  k: ${strict_var}\n",
    "web/kustomization.yaml": "resources:\n- web.yaml\n",
    "web/web.yaml": DEPLOYMENT,
}
# upstream builds in a fresh temporary directory and names it in a missing path's message (differences.md)
UPSTREAM_TMP = re.compile(r"/tmp/kustomization-\d+/")


def kustomizations(side: Side) -> dict[str, dict[str, Any]]:
    """Name -> the extra spec of each Kustomization of the scenario."""
    return {
        "no-source": {"sourceRef": {"kind": "GitRepository", "name": "missing"}},
        "no-path": {"path": "./nowhere"},
        "invalid": {"path": "./invalid"},
        "unknown-kind": {"path": "./unknown"},
        "strict-var": {"path": "./subst", "postBuild": {"substitute": {"other": "x"}}},
        "no-namespace": {"path": "./ok", "targetNamespace": "e2e-no-such-namespace"},
        "no-configmap": {"path": "./ok", "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "nope"}]}},
        "no-rights": {"path": "./ok", "serviceAccountName": "nobody"},
        "no-kubeconfig": {"path": "./ok", "kubeConfig": {"secretRef": {"name": "nope"}}},
        "no-sops-key": {"path": "./ok", "decryption": {"provider": "sops", "secretRef": {"name": "nope"}}},
        "dependent": {"path": "./ok", "dependsOn": [{"name": "no-configmap"}]},
        "unhealthy": {"path": "./web", "wait": True, "timeout": "5s"},
    }


def view(obj: dict[str, Any], names: dict[str, str]) -> str:
    status = obj.get("status") or {}
    ready = condition(obj, "Ready") or {}
    shown = {"ready": {k: ready.get(k) for k in ("status", "reason", "message")},
             "lastAttemptedRevision": status.get("lastAttemptedRevision"),
             "lastAppliedRevision": status.get("lastAppliedRevision"),
             "inventory": status.get("inventory")}
    return UPSTREAM_TMP.sub("", normalise(json.dumps(shown, sort_keys=True), names, collapse_space=False))


async def test_failure_states_match_upstream(pair: Pair, git_server: GitServer) -> None:
    repo = await git_server.create("app")
    revision = repo.revision(await repo.commit(FILES))

    async def setup(side: Side) -> None:
        await side.git_repository("app", repo.url)
        await side.wait_artifact("GitRepository", "app", revision=revision)
        for name, spec in kustomizations(side).items():
            await side.kustomization(name, **spec)

    await pair.each(setup)
    for name in kustomizations(pair.ours):

        async def both() -> tuple[str, str]:
            ours, upstream = await pair.each(lambda side: side.ks(name))  # noqa: B023 - awaited at once
            return view(ours, pair.names), view(upstream, pair.names)

        def settled(views: tuple[str, str]) -> bool:
            return views[0] == views[1] and '"status": "False"' in views[0]

        try:
            await eventually(both, settled, within=90, every=1.0, what=f"Kustomization {name}")
        except E2EError as err:
            ours, upstream = await both()
            raise AssertionError(f"{name}: ours and upstream's differ:\nours     {ours}\nupstream {upstream}") \
                from err
    ours, upstream = await pair.cli("get", "ks")
    pair.compare(ours, dataclasses.replace(upstream, stdout=UPSTREAM_TMP.sub("", upstream.stdout)))
