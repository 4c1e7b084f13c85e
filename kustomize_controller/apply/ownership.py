"""What the server says we own: did the desired state change since our last apply? (pure)

Server-side apply records, per field manager, the set of fields it owns (``managedFields``,
``fieldsV1``). Two properties of the API server make that set a record of our last apply:

- the fields our *Apply* entry owns hold the values we last applied: another manager changing one of
  them (an Update such as ``kubectl edit``/``scale``, or a forced apply) takes its ownership away
  from us, and a removed field is removed from every manager's set;
- the dry-run result of the desired manifest carries the set we *would* own: exactly the desired
  fields.

``provably_unchanged(live, dry_run, manager=)`` is true only when the desired state is provably the one
we last applied: we have an Apply entry on the live object; every field it owns is still desired
(nothing was removed from the manifest) with the value the live object has (nothing was changed in
it); and every desired field we do not own any more is owned by another manager (it was taken from
us: drift). A desired field that nobody owns is new, or was removed out of band: the two cannot be told
apart, so the answer is "not provably unchanged" and the caller applies it.

Not promised (the one way it can err towards not applying): a field that a new revision adds, or whose
value a new revision changes, while another manager already owns it (for example ``replicas`` under
an autoscaler, or a field a human changed by hand) counts as taken, so as drift. Paths are compared
as ``fieldsV1`` keys, list items by their associative key (``k:``), set members by value (``v:``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kustomize_controller.apply.objects import Object, metadata, semantic_equal

Path = tuple[str, ...]
_MISSING = object()


def _child(node: Any, key: str) -> Any:
    kind, _, raw = key.partition(":")
    if kind == "f":
        return node.get(raw, _MISSING) if isinstance(node, Mapping) else _MISSING
    if not isinstance(node, list):
        return _MISSING
    try:
        wanted = json.loads(raw)
    except ValueError:
        return _MISSING
    if kind == "k" and isinstance(wanted, dict):
        for item in node:
            if isinstance(item, Mapping) and all(semantic_equal(item.get(k), v) for k, v in wanted.items()):
                return item
        return _MISSING
    if kind == "v":
        return wanted if any(semantic_equal(item, wanted) for item in node) else _MISSING
    if kind == "i" and isinstance(wanted, int) and 0 <= wanted < len(node):
        return node[wanted]
    return _MISSING


def _leaves(fields: Mapping[str, Any], node: Any, prefix: Path, out: dict[Path, Any]) -> None:
    for key, sub_fields in fields.items():
        if key == ".":
            continue
        value = _child(node, key)
        path = (*prefix, key)
        children = {k: v for k, v in sub_fields.items() if k != "."} if isinstance(sub_fields, Mapping) else {}
        if not children:
            out[path] = value
            continue
        if isinstance(sub_fields, Mapping) and "." in sub_fields:
            out[(*path, ".")] = value is not _MISSING  # the item/map itself is owned: its presence counts
        _leaves(children, value, path, out)


def _entries(obj: Object) -> list[dict[str, Any]]:
    return [e for e in metadata(obj).get("managedFields") or [] if isinstance(e, dict)]


def owned_leaves(obj: Object, *, manager: str) -> dict[Path, Any] | None:
    """Leaf path → value in ``obj`` for the fields ``manager``'s Apply entry owns; None without one."""
    for entry in _entries(obj):
        if entry.get("manager") == manager and entry.get("operation") == "Apply" and not entry.get("subresource"):
            fields = entry.get("fieldsV1")
            out: dict[Path, Any] = {}
            if isinstance(fields, Mapping):
                _leaves(fields, obj, (), out)
            return out
    return None


def owned_by_others(obj: Object, *, manager: str) -> set[Path]:
    """Every leaf path some other manager owns (any operation, subresources included)."""
    out: dict[Path, Any] = {}
    for entry in _entries(obj):
        fields = entry.get("fieldsV1")
        if entry.get("manager") != manager and isinstance(fields, Mapping):
            _leaves(fields, obj, (), out)
    return set(out)


def _same(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return a is b
    return semantic_equal(a, b)


def provably_unchanged(live: Object, dry_run: Object, *, manager: str) -> bool:
    """Whether the desired state behind ``dry_run`` is the one ``manager`` last applied (module contract)."""
    last = owned_leaves(live, manager=manager)
    desired = owned_leaves(dry_run, manager=manager)
    if last is None or desired is None:
        return False
    if any(path not in desired or not _same(value, desired[path]) for path, value in last.items()):
        return False
    taken = set(desired) - set(last)
    return not taken or taken <= owned_by_others(live, manager=manager)
