"""Go duration strings (``interval``, ``timeout``, ``retryInterval``, sync-window ``duration``, flags).

Input: the first byte's bit 0 selects the lenient Go grammar (``strict=False``), the rest is the text.

Contract: ``parse_duration_ns`` raises only ``DurationError`` (message quoting the input); a success is
an integer within Go's int64 nanoseconds, formats back with ``format_duration_ns``, and that string
parses again (in the lenient grammar) to the same value; ``parse_duration`` agrees to the microsecond.
"""

from __future__ import annotations

from kustomize_controller.api.duration import DurationError, format_duration_ns, parse_duration, parse_duration_ns
from tests.fuzz.harness import Target, text

_MAX_NS = 2**63 - 1


def one_input(data: bytes) -> None:
    if not data:
        return
    strict = not data[0] & 1
    value = text(data[1:])
    try:
        ns = parse_duration_ns(value, strict=strict)
    except DurationError as err:
        assert "duration" in str(err), str(err)
        return
    assert -_MAX_NS <= ns <= _MAX_NS, ns
    formatted = format_duration_ns(ns)
    assert parse_duration_ns(formatted, strict=False) == ns, (value, formatted)
    delta = parse_duration(value, strict=strict)
    assert abs(delta.total_seconds() * 1e9 - ns) < 1e9, (value, delta)


TARGET = Target(
    name="duration",
    one_input=one_input,
    contract="parse_duration_ns / parse_duration: DurationError only; what parses formats and parses back",
    max_len=256,
    dictionary=(b"h", b"m", b"s", b"ms", b"us", b"\xc2\xb5s", b"\xce\xbcs", b"ns", b".", b"-", b"+", b"0",
                b"9223372036854775807", b"2562047h"),
    seeded_runs=1500,
)
