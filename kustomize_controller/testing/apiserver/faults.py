"""Fault injection: make the server fail, stall or refuse the way real clusters sometimes do.

Rules match requests by HTTP method and a regular expression searched in the path (plus, for
``reject_deletes``, by resource/namespace/name). Contract:
- ``fail(...)`` answers the next ``count`` matching requests with a ``Status`` of the given code instead of
  serving them (``count=None``: until removed). Nothing is stored for a failed request.
  ``fail(..., dry_run=False)`` matches only requests that would store (no ``dryRun``), ``dry_run=True``
  only dry-runs: a write refused although its dry-run passed (a webhook that skips dry-runs, a quota).
  ``fail(..., after_store=True)``: the request is served (stored) and its answer replaced by that
  ``Status``, as when etcd committed but the answer was lost (a timeout, a 5xx after the commit); it only
  counts requests that stored something (not a dry-run, not one that failed by itself).
  ``fail(..., drop=True)``: the connection is cut (aborted, no answer at all) instead of answering a
  ``Status``: a connection lost before the request was served (nothing stored) or, with ``after_store``,
  after the commit. The client sees a broken connection, not an HTTP error; the log records 499.
- ``delay(...)`` adds latency before matching requests are served.
- ``reject_deletes(...)`` refuses DELETEs of matching objects with 403 and the message shape of an
  admission webhook denial; the object is left untouched.
- Rules are checked in the order they were added; the first matching ``fail`` rule wins. ``clear()``
  removes every rule. Watches are closed and history compacted through ``ApiServer`` (they act on state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiStatusError, status_for_code


@dataclass
class _Rule:
    method: str | None
    path: re.Pattern[str] | None
    remaining: int | None

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.method is not None and self.method != method:
            return False
        return self.path is None or self.path.search(path) is not None


@dataclass
class FailRule(_Rule):
    error: ApiStatusError = field(kw_only=True)
    dry_run: bool | None = field(default=None, kw_only=True)  # None: either; else only (not) dry-runs
    hits: int = field(default=0, kw_only=True)
    after_store: bool = field(default=False, kw_only=True)
    drop: bool = field(default=False, kw_only=True)  # cut the connection instead of answering ``error``

    def matches_request(self, method: str, path: str, *, dry_run: bool) -> bool:
        return (self.dry_run is None or self.dry_run == dry_run) and self.matches(method, path)


@dataclass
class DelayRule(_Rule):
    seconds: float = field(kw_only=True)


@dataclass
class DeleteRejection:
    resource: str | None
    namespace: str | None
    name: str | None
    webhook: str
    message: str
    hits: int = field(default=0)


class FaultInjector:
    def __init__(self) -> None:
        self._fail: list[FailRule] = []
        self._delay: list[DelayRule] = []
        self._deletes: list[DeleteRejection] = []

    def fail(self, *, method: str | None = None, path: str | None = None, status: int = 500,
             count: int | None = 1, message: str | None = None, reason: str | None = None,
             details: dict[str, Any] | None = None, after_store: bool = False,
             dry_run: bool | None = None, drop: bool = False) -> FailRule:
        error = status_for_code(status, message or f"injected failure ({status})")
        if reason is not None:
            error.reason = reason
        if details is not None:
            error.details = details
        if status == 429 and error.details is None:
            error.details = {"retryAfterSeconds": 1}
        rule = FailRule(method.upper() if method else None, re.compile(path) if path else None, count,
                        error=error, after_store=after_store, dry_run=dry_run, drop=drop)
        self._fail.append(rule)
        return rule

    def delay(self, seconds: float, *, method: str | None = None, path: str | None = None,
              count: int | None = None) -> DelayRule:
        rule = DelayRule(method.upper() if method else None, re.compile(path) if path else None, count,
                         seconds=seconds)
        self._delay.append(rule)
        return rule

    def reject_deletes(self, *, resource: str | None = None, namespace: str | None = None,
                       name: str | None = None, webhook: str = "deny-delete.testing.local",
                       message: str = "deletion is not allowed") -> DeleteRejection:
        rule = DeleteRejection(resource, namespace, name, webhook, message)
        self._deletes.append(rule)
        return rule

    def clear(self) -> None:
        self._fail.clear()
        self._delay.clear()
        self._deletes.clear()

    def rule_for(self, method: str, path: str, *, stored: bool = False, dry_run: bool = False) -> FailRule | None:
        """The first matching rule, counted as hit: before serving (``stored`` False), or in place of the
        answer of a request that stored something (``stored`` True, ``after_store`` rules)."""
        for rule in self._fail:
            if rule.after_store == stored and rule.matches_request(method, path, dry_run=dry_run):
                if rule.remaining is not None:
                    rule.remaining -= 1
                rule.hits += 1
                return rule
        return None

    def latency_for(self, method: str, path: str) -> float:
        total = 0.0
        for rule in self._delay:
            if rule.matches(method, path):
                if rule.remaining is not None:
                    rule.remaining -= 1
                total += rule.seconds
        return total

    def check_delete(self, resource: str, namespace: str, name: str) -> None:
        for rule in self._deletes:
            if ((rule.resource is None or rule.resource == resource)
                    and (rule.namespace is None or rule.namespace == namespace)
                    and (rule.name is None or rule.name == name)):
                rule.hits += 1
                raise ApiStatusError(403, "Forbidden",
                                     f'admission webhook "{rule.webhook}" denied the request: {rule.message}')
