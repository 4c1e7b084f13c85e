"""Go duration parsing and formatting, checked against values Go's time package produces."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kustomize_controller.api.duration import (
    DurationError,
    format_duration,
    format_duration_ns,
    format_seconds,
    parse_duration,
    parse_duration_ns,
)

MS = 1_000_000
S = 1000 * MS

# (input, nanoseconds, Go's Duration.String() of the parsed value)
VALID = [
    ("0s", 0, "0s"),
    ("1s", S, "1s"),
    ("5m", 300 * S, "5m0s"),
    ("90s", 90 * S, "1m30s"),
    ("60m", 3600 * S, "1h0m0s"),
    ("1h", 3600 * S, "1h0m0s"),
    ("1.5h", 5400 * S, "1h30m0s"),
    ("500ms", 500 * MS, "500ms"),
    ("100ms", 100 * MS, "100ms"),
    ("1500ms", 1500 * MS, "1.5s"),
    ("1h30m", 5400 * S, "1h30m0s"),
    ("2h45m30s", (2 * 3600 + 45 * 60 + 30) * S, "2h45m30s"),
    ("1m0s", 60 * S, "1m0s"),
    ("0.5s", 500 * MS, "500ms"),
    ("1.25s", 1250 * MS, "1.25s"),
    ("10m30.5s", 630 * S + 500 * MS, "10m30.5s"),
    ("36h", 36 * 3600 * S, "36h0m0s"),
    ("1s500ms", 1500 * MS, "1.5s"),
    ("0.001ms", 1000, "1µs"),
    ("0.000001ms", 1, "1ns"),
    ("1.0m", 60 * S, "1m0s"),
    ("00005m", 300 * S, "5m0s"),
    ("2562047h47m16.854775807s", 2**63 - 1, "2562047h47m16.854775807s"),
]

INVALID_STRICT = [
    "",
    "5",
    "-1m",
    "+1m",
    "1d",
    "1",
    "m",
    "1.m",
    ".5s",
    "1h 30m",
    "1H",
    "1us",
    "10ns",
    "0",
    "1m-1s",
]


@pytest.mark.parametrize(("text", "ns", "formatted"), VALID)
def test_parse_and_format(text: str, ns: int, formatted: str) -> None:
    assert parse_duration_ns(text) == ns
    assert format_duration_ns(ns) == formatted
    assert parse_duration(text) == timedelta(microseconds=ns // 1000)


@pytest.mark.parametrize("text", INVALID_STRICT)
def test_strict_rejects_what_the_crd_pattern_rejects(text: str) -> None:
    with pytest.raises(DurationError, match="duration"):
        parse_duration(text)


def test_overflow_is_an_error() -> None:
    with pytest.raises(DurationError, match="out of range"):
        parse_duration("2562048h")


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("-1m", -60 * S),
        ("+5s", 5 * S),
        ("0", 0),
        ("-0", 0),
        (".5s", 500 * MS),
        ("1.s", S),
        ("1us", 1000),
        ("1µs", 1000),
        ("1μs", 1000),
        ("10ns", 10),
        ("1h-0m", None),
    ],
)
def test_go_grammar(text: str, ns: int | None) -> None:
    if ns is None:
        with pytest.raises(DurationError, match='unknown unit "h-"'):
            parse_duration_ns(text, strict=False)
    else:
        assert parse_duration_ns(text, strict=False) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5", 'missing unit in duration "5"'),
        ("1d", 'unknown unit "d" in duration "1d"'),
        ("", 'invalid duration ""'),
        ("-", 'invalid duration "-"'),
        ("s", 'invalid duration "s"'),
    ],
)
def test_go_grammar_errors_read_like_go(text: str, message: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration_ns(text, strict=False)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (1, "1ns"),
        (999, "999ns"),
        (1500, "1.5µs"),
        (1_000_000, "1ms"),
        (1_234_567, "1.234567ms"),
        (-90 * S, "-1m30s"),
        (-1, "-1ns"),
        (S + 1, "1.000000001s"),
        (3600 * S + 1, "1h0m0.000000001s"),
    ],
)
def test_format_like_go(ns: int, text: str) -> None:
    assert format_duration_ns(ns) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.265691109, "265.691109ms"), (1.000000001, "1.000000001s"), (90.5, "1m30.5s"), (0.0000042, "4.2µs"),
     (0.0, "0s")],
)
def test_format_seconds_to_the_nanosecond(seconds: float, text: str) -> None:
    # upstream's "Reconciliation finished in 265.691109ms": time.Since(start).String()
    assert format_seconds(seconds) == text


def test_format_timedelta() -> None:
    assert format_duration(timedelta(seconds=90)) == "1m30s"
    assert format_duration(timedelta(hours=1)) == "1h0m0s"
    assert format_duration(timedelta(milliseconds=500)) == "500ms"
    assert format_duration(timedelta(0)) == "0s"
    assert format_duration(timedelta(seconds=-30)) == "-30s"
    assert format_duration(timedelta(days=2)) == "48h0m0s"


@given(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1))
def test_format_then_parse_is_identity(ns: int) -> None:
    assert parse_duration_ns(format_duration_ns(ns), strict=False) == ns


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_formatted_non_negative_values_satisfy_the_crd_unless_sub_millisecond(ns: int) -> None:
    text = format_duration_ns(ns)
    if "µs" in text or text.endswith("ns"):
        return
    assert parse_duration_ns(text) == ns
