"""The string functions of the ``${...}`` operators (fluxcd/pkg/envsubst semantics).

``apply_operator(name, value, args)`` maps an operator name as parsed by :mod:`.envsubst` (``","``,
``"^^"``, ``"#"``, ``":"``, ``"//"``, ``":-"``, ...) to its result. Pure; raises only
:class:`EnvsubstError` (a negative substring length, where upstream panics).

Contract details kept from upstream: ``#``/``##``/``%``/``%%`` take glob patterns matched by a
variant of Go's ``path.Match`` whose trailing ``*`` also matches ``/``, and a malformed pattern
leaves the value unchanged; the ``/`` family replaces literal text; ``/#`` and ``/%`` need both
pattern and replacement; ``${#v}`` and ``${v:n:len}`` count UTF-8 bytes; every default-family
operator returns the joined arguments when the value is empty.
"""

from __future__ import annotations

import re

from kustomize_controller.kustomize.errors import EnvsubstError

BAD_SUBSTITUTION = "bad substitution"

_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63


def _atoi(s: str) -> int | None:
    if not _INT_RE.fullmatch(s):
        return None
    n = int(s)
    return n if -_INT64 <= n < _INT64 else None


def _upper_rune(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 else c


def _lower_rune(c: str) -> str:
    lo = c.lower()
    return lo if len(lo) == 1 else c


def _substr(s: str, args: list[str]) -> str:
    if not args:
        return s
    pos = _atoi(args[0])
    if pos is None:
        return s
    raw = s.encode()
    size = len(raw)
    if pos < 0:
        pos = max(size + pos, 0)
    if len(args) == 1:
        return raw[pos:].decode(errors="replace") if pos < size else ""
    length = _atoi(args[1])
    if length is None:
        return s
    if length < 0:
        # Upstream slices s[pos:pos+length] and panics; fail cleanly instead.
        raise EnvsubstError(f"{BAD_SUBSTITUTION}: negative substring length {length}")
    if pos + length >= size:
        return raw[pos:].decode(errors="replace") if pos < size else ""
    return raw[pos : pos + length].decode(errors="replace")


class _BadPattern(Exception):
    pass


def _scan_chunk(pattern: str) -> tuple[bool, str, str]:
    star = False
    while pattern.startswith("*"):
        pattern = pattern[1:]
        star = True
    in_range = False
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 < len(pattern):
                i += 1
        elif c == "[":
            in_range = True
        elif c == "]":
            in_range = False
        elif c == "*" and not in_range:
            break
        i += 1
    return star, pattern[:i], pattern[i:]


def _get_esc(chunk: str) -> tuple[str, str]:
    if not chunk or chunk[0] in "-]":
        raise _BadPattern
    if chunk[0] == "\\":
        chunk = chunk[1:]
        if not chunk:
            raise _BadPattern
    r, rest = chunk[0], chunk[1:]
    if not rest:
        raise _BadPattern
    return r, rest


def _read_class(chunk: str) -> tuple[bool, tuple[tuple[str, str], ...], str]:
    """A character class after its ``[``: (negated, its ranges, the rest of the chunk). Raises _BadPattern."""
    negated = bool(chunk) and chunk[0] == "^"
    if negated:
        chunk = chunk[1:]
    ranges: list[tuple[str, str]] = []
    while True:
        if chunk and chunk[0] == "]" and ranges:
            return negated, tuple(ranges), chunk[1:]
        lo, chunk = _get_esc(chunk)
        hi = lo
        if chunk[0] == "-":
            hi, chunk = _get_esc(chunk[1:])
        ranges.append((lo, hi))


def _match_chunk(chunk: str, s: str) -> str | None:
    """Match ``chunk`` at the start of ``s``; the unmatched rest, or None. Raises _BadPattern."""
    while chunk:
        if not s:
            return None
        c = chunk[0]
        if c == "[":
            r, s = s[0], s[1:]
            negated, ranges, chunk = _read_class(chunk[1:])
            if any(lo <= r <= hi for lo, hi in ranges) == negated:
                return None
        elif c == "?":
            s = s[1:]
            chunk = chunk[1:]
        else:
            if c == "\\":
                chunk = chunk[1:]
                if not chunk:
                    raise _BadPattern
            if chunk[0] != s[0]:
                return None
            s = s[1:]
            chunk = chunk[1:]
    return s


def _glob_match(pattern: str, name: str) -> bool:
    """Upstream's path.Match variant: a trailing ``*`` matches everything, ``/`` included. The trims use
    the equivalent one-pass ``_matching_prefixes``; this, upstream's algorithm, is the reference a
    property test holds it to."""
    while pattern:
        star, chunk, pattern = _scan_chunk(pattern)
        if star and not chunk:
            return True
        rest = _match_chunk(chunk, name)
        if rest is not None and (not rest or pattern):
            name = rest
            continue
        if star:
            for i in range(len(name)):
                rest = _match_chunk(chunk, name[i + 1 :])
                if rest is not None:
                    if not pattern and rest:
                        continue
                    name = rest
                    break
            else:
                return False
            continue
        return False
    return not name


_STAR = "*"
_Token = str | tuple[bool, tuple[tuple[str, str], ...]]  # "*", "?", a literal character, or a class


def _tokens(pattern: str) -> list[_Token] | None:
    """The pattern as ``_glob_match`` reads it (chunks split by ``_scan_chunk``, each read as ``_match_chunk``
    does), or None when some part is malformed (``_glob_match`` would raise ``_BadPattern`` on reaching it)."""
    out: list[_Token] = []
    try:
        while pattern:
            star, chunk, pattern = _scan_chunk(pattern)
            if star:
                out.append(_STAR)
            while chunk:
                c = chunk[0]
                if c == "[":
                    negated, ranges, chunk = _read_class(chunk[1:])
                    out.append((negated, ranges))
                elif c == "?":
                    out.append("?")
                    chunk = chunk[1:]
                else:
                    if c == "\\":
                        chunk = chunk[1:]
                        if not chunk:
                            raise _BadPattern
                    # an escaped "*" or "?" is a literal: a one-character class, not the wildcard token
                    out.append((False, ((chunk[0], chunk[0]),)) if chunk[0] in "*?" else chunk[0])
                    chunk = chunk[1:]
    except _BadPattern:
        return None
    return out


def _token_matches(token: _Token, c: str) -> bool:
    if isinstance(token, str):
        return token == "?" or token == c
    negated, ranges = token
    return any(lo <= c <= hi for lo, hi in ranges) != bool(negated)


def _matching_prefixes(s: str, pattern: str) -> list[int]:
    """The lengths ``k >= 1`` of the prefixes ``s[:k]`` that ``pattern`` matches, in one pass over ``s``
    (the set of pattern positions reached, as a glob NFA).

    This is what upstream's loop asks ``_glob_match`` prefix by prefix (its chunk-by-chunk search is exact
    for globs), in O(len(s) * len(pattern)) instead of O(len(s)² * len(pattern)): a trim of a long variable
    with a long pattern took seconds per object (found by fuzzing). A malformed pattern matches nothing:
    ``_glob_match`` can only succeed after reading every chunk whole, and it raises on reaching the bad
    part, which leaves the value unchanged just the same."""
    tokens = _tokens(pattern)
    if tokens is None:
        return []
    end = len(tokens)

    def closure(states: set[int]) -> set[int]:
        out = set(states)
        for i in states:
            j = i
            while j < end and tokens[j] == _STAR:
                j += 1
                out.add(j)
        return out

    states = closure({0})
    found: list[int] = []
    for k, c in enumerate(s, start=1):
        step: set[int] = set()
        for i in states:
            if i == end:
                continue
            token = tokens[i]
            if token == _STAR:
                step.add(i)
            elif _token_matches(token, c):
                step.add(i + 1)
        states = closure(step)
        if not states:
            break
        if end in states:
            found.append(k)
    return found


def _trim_shortest(s: str, pattern: str) -> str:
    prefixes = _matching_prefixes(s, pattern)
    return s[prefixes[0] :] if prefixes else s


def _trim_longest(s: str, pattern: str) -> str:
    prefixes = _matching_prefixes(s, pattern)
    return s[prefixes[-1] :] if prefixes else s


def apply_operator(name: str, v: str, args: list[str]) -> str:
    if name == ",":
        return _lower_rune(v[0]) + v[1:] if v else v
    if name == ",,":
        return "".join(_lower_rune(c) for c in v)
    if name == "^":
        return _upper_rune(v[0]) + v[1:] if v else v
    if name == "^^":
        return "".join(_upper_rune(c) for c in v)
    if name == "#":
        if not args:
            return str(len(v.encode()))
        return _trim_shortest(v, args[0])
    if name == "##":
        return _trim_longest(v, args[0]) if args else v
    if name == "%":
        return _trim_shortest(v[::-1], args[0][::-1])[::-1] if args else v
    if name == "%%":
        return _trim_longest(v[::-1], args[0][::-1])[::-1] if args else v
    if name == ":":
        return _substr(v, args)
    if name == "/#":
        if len(args) == 2 and v.startswith(args[0]):
            return v.replace(args[0], args[1], 1)
        return v
    if name == "/%":
        if len(args) == 2 and v.endswith(args[0]):
            return v[: len(v) - len(args[0])] + args[1]
        return v
    if name in ("/", "//"):
        if not args:
            return v
        count = 1 if name == "/" else -1
        return v.replace(args[0], args[1] if len(args) > 1 else "", count)
    # Plain reference and the whole default family.
    if not v and args:
        return "".join(args)
    return v
