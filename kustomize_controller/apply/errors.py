"""Errors of the apply engine. Every message about an object starts with ``Kind/namespace/name``.

::

    ApplyEngineError                 base; carries ``change_set`` (what was done before the failure)
    ├── DryRunError                  ``<ref> dry-run failed (<Reason>): <msg>`` — nothing of the stage written
    ├── ApplyFailedError             ``<ref> apply failed: <msg>``; carries ``entry`` (the object written)
    ├── ApplyStepError               other per-object failures (cleanup patch, recreate, stage wait)
    ├── PruneError                   ``delete failed, errors: <e1>;<e2>;``
    ├── HealthCheckError             ``timeout waiting for: [...]``,
    │                                ``failed early due to stalled resources: [...]``
    └── TerminalError                configuration errors that no retry can fix (``reason`` names the
        └── InvalidCELExpressionError   condition reason, e.g. ``InvalidCELExpression``)

Transient API errors (``kube.errors.is_transient``) raised by the client while the engine works are
wrapped in ``ApplyStepError`` with ``__cause__`` set, so callers can still inspect the cause.
"""

from __future__ import annotations

from kustomize_controller.apply.changeset import ChangeSet, ChangeSetEntry


class ApplyEngineError(Exception):
    def __init__(self, message: str, *, change_set: ChangeSet | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.change_set = change_set if change_set is not None else ChangeSet()

    def __str__(self) -> str:
        return self.message

    def maybe_stored(self) -> list[ChangeSetEntry]:
        """Objects outside ``change_set`` that the failed write may still have stored (none here)."""
        return []


class DryRunError(ApplyEngineError):
    """The server-side dry-run (the validation step) rejected an object."""


class ApplyFailedError(ApplyEngineError):
    """The real server-side apply of an object failed after every dry-run of its stage passed.

    ``entry`` is the object being written (its planned change-set entry), in neither ``change_set`` nor
    done: unless the server refused it (``refused``: a 4xx answer, nothing stored), it may have been
    stored and only the answer lost (timeout, cut connection, 5xx after the commit)."""

    def __init__(
        self, message: str, *, change_set: ChangeSet | None = None, entry: ChangeSetEntry | None = None,
        refused: bool = False,
    ) -> None:
        super().__init__(message, change_set=change_set)
        self.entry = entry
        self.refused = refused

    def maybe_stored(self) -> list[ChangeSetEntry]:
        return [] if self.refused or self.entry is None else [self.entry]


class ApplyStepError(ApplyEngineError):
    """Another per-object step failed: GET, metadata cleanup, recreate on immutable change, stage wait."""


class PruneError(ApplyEngineError):
    """One or more stale objects could not be deleted; ``change_set`` says what happened to each."""


class HealthCheckError(ApplyEngineError):
    """Objects did not become Current in time, or one became Failed (fail-fast)."""


class TerminalError(ApplyEngineError):
    """A configuration error: retrying cannot help. ``reason`` is the condition reason to report."""

    reason = "ReconciliationFailed"


class InvalidCELExpressionError(TerminalError):
    reason = "InvalidCELExpression"
