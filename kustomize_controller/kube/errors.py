"""Errors raised by the Kubernetes client, built from the API server's ``Status`` body.

The tree is split by what the caller does about an error::

    KubeError                       every failure of a call to the API
    ├── TransportError              no HTTP answer: connection refused/reset, TLS, timeout  (transient)
    └── ApiError                    the server answered with a non-2xx status
        ├── NotFoundError           404 NotFound
        ├── MethodNotAllowedError   405 MethodNotAllowed
        ├── ConflictError           409 Conflict (stale resourceVersion, SSA field conflict)
        │   └── AlreadyExistsError  409 AlreadyExists
        ├── GoneError               410 Expired / Gone (watch or list from a compacted resourceVersion)
        ├── InvalidError            422 Invalid (``details.causes`` names the fields)
        ├── ForbiddenError          403 Forbidden
        ├── UnauthorizedError       401 Unauthorized
        ├── TooManyRequestsError    429 TooManyRequests                                     (transient)
        ├── ServerTimeoutError      504 / reason ServerTimeout or Timeout                   (transient)
        └── InternalServerError     500, 502, 503 and other 5xx                             (transient)

``is_transient(err)`` says whether retrying the same request later may succeed. Mapping uses the
Status ``reason`` first (it is what client-go's ``apierrors.IsX`` functions look at) and falls back to
the HTTP code. An error about an object names it first: ``Kind/namespace/name: message``, so every
message a user sees starts with the object it is about.

Not promised: the server's ``message`` is passed through as is; ``details`` is the raw ``details``
mapping of the Status (or ``{}``), never validated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KubeError(Exception):
    """Base of every error raised by the Kubernetes client."""


class TransportError(KubeError):
    """No usable HTTP answer: connection failure, TLS failure, request timeout, broken stream."""

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.url = url


class ApiError(KubeError):
    """A non-2xx answer from the API server.

    Attributes: ``status`` (HTTP code), ``reason`` (Status reason, e.g. ``NotFound``; the class's when the
    server gave none), ``status_reason`` (the reason exactly as client-go's ``ReasonForError`` reports it:
    the Status body's, even empty — a 500 ``Status`` without one says nothing — or, for an answer that
    was no ``Status``, the one its code implies), ``message`` (server message), ``details`` (Status
    details mapping), and the object identity ``kind``, ``namespace``, ``name`` when known (from the
    request, completed from ``details``).
    ``waited_out``: the client already honoured this answer's ``Retry-After`` as often as it retries
    (a caller should not retry it again on top).
    """

    default_reason = ""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
        kind: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        status_reason: str | None = None,
    ) -> None:
        self.status = status
        self.reason = reason or self.default_reason
        self.status_reason = self.reason if status_reason is None else status_reason
        self.message = message
        self.details: Mapping[str, Any] = details or {}
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.waited_out = False
        super().__init__(self._render())

    @property
    def object_ref(self) -> str:
        """``Kind/namespace/name`` (or ``Kind/name`` when cluster-scoped); ``""`` when unknown."""
        if not self.name:
            return ""
        parts = [self.kind or "", self.namespace or "", self.name]
        return "/".join(p for p in parts if p)

    @property
    def causes(self) -> list[Mapping[str, Any]]:
        causes = self.details.get("causes") or []
        return [c for c in causes if isinstance(c, Mapping)]

    def _render(self) -> str:
        ref = self.object_ref
        return f"{ref}: {self.message}" if ref else self.message

    def __str__(self) -> str:
        return self._render()


class NotFoundError(ApiError):
    default_reason = "NotFound"


class MethodNotAllowedError(ApiError):
    default_reason = "MethodNotAllowed"


class ConflictError(ApiError):
    default_reason = "Conflict"


class AlreadyExistsError(ConflictError):
    default_reason = "AlreadyExists"


class GoneError(ApiError):
    default_reason = "Expired"


class InvalidError(ApiError):
    default_reason = "Invalid"


class ForbiddenError(ApiError):
    default_reason = "Forbidden"


class UnauthorizedError(ApiError):
    default_reason = "Unauthorized"


class TooManyRequestsError(ApiError):
    default_reason = "TooManyRequests"

    @property
    def retry_after_seconds(self) -> float | None:
        value = self.details.get("retryAfterSeconds")
        return float(value) if isinstance(value, int | float) else None


class ServerTimeoutError(ApiError):
    default_reason = "ServerTimeout"


class InternalServerError(ApiError):
    default_reason = "InternalError"


_BY_REASON: dict[str, type[ApiError]] = {
    "NotFound": NotFoundError,
    "AlreadyExists": AlreadyExistsError,
    "Conflict": ConflictError,
    "Invalid": InvalidError,
    "Gone": GoneError,
    "Expired": GoneError,
    "Forbidden": ForbiddenError,
    "Unauthorized": UnauthorizedError,
    "TooManyRequests": TooManyRequestsError,
    "ServerTimeout": ServerTimeoutError,
    "Timeout": ServerTimeoutError,
    "InternalError": InternalServerError,
    "ServiceUnavailable": InternalServerError,
    "MethodNotAllowed": MethodNotAllowedError,
}

_BY_CODE: dict[int, type[ApiError]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
    504: ServerTimeoutError,
}


def error_class_for(status: int, reason: str) -> type[ApiError]:
    """The error class for an HTTP status code and a Status reason (reason wins when known)."""
    by_reason = _BY_REASON.get(reason)
    if by_reason is not None:
        return by_reason
    by_code = _BY_CODE.get(status)
    if by_code is not None:
        return by_code
    if status >= 500:
        return InternalServerError
    return ApiError


def api_error_from_status(
    status: int,
    body: Any,
    *,
    kind: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
) -> ApiError:
    """Build the matching ``ApiError`` from an HTTP status code and a decoded response body.

    ``body`` is the decoded JSON (a ``Status`` object when the server speaks Kubernetes) or any other
    value (bytes/str when it did not). The object identity given by the caller wins over the one in
    ``details``; ``details.kind`` is a resource name (``configmaps``) and is used only as a fallback.
    """
    reason = ""
    message = ""
    details: Mapping[str, Any] = {}
    code = status
    status_reason: str | None = None  # no Status body: the class's reason, as client-go derives it from the code
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        reason = status_reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
        raw_details = body.get("details")
        if isinstance(raw_details, Mapping):
            details = raw_details
        if isinstance(body.get("code"), int) and body["code"]:
            code = body["code"]
    elif isinstance(body, bytes | bytearray):
        message = bytes(body).decode("utf-8", "replace").strip()
    elif isinstance(body, str):
        message = body.strip()
    if not message:
        message = f"the server responded with HTTP {status}" + (f" ({reason})" if reason else "")
    cls = error_class_for(code, reason)
    return cls(
        message,
        status=code,
        reason=reason,
        details=details,
        kind=kind or (str(details["kind"]) if details.get("kind") else None),
        namespace=namespace,
        name=name or (str(details["name"]) if details.get("name") else None),
        status_reason=status_reason,
    )


def is_transient(err: BaseException) -> bool:
    """True when retrying the same request later may succeed (transport, 429, timeouts, 5xx)."""
    if isinstance(err, TransportError):
        return True
    if isinstance(err, TooManyRequestsError | ServerTimeoutError | InternalServerError):
        return True
    return isinstance(err, ApiError) and err.status >= 500


__all__ = [
    "AlreadyExistsError",
    "ApiError",
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "InternalServerError",
    "InvalidError",
    "KubeError",
    "MethodNotAllowedError",
    "NotFoundError",
    "ServerTimeoutError",
    "TooManyRequestsError",
    "TransportError",
    "UnauthorizedError",
    "api_error_from_status",
    "error_class_for",
    "is_transient",
]
