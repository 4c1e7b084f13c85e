import pytest

from kustomize_controller.kube import errors as e


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", e.NotFoundError),
        (409, "AlreadyExists", e.AlreadyExistsError),
        (409, "Conflict", e.ConflictError),
        (422, "Invalid", e.InvalidError),
        (410, "Expired", e.GoneError),
        (410, "Gone", e.GoneError),
        (403, "Forbidden", e.ForbiddenError),
        (401, "Unauthorized", e.UnauthorizedError),
        (429, "TooManyRequests", e.TooManyRequestsError),
        (504, "Timeout", e.ServerTimeoutError),
        (500, "ServerTimeout", e.ServerTimeoutError),
        (500, "InternalError", e.InternalServerError),
        (503, "ServiceUnavailable", e.InternalServerError),
        (405, "MethodNotAllowed", e.MethodNotAllowedError),
        # no reason: the HTTP code decides
        (404, "", e.NotFoundError),
        (502, "", e.InternalServerError),
        (418, "", e.ApiError),
    ],
)
def test_status_maps_to_the_error_class(code: int, reason: str, cls: type[e.ApiError]) -> None:
    body = {"kind": "Status", "reason": reason, "message": "boom", "code": code}
    err = e.api_error_from_status(code, body)
    assert type(err) is cls
    assert err.status == code
    assert err.message == "boom"


def test_already_exists_is_a_conflict() -> None:
    assert issubclass(e.AlreadyExistsError, e.ConflictError)


def test_message_names_the_object_first() -> None:
    body = {
        "kind": "Status",
        "reason": "NotFound",
        "message": 'configmaps "x" not found',
        "code": 404,
        "details": {"name": "x", "kind": "configmaps"},
    }
    err = e.api_error_from_status(404, body, kind="ConfigMap", namespace="ns", name="x")
    assert str(err) == 'ConfigMap/ns/x: configmaps "x" not found'
    assert err.object_ref == "ConfigMap/ns/x"
    cluster = e.api_error_from_status(404, body, kind="Namespace", name="x")
    assert str(cluster).startswith("Namespace/x: ")


def test_identity_falls_back_to_status_details() -> None:
    body = {
        "kind": "Status",
        "reason": "Conflict",
        "message": "m",
        "code": 409,
        "details": {"name": "web", "kind": "deployments", "causes": [{"field": ".spec"}, "junk"]},
    }
    err = e.api_error_from_status(409, body)
    assert (err.kind, err.name) == ("deployments", "web")
    assert err.causes == [{"field": ".spec"}]


def test_non_status_bodies_still_give_a_message() -> None:
    assert e.api_error_from_status(502, b"bad gateway\n").message == "bad gateway"
    assert e.api_error_from_status(500, {}).message == "the server responded with HTTP 500"
    assert isinstance(e.api_error_from_status(500, "x"), e.InternalServerError)


def test_status_code_in_body_wins_over_http_code() -> None:
    err = e.api_error_from_status(200, {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
    assert isinstance(err, e.GoneError) and err.status == 410


def test_transient_classification() -> None:
    assert e.is_transient(e.TransportError("refused"))
    assert e.is_transient(e.TooManyRequestsError("slow down", status=429))
    assert e.is_transient(e.InternalServerError("oops", status=500))
    assert e.is_transient(e.ServerTimeoutError("t", status=504))
    assert e.is_transient(e.ApiError("weird 5xx", status=599))
    for err in (
        e.NotFoundError("x", status=404),
        e.ConflictError("x", status=409),
        e.InvalidError("x", status=422),
        e.ForbiddenError("x", status=403),
    ):
        assert not e.is_transient(err)
    assert not e.is_transient(ValueError())


def test_retry_after_from_details() -> None:
    err = e.api_error_from_status(
        429, {"kind": "Status", "reason": "TooManyRequests", "message": "m", "details": {"retryAfterSeconds": 3}}
    )
    assert isinstance(err, e.TooManyRequestsError)
    assert err.retry_after_seconds == 3.0
