"""Go ``time.Duration`` strings: parse and format them exactly as Go does.

Contract:

- ``parse_duration(s)`` accepts what the Kustomization CRD accepts for ``interval``, ``retryInterval``
  and ``timeout``: one or more ``<digits>[.<digits>]<unit>`` groups with unit ``h``, ``m``, ``s`` or
  ``ms`` (``DURATION_PATTERN``). ``5`` (no unit) and ``-1m`` (sign) are rejected, as the API server
  rejects them. ``parse_duration(s, strict=False)`` accepts the full Go ``time.ParseDuration``
  grammar instead (a leading sign, the units ``ns``, ``us``, ``µs``, a bare ``0``, ``.5s``); command
  line flags use that form.
- ``format_duration(td)`` writes what Go's ``Duration.String()`` writes: ``1m30s``, ``1h0m0s``,
  ``500ms``, ``1.5µs``, ``0s``, with a leading ``-`` for negative values.
- Values are exact integers of nanoseconds internally (no float rounding); a value beyond
  Go's int64 nanosecond range is an error, as in Go.

Not promised: ``timedelta`` holds microseconds, so ``parse_duration`` truncates any sub-microsecond
part towards zero (``1500ns`` -> 1 µs). Use ``parse_duration_ns``/``format_duration_ns`` when
nanoseconds matter.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Final

__all__ = [
    "DURATION_PATTERN",
    "DurationError",
    "format_duration",
    "format_duration_ns",
    "parse_duration",
    "parse_duration_ns",
]

#: The OpenAPI pattern of ``metav1.Duration`` fields in the Kustomization CRD.
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"

_NANOSECOND: Final = 1
_MICROSECOND: Final = 1000 * _NANOSECOND
_MILLISECOND: Final = 1000 * _MICROSECOND
_SECOND: Final = 1000 * _MILLISECOND
_MINUTE: Final = 60 * _SECOND
_HOUR: Final = 60 * _MINUTE
_MAX_NS: Final = 2**63 - 1

_UNITS: Final[dict[str, int]] = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "µs": _MICROSECOND,  # U+00B5 micro sign
    "μs": _MICROSECOND,  # U+03BC Greek mu
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}

_STRICT_RE: Final = re.compile(DURATION_PATTERN)
# One Go component: digits with an optional fraction (either side may be empty, not both), then a unit
# made of anything that is not a digit or a dot (an unknown unit is reported by name, as Go does).
_COMPONENT_RE: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


class DurationError(ValueError):
    """A string that is not a valid duration; the message quotes the input."""


def parse_duration_ns(text: str, *, strict: bool = True) -> int:
    """Parse ``text`` into integer nanoseconds (see the module contract for ``strict``)."""
    if strict and not _STRICT_RE.match(text):
        raise DurationError(
            f'invalid duration "{text}": expected a number with a unit (h, m, s or ms), e.g. 5m or 1h30m'
        )
    rest = text
    negative = False
    if not strict and rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if not strict and rest == "0":
        return 0
    if not rest:
        raise DurationError(f'invalid duration "{text}"')
    total = 0
    while rest:
        match = _COMPONENT_RE.match(rest)
        # The pattern always matches (all parts optional); an empty match means a stray character.
        assert match is not None
        whole, frac, unit = match.group(1), match.group(2), match.group(3)
        if not whole and not frac:
            raise DurationError(f'invalid duration "{text}"')
        if not unit:
            raise DurationError(f'missing unit in duration "{text}"')
        scale = _UNITS.get(unit)
        if scale is None:
            raise DurationError(f'unknown unit "{unit}" in duration "{text}"')
        value = int(whole or "0") * scale
        if frac:
            value += int(frac) * scale // 10 ** len(frac)
        total += value
        if total > _MAX_NS:
            raise DurationError(f'invalid duration "{text}": out of range')
        rest = rest[match.end() :]
    return -total if negative else total


def parse_duration(text: str, *, strict: bool = True) -> timedelta:
    """Parse a Go duration string into a ``timedelta`` (sub-microsecond parts are truncated)."""
    ns = parse_duration_ns(text, strict=strict)
    micros = abs(ns) // _MICROSECOND
    return timedelta(microseconds=-micros if ns < 0 else micros)


def _fraction(value: int, digits: int) -> tuple[str, int]:
    """Split ``value`` into its last ``digits`` decimal digits (as ``.xyz`` without trailing zeros)."""
    head, tail = divmod(value, 10**digits)
    text = f"{tail:0{digits}d}".rstrip("0")
    return (f".{text}" if text else ""), head


def format_duration_ns(ns: int) -> str:
    """Format integer nanoseconds exactly like Go's ``time.Duration.String``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    value = abs(ns)
    if value < _SECOND:
        # Below one second Go picks the largest unit that keeps a non-zero integer part.
        if value < _MICROSECOND:
            return f"{sign}{value}ns"
        if value < _MILLISECOND:
            frac, whole = _fraction(value, 3)
            return f"{sign}{whole}{frac}µs"
        frac, whole = _fraction(value, 6)
        return f"{sign}{whole}{frac}ms"
    frac, seconds_total = _fraction(value, 9)
    minutes_total, seconds = divmod(seconds_total, 60)
    out = f"{seconds}{frac}s"
    if minutes_total:
        hours, minutes = divmod(minutes_total, 60)
        out = f"{minutes}m{out}"
        if hours:
            out = f"{hours}h{out}"
    return sign + out


def format_duration(delta: timedelta) -> str:
    """Format a ``timedelta`` like Go's ``time.Duration.String`` (``90 s`` -> ``1m30s``)."""
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return format_duration_ns(micros * _MICROSECOND)


def format_seconds(seconds: float) -> str:
    """Format an elapsed time measured in float seconds (a monotonic clock's difference) to the nanosecond,
    as Go's ``time.Since(start).String()``: ``0.265691109`` -> ``265.691109ms`` (a ``timedelta`` would
    stop at microseconds)."""
    return format_duration_ns(round(seconds * _SECOND))
