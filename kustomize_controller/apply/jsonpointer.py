"""RFC 6901 JSON pointers over plain ``dict``/``list`` values (only what drift ignore rules need).

``get`` reports absence instead of raising (an unresolvable pointer means "not present", as upstream);
``remove`` of a missing path is a no-op (json-patch ``AllowMissingPathOnRemove``); ``put`` creates the
last segment when the parent exists and never creates intermediate containers.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


def parse(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer {pointer!r} must be empty or start with '/'")
    return [seg.replace("~1", "/").replace("~0", "~") for seg in pointer[1:].split("/")]


def escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


def _index(container: list[Any], segment: str) -> int | None:
    if not segment.isdigit() or (len(segment) > 1 and segment.startswith("0")):
        return None
    idx = int(segment)
    return idx if idx < len(container) else None


def _parent(doc: Any, segments: list[str]) -> Any:
    cur = doc
    for seg in segments[:-1]:
        if isinstance(cur, dict):
            cur = cur.get(seg, _MISSING)
        elif isinstance(cur, list):
            idx = _index(cur, seg)
            cur = cur[idx] if idx is not None else _MISSING
        else:
            return _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


def get(doc: Any, segments: list[str]) -> tuple[bool, Any]:
    """(found, value) of the pointer in ``doc``."""
    if not segments:
        return True, doc
    parent = _parent(doc, segments)
    last = segments[-1]
    if isinstance(parent, dict):
        if last in parent:
            return True, parent[last]
        return False, None
    if isinstance(parent, list):
        idx = _index(parent, last)
        if idx is not None:
            return True, parent[idx]
    return False, None


def remove(doc: Any, segments: list[str]) -> bool:
    """Remove the value at the pointer; returns whether something was removed."""
    if not segments:
        return False
    parent = _parent(doc, segments)
    last = segments[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list):
        idx = _index(parent, last)
        if idx is not None:
            del parent[idx]
            return True
    return False


def put(doc: Any, segments: list[str], value: Any) -> bool:
    """Set the value at the pointer if its parent exists; returns whether it was set."""
    if not segments:
        return False
    parent = _parent(doc, segments)
    last = segments[-1]
    if isinstance(parent, dict):
        parent[last] = value
        return True
    if isinstance(parent, list):
        idx = _index(parent, last)
        if idx is not None:
            parent[idx] = value
            return True
    return False
