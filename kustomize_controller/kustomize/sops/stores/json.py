"""JSON and binary stores.

A JSON document is one object (one branch). Numbers are read like sops' JSON store: integers
that fit in 64 bits are ints, everything else is a float. A binary document is a JSON document
whose plaintext is the string under ``data``. Output JSON is tab-indented like sops'.
"""

from __future__ import annotations

import json
from typing import Any

from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.tree import Branch, branch_to_mapping

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_int(text: str) -> int | float:
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else float(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


def load(data: bytes) -> list[Branch]:
    try:
        doc = json.loads(
            data,
            object_pairs_hook=Branch,
            parse_int=_parse_int,
            parse_constant=_reject_constant,
        )
    except (ValueError, UnicodeDecodeError) as err:
        # json errors quote no content, only positions; keep the class and position only.
        where = f" at line {err.lineno} column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        raise SopsFormatError(f"Error unmarshaling input JSON: invalid JSON{where}") from None
    if not isinstance(doc, Branch):
        raise SopsFormatError("Error unmarshaling input JSON: the document is not a JSON object")
    return [doc]


def emit(branches: list[Branch]) -> bytes:
    if len(branches) != 1:
        raise SopsFormatError("cannot emit a JSON document from more than one branch")
    text = json.dumps(branch_to_mapping(branches[0]), indent="\t", ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def emit_binary(branches: list[Branch]) -> bytes:
    if len(branches) != 1:
        raise SopsFormatError("error emitting binary store: there must be exactly one tree branch")
    for key, value in branches[0]:
        if key == "data":
            if isinstance(value, str):
                return value.encode("utf-8")
            if isinstance(value, bytes):
                return value
            raise SopsFormatError("error emitting binary store: 'data' key in tree does not have a string value")
    raise SopsFormatError("error emitting binary store: no binary data found in tree")
