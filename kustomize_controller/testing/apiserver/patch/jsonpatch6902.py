"""RFC 6902 JSON patch through the ``jsonpatch`` package, with the real server's error statuses.

A body that is not a JSON patch document is 400 BadRequest; a patch that does not apply (a failed ``test``,
a missing path) is 422 with the patch library's message, as kube-apiserver answers.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer

from ..errors import ApiStatusError, bad_request


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    try:
        patch = jsonpatch.JsonPatch(operations)
        result = patch.apply(target, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as err:
        raise ApiStatusError(422, "Invalid", str(err)) from err
    except (KeyError, TypeError, ValueError) as err:
        raise bad_request(f"invalid JSON patch: {err}") from err
    if not isinstance(result, dict):
        raise ApiStatusError(422, "Invalid", "the patched document is not an object")
    return result
