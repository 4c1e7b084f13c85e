"""Drift detection: does the server-side dry-run result differ from the live object? (pure)

Contract (fluxcd/pkg ``ssa`` ``hasDrifted`` + ``spec.ignore``):
- No ``resourceVersion`` in the dry-run result → the object does not exist → drifted (``created``).
- Otherwise drifted when labels differ, annotations differ, or anything outside ``metadata`` and
  ``status`` differs (``objects.semantic_equal``).
- Ignore rules (``spec.ignore``): every rule whose target selector matches the *dry-run* object removes
  its JSON-pointer paths from both sides before comparing. Target fields group/version/kind/name/
  namespace are anchored regular expressions; label/annotation selectors use label-selector syntax;
  no target matches every object.
- When an object is re-applied anyway, each ignored path whose value differs is resolved per
  upstream's strip-or-adopt rule: if another *Apply* field manager owns the path (managedFields), the
  path is stripped from our payload (we must not take it over); otherwise (we are the sole owner) the
  live value is adopted into the payload so the apply does not revert it.

Not promised: regular expressions use Python ``re`` (RE2 syntax differences such as possessive
quantifiers are not translated).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from kustomize_controller.apply import jsonpointer
from kustomize_controller.apply.labelselector import LabelSelector, parse_label_selector
from kustomize_controller.apply.objects import (
    Object,
    deep_copy,
    get_annotations,
    get_labels,
    maps_equal,
    metadata,
    resource_version,
    semantic_equal,
    split_api_version,
)


class SelectorSpec(Protocol):
    """What a ``spec.ignore[].target`` looks like (the api ``Selector`` model satisfies it)."""

    @property
    def group(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def label_selector(self) -> str | None: ...
    @property
    def annotation_selector(self) -> str | None: ...


class IgnoreRuleSpec(Protocol):
    """What a ``spec.ignore[]`` entry looks like (the api ``IgnoreRule`` model satisfies it)."""

    @property
    def paths(self) -> Sequence[str]: ...
    @property
    def target(self) -> SelectorSpec | None: ...


class IgnoreRuleError(ValueError):
    """An ignore rule that cannot be compiled (bad regex, selector or JSON pointer)."""


def _anchored(pattern: str | None, field: str) -> re.Pattern[str] | None:
    if not pattern:
        return None
    try:
        return re.compile(f"^(?:{pattern})$")
    except re.error as exc:
        raise IgnoreRuleError(f"invalid {field} regex: {exc}") from exc


@dataclass(frozen=True)
class TargetSelector:
    group: re.Pattern[str] | None = None
    version: re.Pattern[str] | None = None
    kind: re.Pattern[str] | None = None
    name: re.Pattern[str] | None = None
    namespace: re.Pattern[str] | None = None
    label_selector: LabelSelector | None = None
    annotation_selector: LabelSelector | None = None

    @classmethod
    def compile(cls, spec: SelectorSpec) -> TargetSelector:
        def selector(text: str | None, field: str) -> LabelSelector | None:
            if not text:
                return None
            try:
                return parse_label_selector(text)
            except ValueError as exc:
                raise IgnoreRuleError(f"invalid {field} selector: {exc}") from exc

        return cls(
            group=_anchored(spec.group, "group"),
            version=_anchored(spec.version, "version"),
            kind=_anchored(spec.kind, "kind"),
            name=_anchored(spec.name, "name"),
            namespace=_anchored(spec.namespace, "namespace"),
            label_selector=selector(spec.label_selector, "label"),
            annotation_selector=selector(spec.annotation_selector, "annotation"),
        )

    def matches(self, obj: Object) -> bool:
        meta = metadata(obj)
        group, version = split_api_version(str(obj.get("apiVersion") or ""))
        checks: tuple[tuple[re.Pattern[str] | None, str], ...] = (
            (self.namespace, str(meta.get("namespace") or "")),
            (self.name, str(meta.get("name") or "")),
            (self.group, group),
            (self.version, version),
            (self.kind, str(obj.get("kind") or "")),
        )
        if any(rx is not None and not rx.match(value) for rx, value in checks):
            return False
        if self.label_selector is not None and not self.label_selector.matches(get_labels(obj)):
            return False
        return self.annotation_selector is None or self.annotation_selector.matches(get_annotations(obj))


@dataclass(frozen=True)
class IgnoreRule:
    """A compiled ignore rule: JSON-pointer paths (pre-parsed) and an optional target selector."""

    paths: tuple[str, ...]
    target: TargetSelector | None = None

    def matches(self, obj: Object) -> bool:
        return self.target is None or self.target.matches(obj)


def compile_ignore_rules(rules: Iterable[IgnoreRuleSpec] | None) -> tuple[IgnoreRule, ...]:
    compiled: list[IgnoreRule] = []
    for i, rule in enumerate(rules or ()):
        for path in rule.paths:
            try:
                jsonpointer.parse(path)
            except ValueError as exc:
                raise IgnoreRuleError(f"ignore[{i}]: {exc}") from exc
        try:
            target = TargetSelector.compile(rule.target) if rule.target is not None else None
        except IgnoreRuleError as exc:
            raise IgnoreRuleError(f"ignore[{i}]: {exc}") from exc
        compiled.append(IgnoreRule(paths=tuple(rule.paths), target=target))
    return tuple(compiled)


def ignored_paths(rules: Sequence[IgnoreRule], match_obj: Object) -> list[str]:
    """The paths of every rule whose target matches ``match_obj``, in rule order."""
    return [p for rule in rules if rule.matches(match_obj) for p in rule.paths]


def strip_paths(obj: Object, paths: Iterable[str]) -> Object:
    """A copy of ``obj`` with every path removed (missing paths ignored)."""
    out = deep_copy(obj)
    for path in paths:
        jsonpointer.remove(out, jsonpointer.parse(path))
    return out


def _without_metadata_and_status(obj: Object) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def has_drifted(live: Object | None, dry_run: Object, rules: Sequence[IgnoreRule] = ()) -> bool:
    """Whether applying would change the live object (see module contract)."""
    if live is None or not resource_version(dry_run):
        return True
    paths = ignored_paths(rules, dry_run) if rules else []
    if paths:
        live = strip_paths(live, paths)
        dry_run = strip_paths(dry_run, paths)
    if not maps_equal(get_labels(dry_run), get_labels(live)):
        return True
    if not maps_equal(get_annotations(dry_run), get_annotations(live)):
        return True
    return not semantic_equal(_without_metadata_and_status(dry_run), _without_metadata_and_status(live))


class DriftAction(Enum):
    STRIP = "strip"
    ADOPT = "adopt"


@dataclass(frozen=True)
class DriftResolution:
    path: str
    action: DriftAction
    value: Any = None
    present: bool = False  # for ADOPT: whether the live object has the path at all


def resolve_ignored_drift(
    live: Object, dry_run: Object, rules: Sequence[IgnoreRule], *, field_manager: str
) -> list[DriftResolution]:
    """For each ignored path whose live and dry-run values differ: strip or adopt (module contract)."""
    result: list[DriftResolution] = []
    applies = _apply_entries(live)
    for path in ignored_paths(rules, dry_run):
        segments = jsonpointer.parse(path)
        live_found, live_value = jsonpointer.get(live, segments)
        dry_found, dry_value = jsonpointer.get(dry_run, segments)
        if live_found == dry_found and semantic_equal(live_value, dry_value):
            continue
        if _owned_by_other_apply_manager(live, segments, field_manager, applies):
            result.append(DriftResolution(path=path, action=DriftAction.STRIP))
        else:
            result.append(DriftResolution(path=path, action=DriftAction.ADOPT, value=live_value, present=live_found))
    return result


def apply_resolutions(payload: Object, resolutions: Iterable[DriftResolution]) -> None:
    """Strip or adopt each resolved path in the payload we are about to apply (in place).

    Adopting a path the live object does not have removes it from the payload (upstream would write
    ``null``, which the API server rejects for most fields).
    """
    for res in resolutions:
        segments = jsonpointer.parse(res.path)
        if res.action is DriftAction.STRIP or not res.present:
            jsonpointer.remove(payload, segments)
        else:
            jsonpointer.put(payload, segments, deep_copy({"v": res.value})["v"])


# --- managed fields (fieldsV1) ownership -------------------------------------------------------


def _apply_entries(obj: Object) -> list[tuple[str, dict[str, Any]]]:
    entries: list[tuple[str, dict[str, Any]]] = []
    for entry in metadata(obj).get("managedFields") or []:
        if not isinstance(entry, dict) or entry.get("subresource") or entry.get("operation") != "Apply":
            continue
        fields = entry.get("fieldsV1")
        if isinstance(fields, dict):
            entries.append((str(entry.get("manager") or ""), fields))
    return entries


def _walk(fields: dict[str, Any], segments: list[str]) -> dict[str, Any] | None:
    cur: Any = fields
    for seg in segments:
        if not isinstance(cur, dict) or seg not in cur:
            return None
        cur = cur[seg]
    return cur if isinstance(cur, dict) else None


def _fields_segments(obj: Object, segments: list[str], applies: list[tuple[str, dict[str, Any]]]) -> list[str] | None:
    """JSON-pointer segments → fieldsV1 keys (``f:name``; list items by their ``k:{...}`` key)."""
    out: list[str] = []
    obj_path: list[str] = []
    for seg in segments:
        if not seg.isdigit():
            out.append(f"f:{seg}")
            obj_path.append(seg)
            continue
        found, arr = jsonpointer.get(obj, obj_path)
        idx = int(seg)
        if not found or not isinstance(arr, list) or idx >= len(arr) or not isinstance(arr[idx], dict):
            return None
        item = arr[idx]
        key = None
        for _, fields in applies:
            node = _walk(fields, out)
            for candidate in node or {}:
                if not candidate.startswith("k:"):
                    continue
                try:
                    kv = json.loads(candidate[2:])
                except ValueError:
                    continue
                if isinstance(kv, dict) and all(semantic_equal(item.get(k), v) for k, v in kv.items()):
                    key = candidate
                    break
            if key:
                break
        if key is None:
            return None
        out.append(key)
        obj_path.append(seg)
    return out


def _owned_by_other_apply_manager(
    obj: Object, segments: list[str], field_manager: str, applies: list[tuple[str, dict[str, Any]]]
) -> bool:
    if not segments:
        return False
    fields_path = _fields_segments(obj, segments, applies)
    if fields_path is None:
        return False  # cannot resolve: treat as sole owner (adopt), as upstream
    for manager, fields in applies:
        if manager == field_manager:
            continue
        parent = _walk(fields, fields_path[:-1])
        if parent is not None and fields_path[-1] in parent:
            return True
    return False
