"""Events of a Kustomization: Kubernetes Events plus the optional notification-controller webhook.

What upstream does (fluxcd/pkg ``runtime/events.Recorder`` and the reconciler's ``event`` helper),
and we keep:

- reason = the current Ready condition reason, falling back to the severity (``info``/``error``);
  type Normal for info, Warning for error;
- metadata: ``kustomize.toolkit.fluxcd.io/revision`` and ``.../originRevision`` when known, extra
  keys from the caller (``.../commit_status: update`` on success), and every annotation of the
  Kustomization under ``event.toolkit.fluxcd.io/``;
- with ``--events-addr``, the same event is POSTed as JSON in the notification-controller
  ``event.toolkit.fluxcd.io/v1beta1`` shape, with a 5 s timeout, retried on connection errors and
  5xx; HTTP 429 means "duplicate, already accepted" and is not retried.

Where we differ: upstream POSTs inline, blocking the reconcile for up to the retry budget. We hand
the event to a bounded queue drained by one sender task owned by the manager; when the queue is
full the oldest pending event is dropped and logged. A reconcile never waits for, nor fails on, the
webhook. Not promised: delivery across restarts, ordering across objects.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

from kustomize_controller.api.meta import (
    CONTROLLER_NAME,
    EVENT_ANNOTATION_PREFIX,
    format_time,
)
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.logs import get_logger

_log = get_logger("events")

GROUP = "kustomize.toolkit.fluxcd.io"
REVISION_KEY = f"{GROUP}/revision"
ORIGIN_REVISION_KEY = f"{GROUP}/originRevision"
COMMIT_STATUS_KEY = f"{GROUP}/commit_status"
COMMIT_STATUS_UPDATE = "update"

SEVERITY_INFO = "info"
SEVERITY_ERROR = "error"


class KubeEventRecorder(Protocol):
    """The runtime's core/v1 Event recorder (never raises, never blocks for long)."""

    async def record(
        self,
        involved: Mapping[str, Any],
        *,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str],
    ) -> None: ...


def event_metadata(
    *,
    object_annotations: Mapping[str, str],
    revision: str,
    origin_revision: str,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    metadata = dict(extra or {})
    if revision:
        metadata[REVISION_KEY] = revision
    if origin_revision:
        metadata[ORIGIN_REVISION_KEY] = origin_revision
    for key, value in object_annotations.items():
        if key.startswith(EVENT_ANNOTATION_PREFIX):
            metadata[key] = value
    return metadata


def involved_object_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    ref = {
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "apiVersion": obj.get("apiVersion", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    return {k: v for k, v in ref.items() if v}


class Notifier:
    """Emits one event to the Kubernetes recorder and, when configured, to the webhook queue."""

    def __init__(
        self,
        *,
        recorder: KubeEventRecorder,
        webhook: WebhookSender | None,
        clock: Clock,
    ) -> None:
        self._recorder = recorder
        self._webhook = webhook
        self._clock = clock

    async def emit(
        self,
        obj: Mapping[str, Any],
        *,
        severity: str,
        ready_reason: str,
        message: str,
        revision: str = "",
        origin_revision: str = "",
        extra: Mapping[str, str] | None = None,
    ) -> None:
        annotations = obj.get("metadata", {}).get("annotations") or {}
        metadata = event_metadata(
            object_annotations=annotations, revision=revision, origin_revision=origin_revision, extra=extra
        )
        reason = ready_reason or severity
        event_type = "Warning" if severity == SEVERITY_ERROR else "Normal"
        involved = involved_object_ref(obj)
        await self._recorder.record(
            involved, event_type=event_type, reason=reason, message=message, annotations=metadata
        )
        if self._webhook is not None:
            event: dict[str, Any] = {
                "involvedObject": involved,
                "severity": severity,
                "timestamp": format_time(self._clock.now()),
                "message": message,
                "reason": reason,
            }
            if metadata:  # omitempty in eventv1.Event, as upstream sends it
                event["metadata"] = metadata
            event["reportingController"] = CONTROLLER_NAME
            if instance := socket.gethostname():
                event["reportingInstance"] = instance
            self._webhook.submit(event)


class WebhookSender:
    """Delivers events to ``--events-addr`` from a bounded queue, off the reconcile path.

    ``run()`` is a long-lived task; its owner (the manager) cancels it on shutdown. Events still
    queued then are dropped.
    """

    def __init__(
        self,
        *,
        url: str,
        session: aiohttp.ClientSession,
        clock: Clock,
        max_pending: int = 1000,
        retries: int = 4,
        timeout: float = 5.0,
    ) -> None:
        self._url = url
        self._session = session
        self._clock = clock
        self._pending: collections.deque[dict[str, Any]] = collections.deque()
        self._max_pending = max_pending
        self._retries = retries
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._wakeup = asyncio.Event()
        self.dropped = 0

    def submit(self, event: dict[str, Any]) -> None:
        if len(self._pending) >= self._max_pending:
            self._pending.popleft()
            self.dropped += 1
            _log.warning("event webhook queue full, dropping oldest event", url=self._url)
        self._pending.append(event)
        self._wakeup.set()

    async def run(self) -> None:
        while True:
            while not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
            await self._deliver(self._pending.popleft())

    async def _deliver(self, event: dict[str, Any]) -> None:
        body = json.dumps(event).encode()
        delay = 1.0
        for attempt in range(self._retries + 1):
            try:
                async with self._session.post(
                    self._url, data=body, headers={"Content-Type": "application/json"}, timeout=self._timeout
                ) as resp:
                    if resp.status < 500 or resp.status == 501:
                        # 2xx: delivered; 429: a duplicate the receiver already has; other 4xx:
                        # retrying cannot help.
                        if resp.status >= 400 and resp.status != 429:
                            _log.error("unable to record event", url=self._url, status=resp.status)
                        return
                    error = f"status {resp.status}"
            except (aiohttp.ClientError, TimeoutError) as err:
                error = str(err) or type(err).__name__
            if attempt == self._retries:
                _log.error("unable to record event", url=self._url, error=error)
                return
            await self._clock.sleep(delay)
            delay = min(delay * 2, 30.0)
