"""Label and field selectors with the grammar and error messages of ``k8s.io/apimachinery/pkg/labels``.

Label selectors: comma-separated requirements ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``,
``k in (a,b)``, ``k notin (a,b)``, ``k>n``, ``k<n``; all must hold. ``k!=v`` and ``notin`` also match
objects without the label. Field selectors: ``path=value``, ``path==value``, ``path!=value`` over
``metadata.name`` and ``metadata.namespace`` plus the extra fields a kind supports.

Parsing is separate from matching so a watch parses once and matches per event.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import bad_request

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                  r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # exists, !, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return have > bound if self.op == "gt" else have < bound


class LabelSelector:
    """A parsed label selector; an empty selector matches everything."""

    def __init__(self, requirements: list[Requirement]) -> None:
        self.requirements = requirements

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _check_key(key: str, source: str) -> None:
    if not key or len(key.rpartition("/")[2]) > 63 or not _KEY.match(key):
        raise bad_request(f'unable to parse requirement: invalid label key "{key}": name part must consist of '
                          f"alphanumeric characters, '-', '_' or '.', and must start and end with an "
                          f"alphanumeric character (in selector {source!r})")


def _check_value(value: str) -> None:
    if len(value) > 63 or not _VALUE.match(value):
        raise bad_request(f'unable to parse requirement: values[0][{value}]: Invalid value: "{value}": a valid '
                          f"label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'")


_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(.*?)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector([])
    requirements: list[Requirement] = []
    for raw in _split_top_level(text):
        part = raw.strip()
        if not part:
            raise bad_request(f"unable to parse requirement: found '', expected: identifier (in {text!r})")
        if (m := _SET_RE.match(part)) is not None:
            key, op, body = m.group(1), m.group(2), m.group(3)
            _check_key(key, text)
            values = tuple(v.strip() for v in body.split(",")) if body.strip() else ()
            if not values:
                raise bad_request(f"unable to parse requirement: for 'in', 'notin' operators, values set "
                                  f"can't be empty (in {text!r})")
            for v in values:
                _check_value(v)
            requirements.append(Requirement(key, op, tuple(sorted(values))))
        elif (m := _CMP_RE.match(part)) is not None:
            key, op, value = m.group(1), m.group(2), m.group(3)
            _check_key(key, text)
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", value):
                    raise bad_request(f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be "
                                      f"an integer (in {text!r})")
                requirements.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
            else:
                _check_value(value)
                requirements.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
        elif part.startswith("!"):
            key = part[1:].strip()
            _check_key(key, text)
            requirements.append(Requirement(key, "!"))
        else:
            _check_key(part, text)
            requirements.append(Requirement(part, "exists"))
    requirements.sort(key=lambda r: r.key)
    return LabelSelector(requirements)


def label_selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions) as a parsed selector."""
    if not selector:
        return LabelSelector([])
    requirements = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        requirements.append(Requirement(expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ())))
    return LabelSelector(requirements)


# field selectors --------------------------------------------------------------------------------------

FieldGetter = Callable[[Mapping[str, Any]], str | None]


def _path_getter(path: str) -> FieldGetter:
    parts = path.split(".")

    def get(obj: Mapping[str, Any]) -> str | None:
        cur: Any = obj
        for p in parts:
            if not isinstance(cur, Mapping):
                return None
            cur = cur.get(p)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


COMMON_FIELDS = ("metadata.name", "metadata.namespace")
EXTRA_FIELDS: dict[str, tuple[str, ...]] = {
    "Secret": ("type",),
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
              "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
              "reason", "reportingComponent", "source", "type", "regarding.kind", "regarding.name",
              "regarding.namespace", "regarding.uid"),
    "Namespace": ("status.phase",),
    "Job": ("status.successful",),
}


class FieldSelector:
    def __init__(self, terms: list[tuple[str, bool, str, FieldGetter]]) -> None:
        self.terms = terms

    @property
    def empty(self) -> bool:
        return not self.terms

    def single_value(self, field: str) -> str | None:
        """The value ``field`` must equal, when the selector pins it (used to narrow a scan)."""
        for name, equal, value, _ in self.terms:
            if name == field and equal:
                return value
        return None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((getter(obj) == value) == equal for _, equal, value, getter in self.terms)


def parse_field_selector(text: str | None, kind: str, *, builtin: bool = False) -> FieldSelector:
    """``builtin``: a built-in kind, whose unsupported labels are refused with the words of the conversion
    that applies (apimachinery's default one for kinds with only the metadata fields)."""
    if not text or not text.strip():
        return FieldSelector([])
    allowed = COMMON_FIELDS + EXTRA_FIELDS.get(kind, ())
    terms: list[tuple[str, bool, str, FieldGetter]] = []
    for raw in text.split(","):
        part = raw.strip()
        m = re.fullmatch(r"([^=!]+?)\s*(==|=|!=)\s*(.*)", part)
        if m is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        name, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if name not in allowed:
            if builtin and kind not in EXTRA_FIELDS:
                raise bad_request(f'"{name}" is not a known field selector: only "metadata.name", "metadata.namespace"')
            raise bad_request(f'field label not supported: {name}')
        # Events are stored in the core/v1 shape (events.py): events.k8s.io's names read the core fields
        stored = "involvedObject." + name.removeprefix("regarding.") if name.startswith("regarding.") else name
        terms.append((name, op != "!=", value, _path_getter(stored)))
    return FieldSelector(terms)


__all__ = [
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "label_selector_from_object",
    "parse_field_selector",
    "parse_label_selector",
]
