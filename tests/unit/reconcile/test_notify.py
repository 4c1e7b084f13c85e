import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import web

from kustomize_controller.reconcile.notify import (
    Notifier,
    WebhookSender,
    event_metadata,
    involved_object_ref,
)
from kustomize_controller.runtime.clock import FakeClock, RealClock

KS = {
    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
    "kind": "Kustomization",
    "metadata": {
        "name": "app",
        "namespace": "flux-system",
        "uid": "u-1",
        "resourceVersion": "7",
        "annotations": {"event.toolkit.fluxcd.io/team": "a", "other": "x"},
    },
}


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def record(
        self,
        involved: Mapping[str, Any],
        *,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str],
    ) -> None:
        self.events.append(
            {"involved": dict(involved), "type": event_type, "reason": reason, "message": message,
             "annotations": dict(annotations)}
        )


def test_metadata_has_revisions_extra_and_event_annotations_only() -> None:
    md = event_metadata(
        object_annotations=KS["metadata"]["annotations"],  # type: ignore[index]
        revision="main@sha1:abc",
        origin_revision="",
        extra={"kustomize.toolkit.fluxcd.io/commit_status": "update"},
    )
    assert md == {
        "kustomize.toolkit.fluxcd.io/revision": "main@sha1:abc",
        "kustomize.toolkit.fluxcd.io/commit_status": "update",
        "event.toolkit.fluxcd.io/team": "a",
    }


def test_involved_object_ref() -> None:
    assert involved_object_ref(KS) == {
        "kind": "Kustomization", "namespace": "flux-system", "name": "app", "uid": "u-1",
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "resourceVersion": "7",
    }


async def test_reason_falls_back_to_severity_and_type_follows_severity() -> None:
    rec = Recorder()
    notifier = Notifier(recorder=rec, webhook=None, clock=FakeClock())
    await notifier.emit(KS, severity="error", ready_reason="", message="boom")
    await notifier.emit(KS, severity="info", ready_reason="Progressing", message="ok", revision="r1")
    assert [(e["type"], e["reason"]) for e in rec.events] == [("Warning", "error"), ("Normal", "Progressing")]
    assert rec.events[1]["annotations"]["kustomize.toolkit.fluxcd.io/revision"] == "r1"


async def test_webhook_delivers_in_notification_controller_shape_and_retries_5xx() -> None:
    received: list[dict[str, Any]] = []
    statuses = [503, 200]

    async def handler(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.Response(status=statuses.pop(0))

    app = web.Application()
    app.router.add_post("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    clock = FakeClock()
    async with aiohttp.ClientSession() as session:
        sender = WebhookSender(url=f"http://127.0.0.1:{port}/", session=session, clock=clock)
        notifier = Notifier(recorder=Recorder(), webhook=sender, clock=clock)
        task = asyncio.create_task(sender.run())
        await notifier.emit(KS, severity="info", ready_reason="ReconciliationSucceeded", message="done")
        for _ in range(3000):  # real sockets: bounded by 30 s of real time, not by loop turns
            if clock.pending_sleepers:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the sender never waited to retry")
        await clock.advance(1.0)
        for _ in range(3000):
            if len(received) == 2:
                break
            await asyncio.sleep(0.01)
        task.cancel()
    await runner.cleanup()
    assert len(received) == 2
    event = received[1]
    assert event["involvedObject"]["kind"] == "Kustomization"
    assert event["severity"] == "info"
    assert event["reason"] == "ReconciliationSucceeded"
    assert event["reportingController"] == "kustomize-controller"
    assert event["metadata"] == {"event.toolkit.fluxcd.io/team": "a"}
    assert event["timestamp"].endswith("Z")


async def test_webhook_queue_is_bounded() -> None:
    async with aiohttp.ClientSession() as session:
        sender = WebhookSender(url="http://127.0.0.1:9/", session=session, clock=RealClock(), max_pending=2)
        for i in range(5):
            sender.submit({"n": i})
        assert sender.dropped == 3


async def test_webhook_event_without_metadata_has_no_metadata_key() -> None:
    # eventv1.Event's metadata is omitempty: a terminal error before the revision is known (an invalid
    # healthCheckExprs, a blocked cross-namespace source) is sent without the key (found by the differential run)
    class Collect:
        events: list[dict[str, Any]] = []

        def submit(self, event: dict[str, Any]) -> None:
            self.events.append(event)

    sender = Collect()
    bare = {**KS, "metadata": {k: v for k, v in KS["metadata"].items() if k != "annotations"}}  # type: ignore[attr-defined]
    notifier = Notifier(recorder=Recorder(), webhook=sender, clock=FakeClock())  # type: ignore[arg-type]
    await notifier.emit(bare, severity="error", ready_reason="InvalidCELExpression", message="bad")
    await notifier.emit(bare, severity="info", ready_reason="Progressing", message="ok", revision="main@sha1:1")
    assert "metadata" not in sender.events[0]
    assert sender.events[1]["metadata"] == {"kustomize.toolkit.fluxcd.io/revision": "main@sha1:1"}
    assert list(sender.events[1]) == ["involvedObject", "severity", "timestamp", "message", "reason", "metadata",
                                      "reportingController", "reportingInstance"]


async def test_webhook_429_is_a_duplicate_accepted_and_not_retried() -> None:
    # notification-controller answers 429 to an event it has seen within its rate-limit interval
    received: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.Response(status=429)

    app = web.Application()
    app.router.add_post("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    clock = FakeClock()
    async with aiohttp.ClientSession() as session:
        sender = WebhookSender(url=f"http://127.0.0.1:{port}/", session=session, clock=clock)
        task = asyncio.create_task(sender.run())
        sender.submit({"message": "one"})
        sender.submit({"message": "two"})
        for _ in range(3000):  # real sockets: bounded by 30 s of real time
            if len(received) == 2:
                break
            await asyncio.sleep(0.01)
        await clock.advance(60.0)  # a retry would have been due by now
        await asyncio.sleep(0.2)
        task.cancel()
    await runner.cleanup()
    assert [r["message"] for r in received] == ["one", "two"]
    assert not clock.pending_sleepers
