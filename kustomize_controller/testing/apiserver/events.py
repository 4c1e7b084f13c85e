"""Events: one resource seen through two APIs, ``core/v1`` and ``events.k8s.io/v1``.

kube-apiserver keeps a single ``events`` storage and converts between the two shapes, so an Event written
through one API is read, listed and watched through the other. Here the storage holds the ``core/v1``
shape; ``events.k8s.io/v1`` requests are converted on the way in (``to_storage``) and out (``view``).

Contract:
- Field mapping (events.k8s.io ↔ core): ``regarding`` ↔ ``involvedObject``, ``note`` ↔ ``message``,
  ``reportingController`` ↔ ``reportingComponent``, ``deprecatedSource`` ↔ ``source``,
  ``deprecatedFirstTimestamp``/``deprecatedLastTimestamp``/``deprecatedCount`` ↔
  ``firstTimestamp``/``lastTimestamp``/``count``; ``reason``, ``type``, ``eventTime``, ``series``,
  ``action``, ``related``, ``reportingInstance`` and ``metadata`` keep their names.
- Stored Events carry what the real core/v1 serialisation always shows: ``eventTime``,
  ``firstTimestamp`` and ``lastTimestamp`` (``null`` when unset), ``reportingComponent`` and
  ``reportingInstance`` (``""``), ``source`` (``{}``).
- A create through ``events.k8s.io/v1`` without ``eventTime`` is 422 with a ``FieldValueRequired`` cause
  (the strict validation of the new API; core/v1 keeps the legacy rules).

Not promised: the rest of events.k8s.io's strict create validation (action, reportingController…), field
selectors spelled in the events.k8s.io shape (``regarding.name``), managedFields paths in the shape of
the API that wrote them (they are recorded on the stored shape).
"""

from __future__ import annotations

from typing import Any

from . import errors
from .errors import FieldError
from .kinds import ResourceType

EVENTS_GROUP = "events.k8s.io"
# events.k8s.io/v1 name -> core/v1 name
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_EVENTS = {core: new for new, core in _RENAMED.items()}
_ALWAYS_SHOWN: dict[str, Any] = {
    "eventTime": None, "firstTimestamp": None, "lastTimestamp": None,
    "reportingComponent": "", "reportingInstance": "", "source": {},
}


def is_event(rt: ResourceType) -> bool:
    return rt.kind == "Event" and rt.group in ("", EVENTS_GROUP)


def is_events_api(rt: ResourceType) -> bool:
    return rt.kind == "Event" and rt.group == EVENTS_GROUP


def to_storage(rt: ResourceType, obj: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """``obj`` (as written through ``rt``) in the stored core/v1 shape; other kinds unchanged."""
    if not is_event(rt):
        return obj
    if is_events_api(rt):
        if creating and not obj.get("eventTime"):
            raise errors.invalid("Event", EVENTS_GROUP, (obj.get("metadata") or {}).get("name") or "",
                                 [FieldError("eventTime", "Required value", "")])
        obj = {_RENAMED.get(key, key): value for key, value in obj.items()}
        obj["apiVersion"] = "v1"
    for key, value in _ALWAYS_SHOWN.items():
        obj.setdefault(key, value if not isinstance(value, dict) else {})
    return obj


def view(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """A stored Event as read through ``rt`` (only events.k8s.io changes anything)."""
    result = {_TO_EVENTS.get(key, key): value for key, value in obj.items()}
    for empty in ("reportingController", "reportingInstance"):  # omitempty in events.k8s.io/v1
        if result.get(empty) == "":
            del result[empty]
    if result.get("deprecatedSource") == {}:
        del result["deprecatedSource"]
    result["apiVersion"] = rt.api_version
    return result
