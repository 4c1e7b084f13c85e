"""Which failures mean "the API server could not be reached", and the quick retries' schedule."""

from kustomize_controller.apply.errors import ApplyFailedError
from kustomize_controller.kube.errors import (
    ForbiddenError,
    InternalServerError,
    InvalidError,
    TooManyRequestsError,
    TransportError,
)
from kustomize_controller.reconcile.apply_step import PipelineFailure
from kustomize_controller.reconcile.unreachable import QuickRetries, unreachable_cause


def _wrapped(cause: BaseException) -> PipelineFailure:
    """The shape apply_step produces: PipelineFailure raised while handling an engine error from a kube error."""
    try:
        try:
            raise ApplyFailedError("ConfigMap/ns/a apply failed: boom") from cause
        except ApplyFailedError:
            raise PipelineFailure("ConfigMap/ns/a apply failed: boom")  # noqa: B904 (as apply_step._fail)
    except PipelineFailure as failure:
        return failure


def test_transport_errors_5xx_and_persisting_429_are_unreachable() -> None:
    for cause in (
        TransportError("Cannot connect to host 10.0.0.1:6443"),
        TransportError("Server disconnected"),
        InternalServerError("the server is currently unable to handle the request", status=503),
        TooManyRequestsError("slow down", status=429),
    ):
        assert unreachable_cause(_wrapped(cause)) is cause


def test_answers_about_the_request_are_not() -> None:
    for cause in (ForbiddenError("no", status=403), InvalidError("bad", status=422)):
        assert unreachable_cause(_wrapped(cause)) is None
    assert unreachable_cause(PipelineFailure("build failed")) is None


def test_schedule_doubles_to_the_cap_then_reports_and_starts_again() -> None:
    retries = QuickRetries(base=1, cap=8, attempts=5)
    key = ("ns", "app")
    assert [retries.next_delay(key) for _ in range(6)] == [1, 2, 4, 8, 8, None]
    assert len(retries) == 0
    assert retries.next_delay(key) == 1
    retries.reset(key)
    assert retries.next_delay(key) == 1 and retries.next_delay(("ns", "other")) == 1
