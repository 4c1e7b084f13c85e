import json

from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.events import EventRecorder, object_reference
from tests.unit.runtime.fakeapi import FakeApi

OBJ = {
    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
    "kind": "Kustomization",
    "metadata": {"name": "app", "namespace": "flux-system", "uid": "u-1", "resourceVersion": "7"},
}


def recorder(api: FakeApi, clock: FakeClock) -> EventRecorder:
    return EventRecorder(
        client=api.client(), clock=clock, reporting_controller="kustomize-controller", reporting_instance="pod-1"
    )


def events(api: FakeApi) -> list[dict]:
    return [o for (r, _, _), o in api.objects.items() if r == "events"]


async def test_event_shape() -> None:
    api, clock = FakeApi(), FakeClock()
    rec = recorder(api, clock)
    await rec.record(
        OBJ,
        event_type="Normal",
        reason="ReconciliationSucceeded",
        message="applied",
        annotations={"kustomize.toolkit.fluxcd.io/revision": "main@sha1:abc"},
    )
    assert rec.pending == 1 and events(api) == []  # queued, not sent inline
    await rec.flush()
    [ev] = events(api)
    assert ev["metadata"]["namespace"] == "flux-system"
    assert ev["metadata"]["name"].startswith("app.")
    assert ev["metadata"]["annotations"] == {"kustomize.toolkit.fluxcd.io/revision": "main@sha1:abc"}
    assert ev["involvedObject"] == {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": "app",
        "uid": "u-1",
        "resourceVersion": "7",
    }
    assert (ev["type"], ev["reason"], ev["message"], ev["count"]) == ("Normal", "ReconciliationSucceeded", "applied", 1)
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == "2026-01-01T00:00:00Z"
    assert ev["source"] == {"component": "kustomize-controller"}
    assert ev["reportingComponent"] == "kustomize-controller" and ev["reportingInstance"] == "pod-1"


async def test_identical_events_are_aggregated() -> None:
    api, clock = FakeApi(), FakeClock()
    rec = recorder(api, clock)
    for _ in range(3):
        rec.event(OBJ, event_type="Warning", reason="HealthCheckFailed", message="timeout")
        await rec.flush()
        await clock.advance(30)
    rec.event(OBJ, event_type="Warning", reason="HealthCheckFailed", message="other message")
    await rec.flush()
    evs = sorted(events(api), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in evs] == [("other message", 1), ("timeout", 3)]
    timeout_event = evs[1]
    assert timeout_event["lastTimestamp"] == "2026-01-01T00:01:00Z"
    assert timeout_event["firstTimestamp"] == "2026-01-01T00:00:00Z"
    patch = json.loads(api.writes("PATCH")[-1].body or b"")
    assert patch == {"count": 3, "lastTimestamp": "2026-01-01T00:01:00Z"}


async def test_expired_event_is_recreated() -> None:
    api, clock = FakeApi(), FakeClock()
    rec = recorder(api, clock)
    rec.event(OBJ, event_type="Normal", reason="R", message="m")
    await rec.flush()
    api.objects.clear()  # the API server's event TTL removed it
    rec.event(OBJ, event_type="Normal", reason="R", message="m")
    await rec.flush()
    assert [e["count"] for e in events(api)] == [1]


async def test_api_failures_never_reach_the_caller() -> None:
    api, clock = FakeApi(), FakeClock()
    rec = recorder(api, clock)
    api.down.add("events")
    rec.event(OBJ, event_type="Normal", reason="R", message="m")
    await rec.flush()  # logged and dropped
    rec.event({"not": "an object"}, event_type="Normal", reason="R", message="m")
    await rec.flush()
    assert events(api) == []


async def test_full_queue_drops_the_oldest() -> None:
    api, clock = FakeApi(), FakeClock()
    rec = EventRecorder(client=api.client(), clock=clock, queue_size=2)
    for i in range(3):
        rec.event(OBJ, event_type="Normal", reason="R", message=str(i))
    assert rec.dropped == 1
    await rec.flush()
    assert sorted(e["message"] for e in events(api)) == ["1", "2"]


def test_reference_from_object_or_reference() -> None:
    ref = object_reference(OBJ)
    assert object_reference(ref) == ref
    assert "uid" not in object_reference({"kind": "ConfigMap", "name": "x", "namespace": "n"})
