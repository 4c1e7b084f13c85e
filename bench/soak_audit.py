"""What the API server's audit log proves after the soak (bench/soak.py): pure functions over its events.

kube-apiserver writes one JSON line per request (``--audit-log-format=json``, stage ``ResponseComplete``;
``ResponseStarted`` too for watches): who (``user.username``; for a ServiceAccount token, which token in
``user.extra["authentication.kubernetes.io/credential-id"]``: the soak gives each controller process its
own), what (``verb``, ``objectRef``, ``requestURI`` with ``dryRun=All`` for a dry-run), when
(``requestReceivedTimestamp``) and the answer (``responseStatus.code``); with the soak's policy, also the
body (``requestObject``) of every write to the objects of the manual and suspended Kustomizations, and of
every DELETE (a dry-run DELETE says so in its body's ``DeleteOptions``, not in its query).

The checks:

- ``unapproved_writes``: every write the controller made to an object of a Kustomization with
  ``approval: manual`` must be allowed by an approval the soak gave *before* the request reached the server:
  one for a revision whose content is exactly what the write carries (a delete: an object that revision
  does not hold). An approval allows one write per object — a second write of the same object needs
  another approval (a drift correction after the approved apply, a revert) — and all the writes of one
  approval come from one controller process: an approved apply that wrote something and died used its
  approval up, and the restarted process must wait for a new one (docs/change-management.md).
- ``writes_while_suspended``: no write of the controller to an object of a suspended Kustomization
  between the suspension and the resumption.
- ``count_requests``: the controller's requests, 429s (inside and outside the storms), writes, watches.

A write that returned an error is not a write (a 429 from priority and fairness, a 409, a 422: nothing
stored); a write whose answer was cut off (a reset connection) is in the log with the code the server
meant to send. Events lost with a crashed API server (the batch not yet written) are simply absent:
the checks can miss a write, never invent one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
KINDS = {"configmaps": "ConfigMap", "serviceaccounts": "ServiceAccount"}
_APP_OBJECT = re.compile(r"^app-(\d+)(?:-r\d+|-sa\d+)?$")

# (app, rev) -> {(kind, name): data}: what a revision of an app holds (bench/chaos.expected_objects)
Desired = Callable[[int, int], dict[tuple[str, str], dict[str, str]]]


def timestamp(text: str) -> float:
    """An audit timestamp (RFC 3339, UTC, microseconds) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Request:
    at: float  # requestReceivedTimestamp
    user: str
    credential: str  # the token's id (one per controller process); "" when none
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    dry_run: bool
    body: Any = None  # requestObject, where the policy logs it

    @property
    def is_write(self) -> bool:
        return self.verb in WRITE_VERBS and not self.dry_run and 200 <= self.code < 300


def parse_event(event: dict[str, Any]) -> Request | None:
    """One audit event as a ``Request``; None for stages other than ``ResponseComplete``."""
    if event.get("stage") != "ResponseComplete":
        return None
    user = event.get("user") or {}
    ref = event.get("objectRef") or {}
    extra = user.get("extra") or {}
    credential = ",".join(extra.get(CREDENTIAL_ID) or [])
    return Request(
        at=timestamp(event["requestReceivedTimestamp"]), user=str(user.get("username", "")), credential=credential,
        verb=str(event.get("verb", "")), resource=str(ref.get("resource", "")),
        subresource=str(ref.get("subresource", "")), namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")), code=int((event.get("responseStatus") or {}).get("code", 0)),
        dry_run=_dry_run(event), body=event.get("requestObject"),
    )


def _dry_run(event: dict[str, Any]) -> bool:
    """A dry-run: ``dryRun=All`` in the query, or (a DELETE's) in the body's DeleteOptions — which the log
    shows only where the policy logs request bodies."""
    if "dryRun=All" in str(event.get("requestURI", "")):
        return True
    body = event.get("requestObject")
    return isinstance(body, dict) and body.get("kind") == "DeleteOptions" and "All" in (body.get("dryRun") or [])


def read_audit(path: Path, *, user: str) -> Iterator[Request]:
    """The requests of ``user`` in the audit log at ``path`` (a line cut short by a crash is skipped)."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if f'"{user}"' not in line:  # cheap filter before the JSON parse
                continue
            try:
                request = parse_event(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
            if request is not None and request.user == user:
                yield request


@dataclass(frozen=True)
class Approval:
    """An approval the soak gave: ``sent_at`` is just before its patch left (nothing it allows can come
    earlier); ``rev`` the soak's revision number of the revision the plan was for; ``changes`` the plan's
    count of writes (its message: ``plan <id> (2 created, 1 deleted)``), 0 when unknown."""

    app: int
    sent_at: float
    plan: str
    rev: int
    token: str
    changes: int = 0


_COUNTS = re.compile(r"\bplan [0-9a-f]{12} \(([^)]*)\)")


def plan_changes(message: str) -> int:
    """The number of writes a plan's description in a condition message counts (0 when it has none)."""
    found = _COUNTS.search(message or "")
    if found is None:
        return 0
    return sum(int(n) for n in re.findall(r"(\d+) (?:created|configured|recreated|deleted)", found.group(1)))


