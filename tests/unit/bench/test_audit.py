"""``bench/audit.py``: requests per user from a kube-apiserver audit log (lines shaped as v1.36.3 writes them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.audit import OTHERS, AuditLog, kind_of


def event(user: str, verb: str, uri: str, *, resource: str = "", sub: str = "", stage: str = "ResponseComplete",
          audit_id: str = "", code: int = 200) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": audit_id or uri + verb,
        "stage": stage, "requestURI": uri, "verb": verb,
        "user": {"username": user, "uid": f"{user}-uid", "groups": ["system:masters", "system:authenticated"]},
        "userAgent": "kustomize-controller/v0.0.0 (linux/amd64) kubernetes/$Format",
        "responseStatus": {"metadata": {}, "code": code},
    }
    if resource:
        out["objectRef"] = {"resource": resource, "namespace": "apps", "name": "app-0", "apiVersion": "v1"}
        if sub:
            out["objectRef"]["subresource"] = sub
    return out


def write(path: Path, *events: dict[str, Any], partial: str = "") -> None:
    with path.open("a") as f:
        for e in events:
            f.write(json.dumps(e, separators=(",", ":")) + "\n")
        f.write(partial)


def test_kinds_read_as_the_controllers_own_metrics() -> None:
    assert kind_of(event("u", "get", "/api/v1/namespaces/apps/configmaps/app-0", resource="configmaps")) \
        == "get configmaps"
    dry = event("u", "patch", "/apis/apps/v1/namespaces/apps/deployments/app-0?dryRun=All&fieldManager=x&force=true",
                resource="deployments")
    assert kind_of(dry) == "patch (dry-run) deployments"
    status = event("u", "patch", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/f/kustomizations/a/status",
                   resource="kustomizations", sub="status")
    assert kind_of(status) == "patch kustomizations/status"
    assert kind_of(event("u", "get", "/apis")) == "get (discovery)"


def test_each_user_counted_apart_a_stretch_at_a_time(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log, ["bench-ours", "bench-upstream"])
    empty = audit.take()
    assert set(empty) == {"bench-ours", "bench-upstream", *OTHERS} and not any(r.total for r in empty.values())
    write(log,
          event("bench-ours", "get", "/api/v1/namespaces/apps/configmaps/a", resource="configmaps"),
          event("bench-upstream", "get", "/api/v1/namespaces/apps/configmaps/a", resource="configmaps", code=404),
          event("bench-upstream", "patch", "/api/v1/namespaces/apps/configmaps/a?dryRun=All", resource="configmaps"),
          event("kube-admin", "patch", "/api/v1/namespaces/apps/configmaps/a", resource="configmaps"),
          event("system:kube-controller-manager", "list", "/api/v1/pods", resource="pods"),
          event("system:serviceaccount:kube-system:replicaset-controller", "create", "/apis/apps/v1/x",
                resource="replicasets"),
          event("system:serviceaccount:kube-system:replicaset-controller", "watch", "/w", stage="ResponseStarted"),
          event("system:apiserver", "get", "/api/v1/namespaces/default", resource="namespaces"))
    first = audit.take()
    assert (first["bench-ours"].total, first["bench-upstream"].total) == (1, 2)
    # everyone else's requests, by client, each once (a watch when it ends)
    assert [first[other].total for other in OTHERS] == [2, 1, 1]
    assert first["bench-upstream"].by_kind == {"get configmaps": 1, "patch (dry-run) configmaps": 1}
    assert first["bench-upstream"].by_code == {404: 1, 200: 1}
    # the next stretch starts where the last one ended
    write(log, event("bench-ours", "patch", "/x/status", resource="kustomizations", sub="status"))
    second = audit.take()
    assert second["bench-ours"].by_kind == {"patch kustomizations/status": 1}
    assert second["bench-upstream"].total == 0


def test_a_watch_counts_once_across_stretches(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log, ["bench-ours"])
    uri = "/api/v1/namespaces/apps/configmaps?watch=true"
    write(log, event("bench-ours", "watch", uri, resource="configmaps", stage="ResponseStarted", audit_id="w1"))
    assert audit.take()["bench-ours"].by_kind == {"watch configmaps": 1}
    # the same watch ends phases later: not a new request; another watch is
    write(log, event("bench-ours", "watch", uri, resource="configmaps", audit_id="w1"),
          event("bench-ours", "watch", uri, resource="configmaps", stage="ResponseStarted", audit_id="w2"))
    assert audit.take()["bench-ours"].total == 1


def test_a_line_still_being_written_waits_for_the_next_stretch(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log, ["bench-ours"])
    line = json.dumps(event("bench-ours", "get", "/api/v1/namespaces/a/secrets/s", resource="secrets"),
                      separators=(",", ":"))
    write(log, partial=line[:40])
    assert audit.take()["bench-ours"].total == 0
    with log.open("a") as f:
        f.write(line[40:] + "\n")
    assert audit.take()["bench-ours"].by_kind == {"get secrets": 1}


def test_no_log_yet_is_no_requests(tmp_path: Path) -> None:
    assert AuditLog(tmp_path / "none.jsonl", ["u"]).take()["u"].total == 0
