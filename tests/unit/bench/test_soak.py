"""``bench/soak.py`` and ``bench/soak_audit.py``: the soak's schedule and groups, the approver's reading of
a waiting plan, and the audit-log checks that judge it (the soak itself runs on a real control plane, by
hand: ``make soak``)."""

from __future__ import annotations

from typing import Any

from bench import chaos, soak
from bench.soak_audit import (
    Approval,
    Request,
    count_requests,
    parse_event,
    plan_changes,
    unapproved_writes,
    writes_while_suspended,
)

NS = "soak-manual"
PROCESS_1, PROCESS_2 = "JTI=one", "JTI=two"


def write(at: float, verb: str, name: str, data: dict[str, str] | None = None, *, kind: str = "configmaps",
          credential: str = PROCESS_1, code: int = 200, namespace: str = NS) -> Request:
    body: Any = None if verb == "delete" else {"apiVersion": "v1", "kind": "ConfigMap", **({"data": data} if data
                                                                                             else {})}
    return Request(at=at, user="u", credential=credential, verb=verb, resource=kind, subresource="",
                   namespace=namespace, name=name, code=code, dry_run=False, body=body)


def approval(at: float, rev: int, *, app: int = 4, changes: int = 0, token: str = "") -> Approval:
    return Approval(app=app, sent_at=at, plan=f"{rev:012x}", rev=rev, token=token or f"t{at}", changes=changes)


def revision_2(at: float, *, credential: str = PROCESS_1) -> list[Request]:
    """What applying revision 2 of app 4 over revision 1 writes: 2 ConfigMaps and a ServiceAccount, 2 prunes."""
    return [
        write(at, "patch", "app-4", {"revision": "2"}, credential=credential),
        write(at + 0.1, "patch", "app-4-r2", {"added": "2"}, credential=credential),
        write(at + 0.2, "patch", "app-4-sa0", kind="serviceaccounts", credential=credential),
        write(at + 0.3, "delete", "app-4-r1", credential=credential),
        write(at + 0.4, "delete", "app-4-sa1", kind="serviceaccounts", credential=credential),
    ]


def check(writes: list[Request], approvals: list[Approval]) -> list[str]:
    return unapproved_writes(writes, approvals, namespace=NS, desired=chaos.expected_objects).violations


def test_an_approved_apply_and_its_prunes_are_allowed_by_its_approval() -> None:
    found = unapproved_writes(revision_2(10.0), [approval(5.0, 2)], namespace=NS, desired=chaos.expected_objects)
    assert (found.violations, found.matched, found.approvals_used) == ([], 5, 1)


def test_a_write_before_its_approval_or_of_another_content_is_not_allowed() -> None:
    assert check(revision_2(10.0), [approval(11.0, 2)])[0].endswith("no approval given before it")
    found = check([write(10.0, "patch", "app-4", {"revision": "3"})], [approval(5.0, 2)])
    assert found == ["patch ConfigMap/soak-manual/app-4 at 10.000: its content is in no approved revision "
                     "(approved: [2])"]


def test_a_drift_correction_after_the_approved_apply_needs_its_own_approval() -> None:
    """Issue 38's scenario: revision 2 approved and applied, a hand edit, and the controller puts revision 2's
    content back without a new approval."""
    applied = revision_2(10.0)
    correction = write(30.0, "patch", "app-4", {"revision": "2"})
    found = check([*applied, correction], [approval(5.0, 2)])
    assert len(found) == 1 and found[0].startswith("patch ConfigMap/soak-manual/app-4 at 30.000: the 1 approval")
    assert check([*applied, correction], [approval(5.0, 2), approval(25.0, 2)]) == []


def test_an_approval_allows_no_more_writes_than_its_plan_counts() -> None:
    writes = [write(10.0, "patch", "app-4", {"revision": "2"}), write(10.1, "patch", "app-4-r2", {"added": "2"})]
    assert check(writes, [approval(5.0, 2, changes=2)]) == []
    assert len(check(writes, [approval(5.0, 2, changes=1)])) == 1


def test_an_approval_used_by_a_controller_that_died_is_not_used_again_by_the_next() -> None:
    first, rest = revision_2(10.0)[:1], revision_2(20.0, credential=PROCESS_2)[1:]
    found = check([*first, *rest], [approval(5.0, 2)])
    assert len(found) == 4 and all("used by another controller process" in v for v in found)
    # a new approval of the rest, given after the first process died, allows them
    assert check([*first, *rest], [approval(5.0, 2), approval(15.0, 2)]) == []