def app_of(name: str) -> int | None:
    found = _APP_OBJECT.match(name)
    return int(found.group(1)) if found else None


def _allows(approval: Approval, write: Request, desired: Desired) -> bool:
    kind = KINDS.get(write.resource, "")
    holds = desired(approval.app, approval.rev)
    if write.verb == "delete":
        return (kind, write.name) not in holds
    if (kind, write.name) not in holds:
        return False
    data = write.body.get("data") if isinstance(write.body, dict) else None
    # a body without data (a ServiceAccount, a metadata-only patch) is allowed by the object's existence
    return data is None or data == holds[(kind, write.name)]


@dataclass
class Matching:
    violations: list[str] = field(default_factory=list)
    matched: int = 0  # writes allowed by an approval
    approvals_used: int = 0  # approvals that allowed at least one write


def unapproved_writes(writes: Iterable[Request], approvals: Iterable[Approval], *, namespace: str,
                      desired: Desired) -> Matching:
    """Match every write to an object of ``namespace`` (the manual Kustomizations' objects), in the order the
    server received them, with the earliest approval given before it that allows it (its content), is not
    yet spent on that object, has writes left (its plan's count) and was used by no other controller
    process; what cannot be matched is a violation, named ``verb Kind/namespace/name at <time>: why``.

    An approval is taken to allow the objects of its revision: a write of an object the revision holds but
    the plan did not change would be counted against the plan's count, not recognised by name."""
    by_app: dict[int, list[Approval]] = {}
    for approval in sorted(approvals, key=lambda a: a.sent_at):
        by_app.setdefault(approval.app, []).append(approval)
    spent: dict[Approval, set[tuple[str, str]]] = {}  # the objects each approval allowed a write of
    process: dict[Approval, str] = {}  # the credential of the controller process that used it
    out = Matching()
    for write in sorted((w for w in writes if w.is_write and w.namespace == namespace), key=lambda w: w.at):
        kind = KINDS.get(write.resource, write.resource)
        subject = f"{write.verb} {kind}/{write.namespace}/{write.name} at {write.at:.3f}"
        app = app_of(write.name)
        if app is None:
            out.violations.append(f"{subject}: not an object of any app")
            continue
        earlier = [a for a in by_app.get(app, []) if a.sent_at < write.at]
        allowing = [a for a in earlier if _allows(a, write, desired)]
        free = [a for a in allowing if (kind, write.name) not in spent.get(a, set())
                and (not a.changes or len(spent.get(a, ())) < a.changes)]
        same = [a for a in free if process.get(a, write.credential) == write.credential]
        if not earlier:
            why = "no approval given before it"
        elif not allowing:
            why = f"its content is in no approved revision (approved: {sorted({a.rev for a in earlier})})"
        elif not free:
            why = f"the {len(allowing)} approval(s) of its content were used up (this object, or the plan's count)"
        elif not same:
            why = f"the approval of plan {free[0].plan} was used by another controller process"
        else:
            approval = same[0]
            if approval not in process:
                out.approvals_used += 1
            process[approval] = write.credential
            spent.setdefault(approval, set()).add((kind, write.name))
            out.matched += 1
            continue
        out.violations.append(f"{subject}: {why}")
    return out


def writes_while_suspended(writes: Iterable[Request], *, namespace: str, since: float, until: float) -> list[str]:
    """Writes to an object of ``namespace`` (the suspended Kustomizations') between ``since`` and ``until``."""
    return [f"{w.verb} {KINDS.get(w.resource, w.resource)}/{w.namespace}/{w.name} at {w.at:.3f}"
            for w in writes if w.is_write and w.namespace == namespace and since < w.at < until]


@dataclass
class Counts:
    requests: int = 0
    throttled: int = 0  # 429 answers
    throttled_in_storms: int = 0
    writes: int = 0
    watches: int = 0
    processes: int = 0  # distinct credentials seen (one per controller process that reached the server)
    by_code: dict[int, int] = field(default_factory=dict)


def count_requests(requests: Iterable[Request], *, storms: list[tuple[float, float]], grace: float = 5.0) -> Counts:
    """The controller's requests; a 429 counts as in a storm from its start to ``grace`` s after its end
    (the API server takes its configuration from an informer: it switches a moment late)."""
    out = Counts()
    credentials: set[str] = set()
    for r in requests:
        out.requests += 1
        out.by_code[r.code] = out.by_code.get(r.code, 0) + 1
        credentials.add(r.credential)
        if r.code == 429:
            out.throttled += 1
            if any(start <= r.at <= end + grace for start, end in storms):
                out.throttled_in_storms += 1
        if r.is_write:
            out.writes += 1
        if r.verb == "watch":
            out.watches += 1
    out.processes = len(credentials - {""})
    return out
