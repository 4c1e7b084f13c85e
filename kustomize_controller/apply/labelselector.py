"""Kubernetes label-selector syntax (``k8s.io/apimachinery/pkg/labels.Parse``), for ignore-rule targets.

Supported: ``key``, ``!key``, ``key=v``, ``key==v``, ``key!=v``, ``key in (a,b)``, ``key notin (a,b)``,
``key>n``, ``key<n``; requirements joined by ``,`` all have to hold. ``!=`` and ``notin`` also match
when the key is absent. An empty selector matches everything. Parse errors raise ``ValueError`` with
the offending text. Keys and values are not validated against the DNS-label rules (the API server
already validated the labels of the objects being matched).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_TOKEN = re.compile(r"\s*(\(|\)|,|==|!=|=|!|>|<|[^\s(),=!<>]+)")

Requirement = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True)
class LabelSelector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, values: Mapping[str, str] | None) -> bool:
        data = values or {}
        return all(req(data) for req in self.requirements)


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"unable to parse requirement: {text[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    return tokens


def parse_label_selector(text: str) -> LabelSelector:
    tokens = _tokenize(text)
    reqs: list[Requirement] = []
    i = 0

    def expect_value(idx: int) -> str:
        if idx >= len(tokens) or tokens[idx] in ("(", ")", ",", "=", "==", "!=", "!", ">", "<"):
            raise ValueError(f"invalid label selector {text!r}: expected a value")
        return tokens[idx]

    while i < len(tokens):
        tok = tokens[i]
        if tok == "!":
            key = expect_value(i + 1)
            reqs.append(_absent(key))
            i += 2
        else:
            key = expect_value(i)
            op = tokens[i + 1] if i + 1 < len(tokens) else ","
            if op == ",":
                reqs.append(_present(key))
                i += 1
            elif op in ("=", "=="):
                # an empty value (``key=``) is allowed by the upstream parser
                nxt = tokens[i + 2] if i + 2 < len(tokens) else ","
                value = "" if nxt == "," else expect_value(i + 2)
                reqs.append(_in(key, frozenset({value})))
                i += 2 if nxt == "," else 3
            elif op == "!=":
                nxt = tokens[i + 2] if i + 2 < len(tokens) else ","
                value = "" if nxt == "," else expect_value(i + 2)
                reqs.append(_not_in(key, frozenset({value})))
                i += 2 if nxt == "," else 3
            elif op in ("in", "notin"):
                if i + 2 >= len(tokens) or tokens[i + 2] != "(":
                    raise ValueError(f"invalid label selector {text!r}: expected '(' after {op}")
                j = i + 3
                values: set[str] = set()
                while j < len(tokens) and tokens[j] != ")":
                    if tokens[j] != ",":
                        values.add(expect_value(j))
                    j += 1
                if j >= len(tokens):
                    raise ValueError(f"invalid label selector {text!r}: missing ')'")
                frozen = frozenset(values)
                if op == "in":
                    reqs.append(_in(key, frozen))
                else:
                    reqs.append(_not_in(key, frozen))
                i = j + 1
            elif op in (">", "<"):
                raw = expect_value(i + 2)
                try:
                    bound = int(raw)
                except ValueError as exc:
                    raise ValueError(f"invalid label selector {text!r}: {raw!r} is not an integer") from exc
                reqs.append(_compare(key, bound, greater=op == ">"))
                i += 3
            else:
                raise ValueError(f"invalid label selector {text!r}: unexpected {op!r}")
        if i < len(tokens):
            if tokens[i] != ",":
                raise ValueError(f"invalid label selector {text!r}: expected ',' before {tokens[i]!r}")
            i += 1
    return LabelSelector(text=text, requirements=tuple(reqs))


def _compare(key: str, bound: int, *, greater: bool) -> Requirement:
    def check(d: Mapping[str, str]) -> bool:
        try:
            value = int(d[key])
        except (KeyError, ValueError):
            return False
        return value > bound if greater else value < bound

    return check


def _present(key: str) -> Requirement:
    return lambda d: key in d


def _absent(key: str) -> Requirement:
    return lambda d: key not in d


def _in(key: str, values: frozenset[str]) -> Requirement:
    return lambda d: key in d and d[key] in values


def _not_in(key: str, values: frozenset[str]) -> Requirement:
    return lambda d: d.get(key) not in values
