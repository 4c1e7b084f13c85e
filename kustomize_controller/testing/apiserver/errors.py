"""API errors as the real kube-apiserver reports them: ``Status`` bodies with reason, code and details.

Every failure a handler can produce is an ``ApiStatusError`` carrying the exact ``Status`` object the
real server would send; the HTTP layer serialises it unchanged. The constructors below reproduce the
message shapes of ``k8s.io/apimachinery/pkg/api/errors`` (for example ``configmaps "x" not found``,
``Deployment.apps "x" is invalid: spec.selector: Invalid value: ...: field is immutable``).

Not promised: localisation-free Go ``%#v`` renderings of values inside ``Invalid value:`` — values are
rendered as JSON, which is what a reader needs and what tests should not match on.
"""

from __future__ import annotations

import json
from typing import Any


def qualified_resource(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


class ApiStatusError(Exception):
    """A request failure rendered as a ``Status`` object (``body``) with HTTP status ``code``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def _details(name: str | None, group: str, kind: str, causes: list[dict[str, str]] | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    if causes:
        details["causes"] = causes
    return details


def not_found(resource: str, group: str, name: str) -> ApiStatusError:
    return ApiStatusError(
        404,
        "NotFound",
        f'{qualified_resource(resource, group)} "{name}" not found',
        _details(name, group, resource),
    )


def page_not_found() -> ApiStatusError:
    return ApiStatusError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(resource: str, group: str, name: str) -> ApiStatusError:
    return ApiStatusError(
        409,
        "AlreadyExists",
        f'{qualified_resource(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(resource: str, group: str, name: str, why: str) -> ApiStatusError:
    return ApiStatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified_resource(resource, group)} "{name}": {why}',
        _details(name, group, resource),
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def render_value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class FieldError:
    """One entry of an Invalid error: ``field: Kind: detail`` (``field.Error`` in apimachinery)."""

    def __init__(self, field: str, error_type: str, detail: str, value: Any = None, *, show_value: bool = True,
                 reason: str | None = None):
        self.field = field
        self.error_type = error_type
        self.detail = detail
        self.value = value
        self.show_value = show_value
        # the cause's reason when it is not the one the message word implies (a TypeInvalid error reads
        # "Invalid value" but is reported as FieldValueTypeInvalid)
        self.reason = reason

    _REASONS = {
        "Required value": "FieldValueRequired",
        "Invalid value": "FieldValueInvalid",
        "Forbidden": "FieldValueForbidden",
        "Duplicate value": "FieldValueDuplicate",
        "Unsupported value": "FieldValueNotSupported",
        "Too long": "FieldValueTooLong",
    }

    def body_message(self) -> str:
        if self.error_type == "Invalid value" and self.show_value:
            return f"{self.error_type}: {render_value(self.value)}: {self.detail}"
        if self.detail:
            return f"{self.error_type}: {self.detail}"
        return self.error_type

    def cause(self) -> dict[str, str]:
        return {"reason": self.reason or self._REASONS.get(self.error_type, "FieldValueInvalid"),
                "message": self.body_message(),
                "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.body_message()}"


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiStatusError:
    qualified_kind = f"{kind}.{group}" if group else kind
    if len(errors) == 1:
        aggregate = str(errors[0])
    else:
        aggregate = "[" + ", ".join(str(e) for e in errors) + "]"
    return ApiStatusError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {aggregate}',
        _details(name, group, kind, [e.cause() for e in errors]),
    )


def bad_request(message: str) -> ApiStatusError:
    return ApiStatusError(400, "BadRequest", message)


def undecodable(kind: str, version: str, detail: str) -> ApiStatusError:
    """A request body the typed decoder refuses (``transformDecodeError``)."""
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')


def undecodable_patch(patched_json: str, detail: str) -> ApiStatusError:
    """A JSON or merge patch whose result the typed decoder refuses: an Invalid error of no kind and no
    name (`` "" is invalid: patch: Invalid value: "<the patched object>": <why>``)."""
    return invalid("", "", "", [FieldError("patch", "Invalid value", detail, patched_json)])


def gone_expired(message: str) -> ApiStatusError:
    return ApiStatusError(410, "Expired", message)


def method_not_allowed() -> ApiStatusError:
    return ApiStatusError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def unsupported_media_type(content_type: str) -> ApiStatusError:
    return ApiStatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
        f"application/strategic-merge-patch+json (got {content_type!r})",
    )


def strategic_merge_unsupported() -> ApiStatusError:
    """A strategic merge patch of a custom resource: the patch types a custom resource accepts, no "got"."""
    return ApiStatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    )


def unauthorized() -> ApiStatusError:
    return ApiStatusError(401, "Unauthorized", "Unauthorized")


def forbidden(resource: str, group: str, name: str | None, why: str,
              causes: list[dict[str, str]] | None = None) -> ApiStatusError:
    qualified = qualified_resource(resource, group)
    subject = f'{qualified} "{name}"' if name else qualified
    return ApiStatusError(403, "Forbidden", f"{subject} is forbidden: {why}", _details(name, group, resource, causes))


def forbidden_path(user: str, verb: str, path: str) -> ApiStatusError:
    return ApiStatusError(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{path}"', {})


def internal_error(message: str) -> ApiStatusError:
    return ApiStatusError(500, "InternalError", f"Internal error occurred: {message}",
                          {"causes": [{"message": message}]})


def too_many_requests(message: str = "Too many requests, please try again later.") -> ApiStatusError:
    return ApiStatusError(429, "TooManyRequests", message, {"retryAfterSeconds": 1})


def status_for_code(code: int, message: str) -> ApiStatusError:
    """A generic Status for fault injection: the reason the real server uses for ``code``."""
    reasons = {
        400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
        409: "Conflict", 410: "Gone", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
        503: "ServiceUnavailable", 504: "Timeout",
    }
    return ApiStatusError(code, reasons.get(code, "Unknown"), message)
