"""The UI's pure views: a Kustomization's state, fleet rows and counts, the dependency graph, the inventory
tree, sync windows and side-by-side diffs (kustomize_controller/ui/model.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kustomize_controller.ui import model


def ks(name: str = "app", namespace: str = "apps", *, conditions: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
       generation: int = 1, observed: int = 1, suspend: bool = False, depends_on: list[Any] | None = None,
       **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "generation": generation, "labels": {"team": "a"}},
        "spec": {"suspend": suspend, "sourceRef": {"kind": "GitRepository", "name": "repo"},
                 **({"dependsOn": depends_on} if depends_on else {})},
        "status": {"observedGeneration": observed,
                   "conditions": [{"type": t, "status": s, "reason": r, "message": f"{t} says {r}",
                                   "lastTransitionTime": "2026-01-01T10:00:00Z"} for t, s, r in conditions],
                   **status},
    }


READY = ("Ready", "True", "ReconciliationSucceeded")


@pytest.mark.parametrize(("obj", "state", "reason"), [
    (ks(conditions=[READY], suspend=True), model.SUSPENDED, ""),
    (ks(conditions=[READY, ("Approved", "False", "ApprovalRequired")]), model.WAITING, "ApprovalRequired"),
    (ks(conditions=[READY, ("SyncAllowed", "False", "SyncWindowClosed")]), model.HELD, "SyncWindowClosed"),
    (ks(conditions=[READY, ("SyncAllowed", "False", "InvalidSyncWindow")]), model.HELD, "InvalidSyncWindow"),
    (ks(conditions=[("Ready", "False", "BuildFailed"), ("Reconciling", "True", "ProgressingWithRetry")]),
     model.FAILING, "BuildFailed"),
    (ks(conditions=[("Ready", "Unknown", "Progressing")]), model.RECONCILING, "Progressing"),
    (ks(conditions=[READY, ("Reconciling", "True", "Progressing")], generation=2), model.RECONCILING,
     "ReconciliationSucceeded"),
    (ks(conditions=[READY, ("Drifted", "True", "DriftDetected")]), model.DRIFTED, "DriftDetected"),
    (ks(conditions=[READY, ("Drifted", "False", "NoDrift"), ("Approved", "True", "NoChanges")]), model.READY,
     "ReconciliationSucceeded"),
    (ks(), model.PENDING, ""),
])
def test_state_first_match_wins(obj: dict[str, Any], state: str, reason: str) -> None:
    assert model.state_of(obj) == (state, reason)


def test_a_row_shows_the_gate_message_the_applied_and_attempted_revisions() -> None:
    obj = ks(conditions=[READY, ("Approved", "False", "ApprovalRequired")],
             lastAppliedRevision="main@sha1:" + "a" * 40, lastAttemptedRevision="main@sha1:" + "b" * 40,
             history=[{"digest": "sha256:1", "firstReconciled": "2026-01-01T09:00:00Z",
                       "lastReconciled": "2026-01-01T11:00:00Z", "lastReconciledDuration": "1s",
                       "lastReconciledStatus": "ReconciliationSucceeded", "totalReconciliations": 3}])
    row = model.fleet_row(obj)
    assert (row.key, row.state, row.css, row.source) == ("apps/app", model.WAITING, "waiting",
                                                          "GitRepository/apps/repo")
    assert row.message == "Approved says ApprovalRequired"
    assert row.attempted == "main@sha1:" + "b" * 40
    assert row.applied_at == datetime(2026, 1, 1, 11, tzinfo=UTC)
    assert model.short_revision(row.revision) == "main@sha1:aaaaaaaaaaaa"
    assert model.fleet_row(ks(conditions=[READY], lastAppliedRevision="r", lastAttemptedRevision="r")).attempted == ""


def test_counts_follow_the_state_order_and_leave_out_empty_states() -> None:
    rows = [model.fleet_row(o) for o in (ks("a", conditions=[READY]), ks("b", conditions=[READY]),
                                          ks("c", suspend=True))]
    assert model.counts(rows) == [("all", 3), (model.READY, 2), (model.SUSPENDED, 1)]


def test_the_graph_groups_by_namespace_and_marks_dependents_of_what_is_not_ready_blocked() -> None:
    fleet = [
        ks("db", "infra", conditions=[("Ready", "False", "HealthCheckFailed")]),
        ks("cache", "infra", conditions=[READY]),
        ks("api", "apps", conditions=[READY], depends_on=[{"name": "db", "namespace": "infra"},
                                                           {"name": "cache", "namespace": "infra"}]),
        ks("web", "apps", conditions=[READY], depends_on=[{"name": "api"}]),
        ks("lone", "apps", conditions=[READY], depends_on=[{"name": "cache", "namespace": "infra"}]),
        ks("orphan", "apps", conditions=[READY], depends_on=[{"name": "gone"}]),
    ]
    elements = model.dependency_graph(fleet)
    nodes = {e["data"]["id"]: e["data"] for e in elements if "source" not in e["data"]}
    edges = {e["data"]["id"] for e in elements if "source" in e["data"]}
    assert {k for k, v in nodes.items() if v["kind"] == "namespace"} == {"ns:apps", "ns:infra"}
    assert nodes["apps/api"]["parent"] == "ns:apps" and nodes["infra/db"]["state"] == "failing"
    assert {k for k, v in nodes.items() if v.get("blocked")} == {"apps/api", "apps/web", "apps/orphan"}
    assert nodes["apps/gone"]["state"] == model.MISSING
    assert {"infra/db->apps/api", "apps/api->apps/web", "apps/gone->apps/orphan"} <= edges
    json.dumps(elements)  # what the page fetches


def test_a_cycle_does_not_loop() -> None:
    fleet = [ks("a", conditions=[READY], depends_on=[{"name": "b"}]),
             ks("b", conditions=[READY], depends_on=[{"name": "a"}])]
    nodes = [e["data"] for e in model.dependency_graph(fleet) if e["data"].get("kind") == "kustomization"]
    assert [n["blocked"] for n in nodes] == [False, False]  # both ready: nothing waits


def test_the_inventory_tree_is_namespace_then_kind_then_name() -> None:
    obj = ks(inventory={"entries": [
        {"id": "apps_web_apps_Deployment", "v": "v1"},
        {"id": "apps_a_apps_Deployment", "v": "v1"},
        {"id": "apps_cfg__ConfigMap", "v": "v1"},
        {"id": "_apps__Namespace", "v": "v1"},
        {"id": "broken", "v": "v1"},
    ]})
    tree = model.inventory_tree(model.inventory_items(obj))
    assert [(ns, [(kind, [i.name for i in items]) for kind, items in kinds]) for ns, kinds in tree] == [
        ("", [("Namespace", ["apps"])]),
        ("apps", [("ConfigMap", ["cfg"]), ("Deployment.apps", ["a", "web"])]),
    ]
    (item,) = [i for i in model.inventory_items(obj) if i.kind == "ConfigMap"]
    assert (item.api_version, item.subject) == ("v1", "ConfigMap/apps/cfg")


def test_side_by_side_pairs_removed_and_added_lines() -> None:
    diff = ("--- ConfigMap/a/b (live)\n+++ ConfigMap/a/b (merged)\n@@ -1,4 +1,4 @@\n apiVersion: v1\n"
            "-  mode: safe\n-  other: x\n+  mode: fast\n kind: ConfigMap\n+new: line\n")
    rows = model.side_by_side(diff)
    assert [(r.kind, r.left, r.right) for r in rows] == [
        ("hunk", "@@ -1,4 +1,4 @@", "@@ -1,4 +1,4 @@"),
        ("same", "apiVersion: v1", "apiVersion: v1"),
        ("changed", "  mode: safe", "  mode: fast"),
        ("removed", "  other: x", ""),
        ("same", "kind: ConfigMap", "kind: ConfigMap"),
        ("added", "", "new: line"),
    ]


def test_windows_of_the_annotation_and_the_selecting_fleet_windows() -> None:
    now = datetime(2026, 1, 2, 12, 30, tzinfo=UTC)  # a Friday
    obj = ks()
    obj["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/sync-windows": json.dumps(
        [{"kind": "deny", "schedule": "0 12 * * *", "duration": "1h"}])}
    fleet, error = model.parse_fleet_windows({"data": {"windows": json.dumps([
        {"kind": "allow", "schedule": "0 9 * * *", "duration": "8h", "namespaces": ["apps"]},
        {"kind": "deny", "schedule": "0 0 * * *", "duration": "1h", "namespaces": ["prod-*"]},
    ])}}, source="ConfigMap flux-system/windows")
    assert error == "" and len(fleet) == 2
    view = model.windows_view(obj, fleet=fleet, fleet_error="", now=now)
    assert [(r.window.kind, r.active) for r in view.rows] == [("deny", True), ("allow", True)]
    assert view.rows[0].ends_at == datetime(2026, 1, 2, 13, tzinfo=UTC)
    assert view.rows[0].next_start == datetime(2026, 1, 3, 12, tzinfo=UTC)
    assert view.state is not None and not view.state.allowed
    assert view.state.opens_at == datetime(2026, 1, 2, 13, tzinfo=UTC)


def test_invalid_windows_are_reported_not_ignored() -> None:
    _, error = model.parse_fleet_windows({"data": {"windows": "- kind: sometimes"}}, source="ConfigMap a/b")
    assert "ConfigMap a/b data.windows[0]" in error
    obj = ks()
    obj["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/sync-windows": "not: [a list"}
    view = model.windows_view(obj, fleet=[], fleet_error=error, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert len(view.errors) == 2 and view.state is None
    assert model.parse_fleet_windows(None, source="x") == ([], "")


def test_the_fleet_line_leaves_out_the_approval_record() -> None:
    from kustomize_controller.ui.model import fleet_row

    ks = {"metadata": {"name": "web", "namespace": "apps",
                       "annotations": {"kustomize.toolkit.fluxcd.io/approval": "manual"}},
          "spec": {"sourceRef": {"kind": "GitRepository", "name": "src"}},
          "status": {"conditions": [
              {"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
               "message": "Applied revision: r1"},
              {"type": "Approved", "status": "False", "reason": "ApprovalRequired",
               "message": "Approval required for revision r2: plan 0123456789ab (1 configured) "
                          "[approval key=0123456789abcdef plan=ba9876543210 used]"}]}}
    row = fleet_row(ks)
    assert row.message == "Approval required for revision r2: plan 0123456789ab (1 configured)"
