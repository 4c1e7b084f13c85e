"""Sync windows: parsing errors name the window, activity across midnight and DST changes, Argo CD's rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from kustomize_controller.reconcile.gate.windows import (
    InvalidSyncWindowError,
    SyncWindow,
    evaluate,
    is_active,
    next_start,
    opens_at,
    parse_window,
    parse_windows,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def window(kind: str = "deny", schedule: str = "0 22 * * *", duration: str = "10h", tz: str = "UTC",
           manual: bool = False) -> SyncWindow:
    return parse_window({"kind": kind, "schedule": schedule, "duration": duration, "timeZone": tz,
                         "manualSync": manual}, source="test[0]")


def at(year: int, month: int, day: int, hour: int, minute: int = 0, tz: ZoneInfo | None = None) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=tz or UTC)


# --- parsing -------------------------------------------------------------------------------------


def test_yaml_and_json_lists_parse_the_same() -> None:
    yaml_text = "- kind: deny\n  schedule: '0 16 * * 5'\n  duration: 64h\n  timeZone: Europe/Berlin\n"
    json_text = '[{"kind": "deny", "schedule": "0 16 * * 5", "duration": "64h", "timeZone": "Europe/Berlin"}]'
    assert parse_windows(yaml_text, source="a") == parse_windows(json_text, source="a")
    (only,) = parse_windows(yaml_text, source="a")
    assert only.duration == timedelta(hours=64) and not only.manual_sync and only.source == "a[0]"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"kind": "maybe", "schedule": "* * * * *", "duration": "1h"}, "kind must be 'allow' or 'deny'"),
        ({"kind": "deny", "schedule": "61 * * * *", "duration": "1h"}, "invalid schedule"),
        ({"kind": "deny", "schedule": "0 0 * * * *", "duration": "1h"}, "5 fields"),
        ({"kind": "deny", "schedule": "@daily", "duration": "1h"}, "5 fields"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "-1h"}, "duration must be positive"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "0s"}, "duration must be positive"),
        ({"kind": "deny", "schedule": "0 1 * * *"}, "duration must be positive"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "soon"}, "invalid duration"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "1h", "timeZone": "Mars/Olympus"},
         "unknown time zone 'Mars/Olympus'"),
        # found by fuzzing: a directory of the zone database (IsADirectoryError) or a name too long for the
        # file system (ENAMETOOLONG) raised OSError out of the parser
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "1h", "timeZone": "America"},
         "unknown time zone 'America'"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "1h", "timeZone": "Europe/" + "x" * 300},
         "unknown time zone 'Europe/xxx"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "1h", "manualSync": "yes"}, "manualSync"),
        ({"kind": "deny", "schedule": "0 1 * * *", "duration": "1h", "namespaces": ["x"]}, "unknown field"),
    ],
)
def test_invalid_windows_name_the_window_and_its_source(item: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidSyncWindowError) as err:
        parse_windows(__import__("json").dumps([item]), source="Kustomization/apps/web annotation")
    assert expected in str(err.value)
    assert "Kustomization/apps/web annotation[0]" in str(err.value)


def test_not_a_list_is_an_error() -> None:
    with pytest.raises(InvalidSyncWindowError, match="expected a list"):
        parse_windows("kind: deny", source="a")
    with pytest.raises(InvalidSyncWindowError, match="not a YAML or JSON list"):
        parse_windows("[{", source="a")
    assert parse_windows("", source="a") == []


def test_fleet_windows_select_by_globs_and_labels() -> None:
    (w,) = parse_windows(
        "- {kind: deny, schedule: '0 16 * * 5', duration: 64h, namespaces: ['prod-*'], names: ['web*', 'api'],"
        " selector: 'tier=frontend'}", source="cm", fleet=True)
    assert w.selects(namespace="prod-eu", name="web-1", labels={"tier": "frontend"})
    assert not w.selects(namespace="staging", name="web-1", labels={"tier": "frontend"})
    assert not w.selects(namespace="prod-eu", name="worker", labels={"tier": "frontend"})
    assert not w.selects(namespace="prod-eu", name="api", labels={"tier": "backend"})
    (everyone,) = parse_windows("- {kind: deny, schedule: '0 16 * * 5', duration: 1h}", source="cm", fleet=True)
    assert everyone.selects(namespace="any", name="thing", labels={})


# --- activity ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "active"),
    [
        (at(2026, 6, 1, 21, 59), False),
        (at(2026, 6, 1, 22, 0), True),  # starts at the firing
        (at(2026, 6, 1, 23, 59), True),
        (at(2026, 6, 2, 0, 0), True),  # across midnight
        (at(2026, 6, 2, 7, 59), True),
        (at(2026, 6, 2, 8, 0), False),  # ends exactly duration later
        (at(2026, 6, 2, 12, 0), False),
    ],
)
def test_a_window_across_midnight(now: datetime, active: bool) -> None:
    assert is_active(window(schedule="0 22 * * *", duration="10h"), now) is active


def test_a_window_longer_than_its_period_stays_active() -> None:
    w = window(schedule="0 * * * *", duration="90m")
    assert all(is_active(w, at(2026, 6, 1, 10, m)) for m in range(0, 60, 7))


def test_schedule_is_read_in_the_window_time_zone() -> None:
    w = window(schedule="0 9 * * 1-5", duration="8h", tz="America/New_York")
    # 09:00 EDT is 13:00 UTC in June
    assert not is_active(w, at(2026, 6, 1, 12, 59))
    assert is_active(w, at(2026, 6, 1, 13, 0))
    assert is_active(w, at(2026, 6, 1, 20, 59))
    assert not is_active(w, at(2026, 6, 1, 21, 0))
    # in January (EST) the same window starts an hour later in UTC
    assert not is_active(w, at(2026, 1, 5, 13, 30))
    assert is_active(w, at(2026, 1, 5, 14, 0))


def test_spring_forward_a_firing_in_the_skipped_hour_happens_right_after_it() -> None:
    # Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC)
    w = window(schedule="30 2 * * *", duration="1h", tz="Europe/Berlin")
    assert next_start(w, at(2026, 3, 28, 12, 0)) == at(2026, 3, 29, 1, 0)  # 03:00 CEST
    assert is_active(w, at(2026, 3, 29, 3, 0, tz=BERLIN))
    assert not is_active(w, at(2026, 3, 29, 4, 0, tz=BERLIN))  # duration is elapsed time
    # the next day it fires at 02:30 CEST again
    assert next_start(w, at(2026, 3, 29, 12, 0)) == at(2026, 3, 30, 0, 30)


def test_fall_back_a_firing_in_the_repeated_hour_happens_once() -> None:
    # Europe/Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice
    w = window(schedule="30 2 * * *", duration="30m", tz="Europe/Berlin")
    first = next_start(w, at(2026, 10, 24, 12, 0))
    assert first == at(2026, 10, 25, 0, 30)  # 02:30 CEST
    assert next_start(w, first) == at(2026, 10, 26, 1, 30)  # not the second 02:30 (01:30 UTC that day)
    assert is_active(w, at(2026, 10, 25, 0, 45))
    assert not is_active(w, at(2026, 10, 25, 1, 45))  # the repeated 02:45 CET


def test_an_8h_window_across_a_dst_change_lasts_8_hours() -> None:
    # New York, 2026-11-01: 02:00 EDT goes back to 01:00 EST
    w = window(schedule="0 22 * * *", duration="8h", tz="America/New_York")
    start = at(2026, 10, 31, 22, 0, tz=NEW_YORK).astimezone(UTC)  # elapsed-time arithmetic is done in UTC
    assert is_active(w, start + timedelta(hours=7, minutes=59))
    assert not is_active(w, start + timedelta(hours=8))
    # the wall clock then reads 05:00, not 06:00
    assert (start + timedelta(hours=8)).astimezone(NEW_YORK).hour == 5


# --- Argo CD's rules ----------------------------------------------------------------------------


def test_no_windows_allow() -> None:
    assert evaluate([], at(2026, 6, 1, 12)).allowed


def test_an_active_deny_blocks_until_it_ends() -> None:
    deny = window("deny", "0 22 * * *", "10h")
    state = evaluate([deny], at(2026, 6, 1, 23, 0))
    assert not state.allowed and state.blocking == (deny,) and not state.manual_allowed
    assert state.opens_at == at(2026, 6, 2, 8, 0)
    assert evaluate([deny], at(2026, 6, 2, 9, 0)).allowed


def test_allow_windows_gate_changes_to_their_time() -> None:
    allow = window("allow", "0 9 * * *", "2h")
    assert evaluate([allow], at(2026, 6, 1, 10)).allowed
    state = evaluate([allow], at(2026, 6, 1, 12))
    assert not state.allowed and state.opens_at == at(2026, 6, 2, 9)


def test_deny_wins_over_allow() -> None:
    allow = window("allow", "0 0 * * *", "24h")
    deny = window("deny", "0 12 * * *", "1h")
    assert evaluate([allow, deny], at(2026, 6, 1, 11)).allowed
    state = evaluate([allow, deny], at(2026, 6, 1, 12, 30))
    assert not state.allowed and state.opens_at == at(2026, 6, 1, 13)


def test_opening_steps_over_overlapping_denies_and_waits_for_an_allow() -> None:
    first = window("deny", "0 10 * * *", "2h")
    second = window("deny", "0 11 * * *", "3h")  # until 14:00
    allow = window("allow", "0 15 * * *", "1h")
    assert opens_at([first, second], at(2026, 6, 1, 10, 30)) == at(2026, 6, 1, 14)
    assert opens_at([first, second, allow], at(2026, 6, 1, 10, 30)) == at(2026, 6, 1, 15)


def test_opening_jumps_over_a_long_deny_instead_of_stepping_through_frequent_allows() -> None:
    # found by fuzzing: every firing of the allow window was one step (0.5 s for a 10-day freeze); a
    # 30-day freeze with a per-minute allow window took more than the 2000 steps, so "not within a year"
    freeze = window("deny", "0 0 1 6 *", "720h")  # June 1st 00:00, 30 days
    every_minute = window("allow", "* * * * *", "30s")
    assert opens_at([freeze, every_minute], at(2026, 6, 1, 10)) == at(2026, 7, 1, 0)
    state = evaluate([freeze, every_minute], at(2026, 6, 1, 10))
    assert not state.allowed and state.opens_at == at(2026, 7, 1, 0)


def test_manual_sync_rules() -> None:
    deny_manual = window("deny", "0 0 * * *", "24h", manual=True)
    deny_strict = window("deny", "0 0 * * *", "24h")
    now = at(2026, 6, 1, 12)
    assert evaluate([deny_manual], now).manual_allowed
    # every active deny window has to allow it
    assert not evaluate([deny_manual, deny_strict], now).manual_allowed
    # outside allow windows: any of them allowing it is enough
    allow_manual = window("allow", "0 3 * * *", "1h", manual=True)
    allow_strict = window("allow", "0 4 * * *", "1h")
    assert evaluate([allow_manual, allow_strict], now).manual_allowed
    assert not evaluate([allow_strict], now).manual_allowed


def test_a_window_that_never_opens_within_a_year() -> None:
    deny = window("deny", "0 0 * * *", "25h")  # always active
    state = evaluate([deny], at(2026, 6, 1, 12))
    assert not state.allowed and state.opens_at is None
