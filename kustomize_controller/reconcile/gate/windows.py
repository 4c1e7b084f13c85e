"""Sync windows in Argo CD's model: parse them, and say whether changes may be applied at an instant.

A window is ``kind`` (``allow``/``deny``), ``schedule`` (cron, exactly 5 fields: minute hour
day-of-month month day-of-week), ``duration`` (Go syntax, ``1h30m``, > 0), ``timeZone`` (IANA, default
``UTC``) and ``manualSync`` (default false). It is *active* from each time its schedule fires until
``duration`` later: active at ``now`` when a firing ``t`` has ``t <= now < t + duration``, so a window
whose duration crosses midnight (``0 22 * * *`` for ``10h``) is active until 08:00 the next day.

Time zones: the schedule is read in the window's local time. A firing at a local time that does not
exist (the hour skipped when clocks go forward) happens right after the gap (``30 2 * * *`` fires at
03:00 that day); one at an ambiguous local time (the hour repeated when clocks go back) fires once, at
its first occurrence. ``duration`` is elapsed time, so a ``8h`` window across a change lasts 8 hours.
Cron parsing and iteration are cronsim's (``docs/change-management.md`` says why a library); its
extensions (``L``, ``W``, ``#``) are accepted, descriptors (``@daily``) and seconds are not.

``evaluate(windows, now)`` is Argo CD's ``CanSync``: with no window, changes are allowed; an active deny
window blocks (a manual request passes only when *every* active deny window has ``manualSync``); where
allow windows exist and none is active, changes wait (a manual request passes when any of them has
``manualSync``); deny wins over allow. ``opens_at`` is the first instant, within a year, at which
changes are allowed again (found by stepping over window starts and ends).

Everything here is pure: time comes in as an argument (aware ``datetime``), nothing is read.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from cronsim import CronSim, CronSimError

from kustomize_controller.api.duration import DurationError, format_duration, parse_duration
from kustomize_controller.apply.labelselector import LabelSelector, parse_label_selector

HORIZON = timedelta(days=366)
_MAX_STEPS = 2000
_KEYS = frozenset({"kind", "schedule", "duration", "timeZone", "manualSync"})
_SELECTOR_KEYS = frozenset({"namespaces", "names", "selector"})


class WindowKind(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


class InvalidSyncWindowError(ValueError):
    """A window (or the list holding it) is invalid; the message names the window and its source."""


@dataclass(frozen=True)
class SyncWindow:
    kind: WindowKind
    schedule: str
    duration: timedelta
    time_zone: str
    zone: ZoneInfo = field(compare=False, repr=False)
    manual_sync: bool = False
    source: str = ""  # where it was read, with its index: "annotation ...[0]", "ConfigMap ns/name[2]"
    # fleet windows only: all selectors set must match (globs; a label selector)
    namespaces: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    selector: LabelSelector | None = field(default=None, compare=False)

    def describe(self) -> str:
        manual = ", manualSync" if self.manual_sync else ""
        return (f"{self.kind} window '{self.schedule}' for {format_duration(self.duration)} "
                f"({self.time_zone}{manual}) from {self.source}")

    def selects(self, *, namespace: str, name: str, labels: Mapping[str, str]) -> bool:
        """Whether this (fleet) window applies to the Kustomization ``namespace/name`` with ``labels``."""
        if self.namespaces and not any(fnmatch.fnmatchcase(namespace, g) for g in self.namespaces):
            return False
        if self.names and not any(fnmatch.fnmatchcase(name, g) for g in self.names):
            return False
        return self.selector is None or self.selector.matches(labels)


def parse_windows(text: str, *, source: str, fleet: bool = False) -> list[SyncWindow]:
    """The windows of a YAML or JSON list (module contract); ``fleet`` allows the selector keys."""
    try:
        doc = yaml.safe_load(text) if text.strip() else []
    except yaml.YAMLError as err:
        raise InvalidSyncWindowError(f"sync windows from {source}: not a YAML or JSON list: {err}") from None
    if doc is None:
        doc = []
    if not isinstance(doc, list):
        raise InvalidSyncWindowError(f"sync windows from {source}: expected a list, got {type(doc).__name__}")
    return [parse_window(item, source=f"{source}[{i}]", fleet=fleet) for i, item in enumerate(doc)]


def _strings(value: Any, *, what: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidSyncWindowError(f"sync window {where}: {what} must be a list of non-empty strings")
    return tuple(value)


def parse_window(item: Any, *, source: str, fleet: bool = False) -> SyncWindow:
    """One window from its mapping; ``InvalidSyncWindowError`` names ``source`` and what is wrong."""
    if not isinstance(item, Mapping):
        raise InvalidSyncWindowError(f"sync window {source}: expected a mapping, got {type(item).__name__}")
    allowed = _KEYS | (_SELECTOR_KEYS if fleet else frozenset())
    unknown = sorted(str(k) for k in item if k not in allowed)
    if unknown:
        raise InvalidSyncWindowError(f"sync window {source}: unknown field(s) {', '.join(unknown)}")
    where = f"{source} ({item.get('kind', '?')} '{item.get('schedule', '')}')"
    try:
        kind = WindowKind(str(item.get("kind", "")).strip().lower())
    except ValueError:
        raise InvalidSyncWindowError(f"sync window {where}: kind must be 'allow' or 'deny'") from None
    schedule = str(item.get("schedule") or "").strip()
    if len(schedule.split()) != 5:
        raise InvalidSyncWindowError(f"sync window {where}: schedule must be a cron expression of 5 fields")
    zone_name = str(item.get("timeZone") or "UTC").strip()
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "America" is a directory of the database
        raise InvalidSyncWindowError(f"sync window {where}: unknown time zone {zone_name!r}") from None
    try:
        CronSim(schedule, datetime(2000, 1, 1, tzinfo=zone))
    except CronSimError as err:
        raise InvalidSyncWindowError(f"sync window {where}: invalid schedule: {err}") from None
    raw_duration = item.get("duration")
    if str(raw_duration).strip().startswith("-"):
        raise InvalidSyncWindowError(f"sync window {where}: duration must be positive, got {raw_duration!r}")
    try:
        duration = parse_duration(str(raw_duration)) if raw_duration is not None else None
    except DurationError as err:
        raise InvalidSyncWindowError(f"sync window {where}: invalid duration {raw_duration!r}: {err}") from None
    if duration is None or duration <= timedelta(0):
        raise InvalidSyncWindowError(f"sync window {where}: duration must be positive, got {raw_duration!r}")
    manual = item.get("manualSync", False)
    if not isinstance(manual, bool):
        raise InvalidSyncWindowError(f"sync window {where}: manualSync must be true or false")
    selector = None
    if item.get("selector") is not None:
        try:
            selector = parse_label_selector(str(item["selector"]))
        except ValueError as err:
            raise InvalidSyncWindowError(f"sync window {where}: invalid selector: {err}") from None
    return SyncWindow(
        kind=kind, schedule=schedule, duration=duration, time_zone=zone_name, zone=zone, manual_sync=manual,
        source=source,
        namespaces=_strings(item["namespaces"], what="namespaces", where=where) if "namespaces" in item else (),
        names=_strings(item["names"], what="names", where=where) if "names" in item else (),
        selector=selector,
    )


# --- evaluation (pure) ---------------------------------------------------------------------------


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("an aware datetime is required")
    return moment.astimezone(UTC)


def next_start(window: SyncWindow, after: datetime) -> datetime | None:
    """The first firing strictly after ``after`` (UTC), or None when there is none within the horizon."""
    after = _utc(after)
    try:
        fired = next(CronSim(window.schedule, after.astimezone(window.zone)))
    except StopIteration:
        return None
    fired = _utc(fired)
    return fired if fired - after <= HORIZON else None


def last_start(window: SyncWindow, now: datetime) -> datetime | None:
    """The latest firing ``t`` with ``now - duration < t <= now`` (None: the window is not active)."""
    now = _utc(now)
    try:
        # reverse iteration yields firings strictly before its start: start just after ``now``'s second
        start = now.replace(microsecond=0) + timedelta(seconds=1)
        fired = _utc(next(CronSim(window.schedule, start.astimezone(window.zone), reverse=True)))
    except StopIteration:
        return None
    return fired if now - window.duration < fired <= now else None


def is_active(window: SyncWindow, now: datetime) -> bool:
    return last_start(window, now) is not None


@dataclass(frozen=True)
class WindowState:
    """What the windows say at one instant (module contract)."""

    allowed: bool
    manual_allowed: bool = False  # a manual request may pass while not allowed
    blocking: tuple[SyncWindow, ...] = ()  # the active deny windows, or the inactive allow windows
    opens_at: datetime | None = None  # when changes are allowed again (None: allowed, or not within a year)
    active: tuple[SyncWindow, ...] = ()


def _state_at(windows: Sequence[SyncWindow], now: datetime) -> tuple[bool, bool, tuple[SyncWindow, ...]]:
    active = [w for w in windows if is_active(w, now)]
    denies = tuple(w for w in active if w.kind is WindowKind.DENY)
    if denies:
        return False, all(w.manual_sync for w in denies), denies
    if any(w.kind is WindowKind.ALLOW for w in active):
        return True, True, ()
    inactive_allows = tuple(w for w in windows if w.kind is WindowKind.ALLOW)
    if inactive_allows:
        return False, any(w.manual_sync for w in inactive_allows), inactive_allows
    return True, True, ()


def opens_at(windows: Sequence[SyncWindow], now: datetime) -> datetime | None:
    """The first instant at or after ``now`` at which changes are allowed (None: not within the horizon)."""
    moment = _utc(now)
    limit = moment + HORIZON
    for _ in range(_MAX_STEPS):
        allowed, _, blocking = _state_at(windows, moment)
        if allowed:
            return moment
        # nothing is allowed before every active deny window has ended (each stays active until its end):
        # one step past all of them, not one per firing of the other windows in between (found by fuzzing)
        deny_ends = [started + w.duration for w in blocking if w.kind is WindowKind.DENY
                     if (started := last_start(w, moment)) is not None]
        if deny_ends:
            moment = max(deny_ends)
            if moment > limit:
                return None
            continue
        # the state only changes where a window starts or ends
        candidates: list[datetime] = []
        for window in windows:
            started = last_start(window, moment)
            if started is not None:
                candidates.append(started + window.duration)
            upcoming = next_start(window, moment)
            if upcoming is not None:
                candidates.append(upcoming)
        later = [c for c in candidates if moment < c <= limit]
        if not later:
            return None
        moment = min(later)
    return None


def evaluate(windows: Sequence[SyncWindow], now: datetime) -> WindowState:
    """Whether changes may be applied at ``now`` (module contract)."""
    allowed, manual, blocking = _state_at(windows, now)
    active = tuple(w for w in windows if is_active(w, now))
    if allowed:
        return WindowState(allowed=True, manual_allowed=True, active=active)
    return WindowState(allowed=False, manual_allowed=manual, blocking=blocking, opens_at=opens_at(windows, now),
                       active=active)
