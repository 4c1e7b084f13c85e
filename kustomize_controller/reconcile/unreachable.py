"""Quick retries for a reconcile that failed only because the API server could not be reached.

Every control-plane upgrade restarts the API server; for those seconds requests fail with "connection
refused", "Server disconnected", a timeout or a 5xx. Upstream reports such a reconcile as
``ReconciliationFailed`` and waits its whole ``retryInterval`` (10 minutes by default), although the
server is back seconds later (measured: 12 of 300 Kustomizations stayed ``Ready=False`` after a 5 s
restart). Here:

- ``unreachable_cause(exc)`` finds, along the ``__cause__``/``__context__`` chain of a pipeline failure,
  the API error that makes it one of these (``TransportError``, 429 after the client's own
  ``Retry-After`` retries, 5xx; ``kube.errors.is_transient``), or ``None`` for every other failure;
- ``QuickRetries.next_delay(key)`` gives the delay before the next quick attempt for that
  Kustomization — ``base`` doubling up to ``cap`` seconds, ``attempts`` times (defaults 1, 2, 4, 8,
  16 s: about half a minute in all) — and ``None`` once they ran out: the failure is then reported as
  upstream reports it, and the count starts again;
- ``reset(key)`` after any reconcile that did not fail this way.

The reconciler, meanwhile, shows the reconcile as still in progress (``Ready=Unknown``,
``Reconciling=True`` reason ``ProgressingWithRetry`` naming the error) and sends no failure event.

Bounds: an entry exists only for a Kustomization between such a failure and its next other outcome.
Not promised: telling a restarting API server from one that keeps answering 5xx (an admission webhook
that is down): the latter is reported after the quick retries, half a minute later than upstream.
"""

from __future__ import annotations

from kustomize_controller.kube.errors import KubeError, is_transient


def unreachable_cause(exc: BaseException) -> KubeError | None:
    """The transient API error behind ``exc`` (itself included), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, KubeError) and is_transient(current):
            return current
        current = current.__cause__ or current.__context__
    return None


class QuickRetries:
    def __init__(self, *, base: float = 1.0, cap: float = 16.0, attempts: int = 5) -> None:
        self._base = base
        self._cap = cap
        self._attempts = attempts
        self._done: dict[tuple[str, str], int] = {}

    def next_delay(self, key: tuple[str, str]) -> float | None:
        done = self._done.get(key, 0)
        if done >= self._attempts:
            self._done.pop(key, None)
            return None
        self._done[key] = done + 1
        return float(min(self._cap, self._base * 2**done))

    def reset(self, key: tuple[str, str]) -> None:
        self._done.pop(key, None)

    def __len__(self) -> int:
        return len(self._done)


__all__ = ["QuickRetries", "unreachable_cause"]
