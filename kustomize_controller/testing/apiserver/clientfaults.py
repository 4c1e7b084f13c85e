"""Faults aimed at one client, told apart by its user name: the process dies right after a write, a watch
event never reaches it, its watches are served by a cache that lags behind etcd. Built for fault-injection
tests of a controller (Sieve's *intermediate*, *unobserved* and *stale* states); plain ``faults.py`` rules
hit every client alike.

Contract (every rule is about one user; nothing here touches other users' requests):
- ``crash_after(user, writes=k, on_crash=...)``: the ``k``-th successful, non-dry-run write by ``user`` to a
  resource outside ``ignore`` (by default Leases and Events: their timing is the clock's, not the
  reconcile's) is stored; then the user is cut off before it reads the answer, as a SIGKILLed process is:
  every connection it has open (requests in flight, watch streams) is aborted, and from then on every
  request it makes is dropped unserved (connection aborted, nothing stored). ``on_crash`` runs once, at
  once (a test cancels the controller there; whatever the cancelled code still sends is dropped).
  ``cut_off(user)`` does the cutting alone.
- ``drop_event(user, index=i, then="close"|"expire")``: the ``i``-th event (1-based, counted over all the
  user's watch streams; BOOKMARKs and the synthetic ADDEDs of a ``resourceVersion=0`` watch are not
  counted) is not delivered. ``close``: the stream ends cleanly just before it, as a dropped connection
  does (a reflector re-watches from the last resourceVersion it saw and gets the event then).
  ``expire``: the stream ends with a 410 Expired ERROR in its place, as when the server's history no
  longer holds it (a reflector relists: the object's current state is seen, the event's own state and any
  intermediate one never are, a deletion arrives as a tombstone). A real server never drops an event
  silently from an open stream, so neither does this.
- ``lag(user, writes=n, seconds=t, resources=None)``: the user's watches (of ``resources``, plurals; None:
  all) are served from a watch cache ``n`` writes behind etcd (after an API server fail-over, say; a real
  server has one cache per resource, each lagging on its own): an event is held until ``n`` further writes
  have been stored or ``t`` seconds have passed since it was first offered, whichever comes first —
  delayed, never reordered or lost, as a cache that catches up. The streams send no BOOKMARK (its resourceVersion would
  overtake held events). LIST and GET with ``resourceVersion=0`` (which a real server answers from its
  watch cache) see the state ``n`` writes ago (bounded by the history kept), and so does the initial list
  of a ``resourceVersion=0`` watch (the events since follow, held as above); a consistent read
  (``resourceVersion`` unset) is current, as a real server's is (from etcd, or from a cache that first
  catches up).
- ``on_write(user, writes=k, callback=...)``: ``callback`` runs once, right after the ``k``-th write counted
  as ``crash_after`` counts them (stored and answered as usual: nothing is cut). A test uses it to start
  another fault at an exact point of the client's work (a partition of its lease renewals, say).
- ``hold(user, path=..., method=..., writes_only=..., seconds=t)``: the user's requests whose path matches
  the regular expression (searched) are held ``t`` seconds before they are served, as over a slow link;
  ``seconds=None`` never serves them: each waits until the client gives up (its timeout, a cancelled
  request) and is dropped unserved — a partition between that client and the API server for those
  requests. ``writes_only`` holds only writes that would store (no dry-run). A request held when the user is
  cut off (``crash_after``) is dropped. ``release(user)`` ends every hold of the user (requests held by a
  partition stay dropped: their clients have given up or will).
- ``stats(user)`` counts what was done: writes, events delivered, dropped and held, stale reads, requests
  held by ``hold`` (``delayed``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .requestlog import WRITE_VERBS

Then = Literal["close", "expire"]
DELIVER, CLOSE, EXPIRE = "deliver", "close", "expire"
DEFAULT_IGNORED = frozenset({"leases", "events"})


@dataclass
class ClientStats:
    writes: int = 0
    events: int = 0
    dropped: int = 0
    held: int = 0
    stale_reads: int = 0
    cut_requests: int = 0
    delayed: int = 0


@dataclass(frozen=True)
class _Hold:
    path: re.Pattern[str] | None
    method: str | None
    writes_only: bool
    seconds: float | None  # None: never served

    def matches(self, method: str, path: str, *, dry_run: bool) -> bool:
        if self.method is not None and self.method != method:
            return False
        if self.writes_only and (method in ("GET", "HEAD") or dry_run):
            return False
        return self.path is None or self.path.search(path) is not None


@dataclass
class _Rules:
    crash_at: int | None = None
    on_crash: Callable[[], None] | None = None
    ignore: frozenset[str] = DEFAULT_IGNORED
    drop_at: int | None = None
    then: Then = "close"
    lag_writes: int = 0
    lag_seconds: float = 0.0
    lag_resources: frozenset[str] | None = None
    notify_at: int | None = None
    on_write: Callable[[], None] | None = None
    holds: list[_Hold] = field(default_factory=list)
    cut: bool = False
    stats: ClientStats = field(default_factory=ClientStats)
    # open connections (asyncio transports) and watch-stream closers, cut at a crash
    transports: set[asyncio.Transport] = field(default_factory=set)
    closers: set[Callable[[], None]] = field(default_factory=set)

    def lags(self, resource: str) -> bool:
        return self.lag_writes > 0 and (self.lag_resources is None or resource in self.lag_resources)


class WatchTap:
    """What one watch stream of a faulted user asks before sending each event (see the module contract)."""

    def __init__(self, rules: _Rules, resource: str, current_rv: Callable[[], int]) -> None:
        self._rules = rules
        self._lags = rules.lags(resource)
        self._current_rv = current_rv
        self._first_offered: dict[int, float] = {}

    @property
    def bookmarks(self) -> bool:
        return not self._lags

    def _behind_cut(self) -> bool:
        return self._rules.cut  # the client crashed while an event was held

    def _behind(self, rv: int, first: float) -> bool:
        rules = self._rules
        return (not rules.cut and self._current_rv() < rv + rules.lag_writes
                and time.monotonic() - first < rules.lag_seconds)

    async def before(self, rv: int) -> str:
        rules = self._rules
        if rules.cut:
            return CLOSE
        if self._lags:
            first = self._first_offered.setdefault(rv, time.monotonic())
            if self._behind(rv, first):
                rules.stats.held += 1
                while True:  # the cache catches up with the writes (polled: a test utility)
                    await asyncio.sleep(0.01)
                    if not self._behind(rv, first):
                        break
            self._first_offered.pop(rv, None)
            if self._behind_cut():
                return CLOSE
        rules.stats.events += 1
        if rules.drop_at is not None and rules.stats.events == rules.drop_at:
            rules.stats.dropped += 1
            return EXPIRE if rules.then == "expire" else CLOSE
        return DELIVER


class ClientFaults:
    def __init__(self) -> None:
        self._rules: dict[str, _Rules] = {}

    def _for(self, user: str) -> _Rules:
        rules = self._rules.get(user)
        if rules is None:
            rules = self._rules[user] = _Rules()
        return rules

    # arming ---------------------------------------------------------------------------------------

    def crash_after(self, user: str, *, writes: int, on_crash: Callable[[], None] | None = None,
                    ignore: frozenset[str] = DEFAULT_IGNORED) -> None:
        if writes < 1:
            raise ValueError("crash_after: writes counts from 1")
        rules = self._for(user)
        rules.crash_at, rules.on_crash, rules.ignore = writes, on_crash, ignore

    def drop_event(self, user: str, *, index: int, then: Then = "close") -> None:
        if index < 1:
            raise ValueError("drop_event: index counts from 1")
        rules = self._for(user)
        rules.drop_at, rules.then = index, then

    def lag(self, user: str, *, writes: int, seconds: float, resources: frozenset[str] | None = None) -> None:
        rules = self._for(user)
        rules.lag_writes, rules.lag_seconds, rules.lag_resources = writes, seconds, resources

    def on_write(self, user: str, *, writes: int, callback: Callable[[], None]) -> None:
        if writes < 1:
            raise ValueError("on_write: writes counts from 1")
        rules = self._for(user)
        rules.notify_at, rules.on_write = writes, callback

    def hold(self, user: str, *, path: str | None = None, method: str | None = None, writes_only: bool = False,
             seconds: float | None = None) -> None:
        self._for(user).holds.append(_Hold(re.compile(path) if path else None, method.upper() if method else None,
                                           writes_only, seconds))

    def release(self, user: str) -> None:
        self._for(user).holds.clear()

    def watch(self, user: str) -> None:
        """Count ``user``'s writes and events without faulting it (for a fault-free recording)."""
        self._for(user)

    def cut_off(self, user: str) -> None:
        rules = self._for(user)
        if rules.cut:
            return
        rules.cut = True
        for transport in list(rules.transports):
            transport.abort()
        rules.transports.clear()
        for close in list(rules.closers):
            close()
        rules.closers.clear()

    def stats(self, user: str) -> ClientStats:
        return self._for(user).stats

    def clear(self) -> None:
        self._rules.clear()

    # hooks for the server -------------------------------------------------------------------------

    def is_cut(self, user: str) -> bool:
        rules = self._rules.get(user)
        if rules is not None and rules.cut:
            rules.stats.cut_requests += 1
            return True
        return False

    async def held(self, user: str, method: str, path: str, *, dry_run: bool,
                   transport: asyncio.Transport | None) -> bool:
        """Hold a request of ``user`` as its ``hold`` rules say; False when it must be dropped unserved
        (never to be served, or the user was cut off meanwhile)."""
        rules = self._rules.get(user)
        if rules is None:
            return True
        hold = next((h for h in rules.holds if h.matches(method, path, dry_run=dry_run)), None)
        if hold is None:
            return True
        rules.stats.delayed += 1
        if hold.seconds is not None:
            await asyncio.sleep(hold.seconds)
        else:  # a partition: never served; wait for the client to give up (polled: a test utility)
            while True:
                if transport is None or transport.is_closing() or hold not in rules.holds or rules.cut:
                    return False
                await asyncio.sleep(0.05)
        return not rules.cut

    def track(self, user: str, transport: asyncio.Transport | None) -> bool:
        """Remember an open connection of a faulted user (to cut at a crash); False when not faulted."""
        rules = self._rules.get(user)
        if rules is None or transport is None:
            return False
        rules.transports.add(transport)
        return True

    def untrack(self, user: str, transport: asyncio.Transport | None) -> None:
        rules = self._rules.get(user)
        if rules is not None and transport is not None:
            rules.transports.discard(transport)

    def served(self, user: str, *, verb: str, resource: str, status: int, dry_run: bool) -> None:
        """A request of ``user`` was answered: count a write, crash after the armed one."""
        rules = self._rules.get(user)
        if rules is None or rules.cut or verb not in WRITE_VERBS or dry_run or status >= 400:
            return
        if resource in rules.ignore:
            return
        rules.stats.writes += 1
        if rules.notify_at is not None and rules.stats.writes >= rules.notify_at and rules.on_write is not None:
            callback, rules.on_write = rules.on_write, None
            callback()
        if rules.crash_at is not None and rules.stats.writes >= rules.crash_at:
            self.cut_off(user)
            if rules.on_crash is not None:
                rules.on_crash()

    def tap(self, user: str, resource: str, current_rv: Callable[[], int], close: Callable[[], None]
            ) -> WatchTap | None:
        rules = self._rules.get(user)
        if rules is None:
            return None
        rules.closers.add(close)
        return WatchTap(rules, resource, current_rv)

    def untap(self, user: str, close: Callable[[], None]) -> None:
        rules = self._rules.get(user)
        if rules is not None:
            rules.closers.discard(close)

    def stale_resource_version(self, user: str, resource: str, current: int, oldest: int) -> int | None:
        """The resourceVersion a ``resourceVersion=0`` read of ``user`` is answered at (None: current)."""
        rules = self._rules.get(user)
        if rules is None or not rules.lags(resource):
            return None
        rules.stats.stale_reads += 1
        return max(oldest, current - rules.lag_writes)
