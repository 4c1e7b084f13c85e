"""Requests per client from a kube-apiserver audit log: what each controller asked of the API server.

The real control plane (``tests/controlplane``) writes every request at ``Metadata`` level as one JSON line
(``audit.jsonl``), with the authenticated user, the verb, the object's resource and subresource and the
request URI. The side-by-side bench gives each controller a user of its own and reads, for one phase of a
run (between two byte offsets of the log), how many requests each user made and of what kind.

A request is counted once: a plain request has one event (``ResponseComplete``); a watch has one when its
response starts and another when it ends, possibly phases later, so watches are counted by ``auditID``, the
first time one is seen. Kinds read as the controller's own metrics do (``bench.procs.requests_by_kind``):
``get configmaps``, ``patch (dry-run) deployments``, ``patch kustomizations/status``, ``get (discovery)``
for the non-resource paths (``/api``, ``/apis``, ``/openapi/...``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Requests:
    """One user's requests in one stretch of the log."""

    total: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    by_code: Counter[int] = field(default_factory=Counter)

    def add(self, other: Requests) -> None:
        self.total += other.total
        self.by_kind.update(other.by_kind)
        self.by_code.update(other.by_code)


def kind_of(event: dict[str, Any]) -> str:
    """``verb[ (dry-run)] resource[/subresource]``, or ``verb (discovery)`` for a non-resource path."""
    verb = str(event.get("verb", "?"))
    ref = event.get("objectRef") or {}
    resource = ref.get("resource")
    if not resource:
        return f"{verb} (discovery)"
    dry = " (dry-run)" if "dryRun=All" in str(event.get("requestURI", "")) else ""
    sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
    return f"{verb}{dry} {resource}{sub}"


# The other clients of the API server, as the bench reports them: the controller manager (its controllers use
# service accounts of kube-system, as ``--use-service-account-credentials`` makes them), the API server itself,
# and everyone else (the bench's driver: the workload, its watch on the Kustomizations).
OTHERS = ("kube-controller-manager", "kube-apiserver", "others")
_COMPLETE = b'"stage":"ResponseComplete"'


def other_client(line: bytes) -> str:
    """Which of :data:`OTHERS` made the request on this audit line (read from the bytes, not parsed)."""
    start = line.find(b'"username":"')
    name = line[start + 12:line.find(b'"', start + 12)] if start >= 0 else b""
    if name.startswith((b"system:serviceaccount:kube-system:", b"system:kube-controller-manager")):
        return OTHERS[0]
    if name == b"system:apiserver":
        return OTHERS[1]
    return OTHERS[2]


class AuditLog:
    """Reads the requests of ``users`` from the audit log at ``path``, one stretch at a time.

    ``take()`` counts, per user, the requests logged since the previous ``take()`` (the first one: since the
    log began) up to the last complete line, and moves on past them. Lines are filtered by the user's name
    before they are parsed, so the controller manager's and the API server's own requests cost the reader
    little."""

    def __init__(self, path: Path, users: Iterable[str]) -> None:
        self.path = path
        self.users = tuple(users)
        self._needles = {user: f'"username":"{user}"'.encode() for user in self.users}
        self._watches: set[str] = set()
        self._offset = 0

    def take(self) -> dict[str, Requests]:
        """Per user of ``users``, and under :data:`OTHERS` the totals of every other client (by
        :func:`other_client`), not broken down: what the API server served besides the controller."""
        out = {user: Requests() for user in [*self.users, *OTHERS]}
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return out
        end = data.rfind(b"\n") + 1  # a line still being written is left for the next stretch
        self._offset += end
        for line in data[:end].splitlines():
            for user, needle in self._needles.items():
                if needle in line:
                    self._count(out[user], json.loads(line))
                    break
            else:
                if _COMPLETE in line:  # a watch of another client once, when it ends
                    out[other_client(line)].total += 1
        return out

    def _count(self, into: Requests, event: dict[str, Any]) -> None:
        if event.get("verb") == "watch" or event.get("stage") == "ResponseStarted":
            audit_id = str(event.get("auditID", ""))
            if audit_id in self._watches:
                return
            self._watches.add(audit_id)
        into.total += 1
        into.by_kind[kind_of(event)] += 1
        code = (event.get("responseStatus") or {}).get("code")
        if isinstance(code, int):
            into.by_code[code] += 1
