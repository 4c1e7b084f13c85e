"""The ``flux`` CLI against our controller prints and exits as it does against Flux's own.

Each command runs against both sides at once (``Pair``): our controller in one namespace, Flux's
kustomize-controller in another, the same Git repository behind both through source-controller. Outputs
are compared after masking the namespace, times, durations and UIDs (``tests/flux/cli.normalise``);
``flux events`` rows are compared as a set (their order and counts follow timing).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.flux.cli import FluxResult, normalise
from tests.flux.gitserver import GitServer, Repository

from ..harness import configmap, eventually
from .sides import KS_API, Pair, Side, condition

pytestmark = [pytest.mark.timeout(600), pytest.mark.upstream]

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
FILES = {
    "kustomization.yaml": "resources:\n- settings.yaml\n- extra.yaml\n",
    "settings.yaml": configmap("settings", mode="one"),
    "extra.yaml": configmap("extra"),
    "other/kustomization.yaml": "resources:\n- other.yaml\n",
    "other/other.yaml": configmap("other"),
}


def event_rows(result: FluxResult, names: dict[str, str]) -> set[tuple[str, ...]]:
    """``flux events`` rows as (TYPE, REASON, OBJECT, MESSAGE), normalised, without LAST SEEN."""
    assert result.exit_code == 0, str(result)
    lines = result.stdout.splitlines()
    assert lines and lines[0].split("\t")[0].strip() == "LAST SEEN", result.stdout
    rows = set()
    for line in lines[1:]:
        cells = [normalise(c.strip(), names) for c in line.split("\t")]
        rows.add(tuple(cells[1:5]))
    return rows


async def applied_view(side: Side, name: str, names: dict[str, str]) -> str:
    """A ConfigMap the Kustomization applied, as JSON, without what differs by design (uid,
    resourceVersion, times, the namespace)."""
    obj = await side.get("v1", "ConfigMap", name)
    meta = obj["metadata"]
    managed = [{k: v for k, v in entry.items() if k != "time"} for entry in meta.get("managedFields") or []]
    view = {"labels": meta.get("labels"), "annotations": meta.get("annotations"), "data": obj.get("data"),
            "managedFields": sorted(managed, key=lambda e: (e["manager"], e["operation"]))}
    return normalise(json.dumps(view, sort_keys=True), names, collapse_space=False)


async def start(pair: Pair, git_server: GitServer) -> tuple[Repository, str]:
    repo = await git_server.create("app")
    revision = repo.revision(await repo.commit(FILES))

    async def setup(side: Side) -> None:
        # the artifact first: a Kustomization created before it is reconciled once more or not depending on
        # when the artifact lands (the finalizer's requeue and the source event may meet in the queue, with
        # either controller), which `debug --show-history` would show as a different count
        await side.git_repository("app", repo.url)
        await side.wait_artifact("GitRepository", "app", revision=revision)
        await side.kustomization("app")

    await pair.each(setup)
    await pair.each(lambda side: side.wait_applied(revision))
    return repo, revision


async def test_cli_lifecycle_matches_upstream(pair: Pair, git_server: GitServer) -> None:
    repo, _ = await start(pair, git_server)
    worktree = repo.worktree

    table = await pair.same("get", "ks")
    assert re.search(r"^app main@sha1:[0-9a-f]{8} False True Applied revision: main@sha1:[0-9a-f]{8}$", table,
                     re.MULTILINE), table
    await pair.same("get", "ks", "app", "--show-source")
    await pair.same("get", "ks", "nope")

    # a new commit: `reconcile --with-source` fetches it and returns once it is applied
    second = repo.revision(await repo.commit({
        "settings.yaml": configmap("settings", mode="two"), "extra.yaml": None,
        "kustomization.yaml": "resources:\n- settings.yaml\n"}))
    output = await pair.same("reconcile", "ks", "app", "--with-source")
    assert f"✔ fetched revision {second}" in output and f"✔ applied revision {second}" in output, output
    assert output.startswith("exit 0"), output
    for side in pair.sides:
        ks = await side.ks()
        assert ks["status"]["lastAppliedRevision"] == second
        requested = ks["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"]
        assert ks["status"]["lastHandledReconcileAt"] == requested
        assert not await side.exists("v1", "ConfigMap", "extra")

    # what each applied is the same object: labels, annotations, data, field managers and their fields
    ours_cm, upstream_cm = await pair.each(lambda side: applied_view(side, "settings", pair.names))
    assert ours_cm == upstream_cm, f"ours {ours_cm}\nupstream {upstream_cm}"
    ours_ks, upstream_ks = await pair.each(lambda side: side.ks())
    assert ours_ks["metadata"]["finalizers"] == upstream_ks["metadata"]["finalizers"] == ["finalizers.fluxcd.io"]

    # suspend / resume
    await pair.same("suspend", "ks", "app")
    assert " True True " in await pair.same("get", "ks")
    assert "✗ resource is suspended" in await pair.same("reconcile", "ks", "app")
    await pair.same("suspend", "ks", "nope")
    resumed = await pair.same("resume", "ks", "app")
    assert "✔ Kustomization app reconciliation completed" in resumed and f"✔ applied revision {second}" in resumed

    # create: a second Kustomization on the same source, waited for until ready
    made = await pair.each(lambda side: side.cli(
        "create", "ks", "made", "--source=GitRepository/app", "--path=./other", "--prune=true", "--interval=1h",
        f"--target-namespace={side.namespace}"))
    created = pair.compare(*made)
    assert "✔ Kustomization made is ready" in created and f"✔ applied revision {second}" in created, created
    assert await pair.ours.exists("v1", "ConfigMap", "other")

    # reading commands
    tree = await pair.same("tree", "ks", "app")
    assert tree.splitlines()[2:4] == ["Kustomization/<ns>/app", "└── ConfigMap/<ns>/settings"], tree
    await pair.same("tree", "ks", "app", "-o", "json")
    traced = await pair.same("trace", "configmap", "settings")
    assert f"Revision: {second}" in traced and "Status: Last reconciled at <time>" in traced, traced
    await pair.same("export", "ks", "app")
    # typed decoding of the whole status, history included (a wrong type fails these commands)
    await pair.same("debug", "ks", "app", "--show-status", mask=DIGEST)
    # the digest is of the built manifests, which name each side's namespace
    history = await pair.same("debug", "ks", "app", "--show-history", mask=DIGEST)
    assert "lastReconciledDuration: <duration>" in history, history
    await pair.same("stats")
    built = await pair.same("build", "ks", "app", f"--path={worktree}", sequential=True)
    assert "kustomize.toolkit.fluxcd.io/name: app" in built

    ours_events, upstream_events = await pair.cli("events", "--for", "Kustomization/app")
    assert event_rows(ours_events, pair.names) == event_rows(upstream_events, pair.names), \
        f"=== ours ===\n{ours_events.stdout}\n=== upstream ===\n{upstream_events.stdout}"

    # diff: nothing to do, then a hot-fix on the cluster, then a change in the checkout
    assert (await pair.same("diff", "ks", "app", f"--path={worktree}", sequential=True)).startswith("exit 0")
    for side in pair.sides:
        await side.kube.patch("v1", "ConfigMap", "settings", side.namespace, {"data": {"mode": "hot-fix"}},
                              patch_type="merge", field_manager="kubectl-edit")
    drifted = await pair.same("diff", "ks", "app", f"--path={worktree}", sequential=True)
    assert drifted.startswith("exit 1") and "► ConfigMap/<ns>/settings drifted" in drifted, drifted
    (worktree / "new.yaml").write_text(configmap("new"))
    (worktree / "kustomization.yaml").write_text("resources:\n- new.yaml\n")
    changed = await pair.same("diff", "ks", "app", f"--path={worktree}", sequential=True)
    assert "► ConfigMap/<ns>/new created" in changed and "► ConfigMap/<ns>/settings deleted" in changed, changed
    assert (await pair.same("diff", "ks", "nope", f"--path={worktree}", sequential=True)).startswith("exit 2")

    # delete: the Kustomization goes, and what it applied with it (prune: true)
    deleted = await pair.same("delete", "ks", "app", "--silent")
    assert "✔ kustomization deleted" in deleted

    async def gone(side: Side) -> None:
        await eventually(lambda: side.exists(KS_API, "Kustomization", "app"), lambda there: not there,
                         within=120, what=f"Kustomization/{side.namespace}/app ({side.label}) gone")
        assert not await side.exists("v1", "ConfigMap", "settings"), f"{side.label}: settings not pruned"

    await pair.each(gone)
    await pair.same("get", "ks")
    await pair.same("delete", "ks", "app", "--silent")


async def test_failures_match_upstream(pair: Pair, git_server: GitServer) -> None:
    """A broken commit: `flux reconcile` waits until its timeout (Ready=False is not terminal) and fails
    as upstream's does; an invalid CEL health expression is terminal (Stalled) and fails at once."""
    repo, _ = await start(pair, git_server)
    broken = repo.revision(await repo.commit({
        "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  key: [1\n",
        "kustomization.yaml": "resources:\n- settings.yaml\n- bad.yaml\n"}))
    output = await pair.same("reconcile", "ks", "app", "--with-source", "--timeout=25s")
    assert output.startswith("exit 1") and "✗ context deadline exceeded" in output, output
    await pair.each(lambda side: side.wait_failed(broken))
    table = await pair.same("get", "ks")
    assert "kustomize build failed" in table, table
    ours_events, upstream_events = await pair.cli("events", "--for", "Kustomization/app", "--types", "Warning")
    await pair.same("debug", "ks", "app", "--show-status", mask=DIGEST)
    warnings = event_rows(ours_events, pair.names)
    assert warnings == event_rows(upstream_events, pair.names), \
        f"=== ours ===\n{ours_events.stdout}\n=== upstream ===\n{upstream_events.stdout}"
    assert {row[1] for row in warnings} == {"BuildFailed"}, warnings

    # a missing dependency: not ready, retried, the same message
    await pair.each(lambda side: side.kustomization("dep", dependsOn=[{"name": "missing"}]))
    await pair.each(lambda side: eventually(lambda: side.ks("dep"), lambda ks: condition(ks, "Ready") is not None,
                                            within=60, what=f"{side.label}: Kustomization/dep reconciled"))
    waiting = await pair.same("get", "ks", "dep")
    assert "dependency '<ns>/missing' not found" in waiting, waiting

    # a terminal error: Stalled, and the CLI gives up at once with its message
    await pair.each(lambda side: side.kustomization(
        "cel", healthCheckExprs=[{"apiVersion": "v1", "kind": "ConfigMap", "current": "status.("}]))
    stalled = await pair.same("reconcile", "ks", "cel", "--timeout=60s")
    assert stalled.startswith("exit 1"), stalled
    ours_ks = await pair.ours.ks("cel")
    reasons = {c["type"]: c["reason"] for c in ours_ks["status"]["conditions"]}
    assert reasons == {"Ready": "InvalidCELExpression", "Stalled": "InvalidCELExpression"}, reasons

    # fixed again
    fixed = repo.revision(await repo.commit({"bad.yaml": None,
                                             "kustomization.yaml": FILES["kustomization.yaml"]}))
    output = await pair.same("reconcile", "ks", "app", "--with-source")
    assert f"✔ applied revision {fixed}" in output, output