def test_failed_and_dry_run_writes_are_not_writes() -> None:
    dry = Request(at=3.0, user="u", credential=PROCESS_1, verb="delete", resource="configmaps", subresource="",
                  namespace=NS, name="app-4-r1", code=200, dry_run=True)
    throttled = write(3.0, "patch", "app-4", {"revision": "2"}, code=429)
    assert check([dry, throttled], []) == []


def test_the_audit_event_says_who_when_and_whether_it_was_a_dry_run() -> None:
    event = {
        "stage": "ResponseComplete", "verb": "delete", "requestReceivedTimestamp": "2026-11-28T10:53:10.208202Z",
        "user": {"username": "system:serviceaccount:flux-system:kustomize-controller",
                 "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]}},
        "objectRef": {"resource": "configmaps", "namespace": NS, "name": "app-11-r1"},
        "requestURI": f"/api/v1/namespaces/{NS}/configmaps/app-11-r1", "responseStatus": {"code": 200},
        "requestObject": {"kind": "DeleteOptions", "propagationPolicy": "Background", "dryRun": ["All"]},
    }
    request = parse_event(event)
    assert request is not None and request.credential == "JTI=abc" and request.dry_run and not request.is_write
    assert abs(request.at - 1795863190.208202) < 1e-3
    event["requestObject"] = {"kind": "DeleteOptions", "propagationPolicy": "Background"}
    assert parse_event(event).is_write  # type: ignore[union-attr]
    assert parse_event({**event, "requestURI": event["requestURI"] + "?dryRun=All"}).dry_run  # type: ignore[union-attr]
    assert parse_event({**event, "stage": "ResponseStarted"}) is None


def test_writes_while_suspended_and_the_counts() -> None:
    writes = [write(5.0, "patch", "app-2", {"revision": "1"}, namespace="s"),
              write(15.0, "patch", "app-2", {"revision": "2"}, namespace="s"),
              write(25.0, "patch", "app-2", {"revision": "2"}, namespace="s")]
    assert writes_while_suspended(writes, namespace="s", since=10.0, until=20.0) == [
        "patch ConfigMap/s/app-2 at 15.000"]
    counts = count_requests([*writes, write(12.0, "get", "app-2", code=429), write(40.0, "get", "x", code=429)],
                            storms=[(10.0, 11.0)], grace=5.0)
    assert (counts.requests, counts.throttled, counts.throttled_in_storms, counts.writes, counts.processes) == (
        5, 2, 1, 3, 1)


def test_the_approver_reads_the_waiting_plan_its_revision_and_counts() -> None:
    message = ("Approval required for revision main@sha1:0a1b: plan 3f2a9c1b7d04 (1 created, 2 configured, "
               "1 deleted); the approved plan 111111111111 is outdated (a newer revision or new drift), this plan "
               "waits for its own approval; approve with `kustomize-controller approve ...`")
    ks = {"status": {"conditions": [{"type": "Approved", "status": "False", "message": message}]}}
    assert soak.pending_plan(ks) == ("3f2a9c1b7d04", "main@sha1:0a1b", message)
    assert plan_changes(message) == 4
    ks["status"]["conditions"][0]["status"] = "True"
    assert soak.pending_plan(ks) is None


def test_the_soak_plan_groups_and_schedule() -> None:
    plan = soak.SoakPlan(size=300, duration=1800, fault_every=30, seed=38)
    groups = [plan.group(i) for i in range(300)]
    assert (groups.count("manual"), groups.count("suspended"), groups.count("auto")) == (60, 30, 210)
    schedule = plan.schedule()
    assert schedule == soak.SoakPlan(size=300, duration=1800, fault_every=30, seed=38).schedule()
    assert {kind for _, kind in schedule} == set(soak.FAULTS) and all(0 < at < 1800 for at, _ in schedule)
    manual = soak.soak_kustomization(0, "manual")
    assert manual["metadata"]["annotations"] == {"kustomize.toolkit.fluxcd.io/approval": "manual"}
    assert "annotations" not in soak.soak_kustomization(3, "auto")["metadata"]
