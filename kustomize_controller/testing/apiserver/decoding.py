"""What the real server's typed JSON decoding refuses in a built-in object's ``metadata.managedFields``.

kube-apiserver decodes a built-in object into its Go struct before anything else looks at it; a value of
the wrong JSON type is an ``encoding/json`` ``UnmarshalTypeError``. For ``managedFields`` (the one place
where this server keeps the client's value instead of dropping it) that is:
- a value that is not a list: ``json: cannot unmarshal string into Go struct field
  ObjectMeta.metadata.managedFields of type []v1.ManagedFieldsEntry``;
- an entry that is not an object (``null`` is): ``… of type v1.ManagedFieldsEntry``;
- an entry's string field of another type: ``… Go struct field
  ManagedFieldsEntry.metadata.managedFields.manager of type string``.
Entries that decode but make no sense (an unknown ``operation`` or ``fieldsType``) are the field manager's
business and ignored there (patch/managed.py), as on a real server.

Contract: ``managed_fields_error(obj)`` is that message for the first such value in document order, or
None. ``go_json(obj)`` is the compact JSON Go's encoder writes (HTML characters escaped), which a patch
error quotes. Not promised: Go's key order (struct field order, maps sorted); keys are sorted here.
Not modelled: ``time`` values that are not timestamps.
"""

from __future__ import annotations

import json
from typing import Any

_ENTRY_STRINGS = {"manager": "string", "operation": "v1.ManagedFieldsOperationType", "apiVersion": "string",
                  "fieldsType": "string", "subresource": "string"}
_FIELD = "metadata.managedFields"


def json_type(value: Any) -> str:
    """The JSON type name Go's decoder reports (``number``, not int or float)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _unmarshal(value: Any, struct: str, field: str, go_type: str) -> str:
    return f"json: cannot unmarshal {json_type(value)} into Go struct field {struct}.{field} of type {go_type}"


def managed_fields_error(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    entries = meta.get("managedFields") if isinstance(meta, dict) else None
    if entries is None:
        return None
    if not isinstance(entries, list):
        return _unmarshal(entries, "ObjectMeta", _FIELD, "[]v1.ManagedFieldsEntry")
    for entry in entries:
        if entry is None:
            continue
        if not isinstance(entry, dict):
            return _unmarshal(entry, "ObjectMeta", _FIELD, "v1.ManagedFieldsEntry")
        for key, value in entry.items():
            go_type = _ENTRY_STRINGS.get(key)
            if go_type and value is not None and not isinstance(value, str):
                return _unmarshal(value, "ManagedFieldsEntry", f"{_FIELD}.{key}", go_type)
    return None


def go_json(obj: Any) -> str:
    text = json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text
