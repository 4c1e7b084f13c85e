import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.api.meta import Reason
from kustomize_controller.kube.errors import (
    ApiError,
    ConflictError,
    ForbiddenError,
    InternalServerError,
    NotFoundError,
    ServerTimeoutError,
    TooManyRequestsError,
    TransportError,
)
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.status import StatusPatcher, status_merge_patch
from kustomize_controller.runtime.clock import FakeClock

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def doc(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": "apps", "generation": 2},
        "spec": {"interval": "5m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "r"}},
        "status": status,
    }


class FakeClient:
    def __init__(self, failures: list[Exception] | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.failures = failures or []

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any, *,
                    patch_type: str, field_manager: str | None = None,
                    subresource: str | None = None) -> dict[str, Any]:
        self.calls.append({"body": body, "subresource": subresource, "type": patch_type,
                           "manager": field_manager, "ref": (kind, namespace, name)})
        if self.failures:
            raise self.failures.pop(0)
        return {}


def test_merge_patch_sets_changed_and_nulls_removed() -> None:
    patch = status_merge_patch({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 5, "d": 4})
    assert patch == {"b": 5, "d": 4, "c": None}
    assert status_merge_patch({"a": [1]}, {"a": [1]}) == {}


async def test_only_changes_are_sent_with_status_owner() -> None:
    obj = doc(observedGeneration=-1)
    client = FakeClient()
    patcher = StatusPatcher(client=client, obj=obj, clock=FakeClock())
    ks = parse_kustomization(obj)
    await patcher.patch(ks)
    assert client.calls == []  # nothing changed
    conditions.mark_true(
        ks.status.conditions, "Ready", Reason.RECONCILIATION_SUCCEEDED, "Applied revision: r",
        generation=2, now=NOW,
    )
    ks.status.last_applied_revision = "r"
    await patcher.patch(ks)
    (call,) = client.calls
    assert call["subresource"] == "status" and call["type"] == "merge"
    assert call["manager"] == "gotk-kustomize-controller"
    assert set(call["body"]["status"]) == {"conditions", "lastAppliedRevision"}
    await patcher.patch(ks)
    assert len(client.calls) == 1


async def test_patch_fields_writes_only_the_fields_named_and_the_next_patch_the_rest() -> None:
    from kustomize_controller.api.inventory import ResourceInventory, ResourceRef

    client = FakeClient()
    obj = doc(observedGeneration=-1)
    patcher = StatusPatcher(client=client, obj=obj, clock=FakeClock())
    ks = parse_kustomization(obj)
    conditions.mark_unknown(ks.status.conditions, "Ready", Reason.PROGRESSING, "Reconciliation in progress",
                            generation=2, now=NOW)
    ks.status.inventory = ResourceInventory(entries=[ResourceRef(id="apps_a__ConfigMap", v="v1")])
    await patcher.patch_fields(ks, ("inventory",))
    (call,) = client.calls
    assert call["body"] == {"status": {"inventory": {"entries": [{"id": "apps_a__ConfigMap", "v": "v1"}]}}}
    await patcher.patch_fields(ks, ("inventory",))
    assert len(client.calls) == 1  # already written
    await patcher.patch(ks)
    assert set(client.calls[1]["body"]["status"]) == {"conditions"}


async def test_finalizer_patched_on_the_object_before_status() -> None:
    client = FakeClient()
    obj = doc()
    patcher = StatusPatcher(client=client, obj=obj, clock=FakeClock())
    ks = parse_kustomization(obj)
    ks.metadata.finalizers.append("finalizers.fluxcd.io")
    ks.status.observed_generation = 2
    await patcher.patch(ks)
    assert [c["subresource"] for c in client.calls] == [None, "status"]
    assert client.calls[0]["body"] == {"metadata": {"finalizers": ["finalizers.fluxcd.io"]}}
    ks.metadata.finalizers.clear()
    await patcher.patch(ks)
    assert client.calls[2]["body"] == {"metadata": {"finalizers": None}}


async def patch_through_backoffs(client: FakeClient, *, rounds: int, attempts: int | None = None) -> None:
    """One status patch, the fake clock advanced past every backoff a retrying patcher would sleep."""
    clock = FakeClock()
    patcher = (StatusPatcher(client=client, obj=doc(), clock=clock) if attempts is None
               else StatusPatcher(client=client, obj=doc(), clock=clock, attempts=attempts))
    ks = parse_kustomization(doc())
    ks.status.last_attempted_revision = "r"
    task = asyncio.create_task(patcher.patch(ks))
    for _ in range(rounds):
        await asyncio.sleep(0)
        await clock.advance(10)
    await task


async def test_transient_errors_retried_then_raised() -> None:
    err = InternalServerError("etcd leader changed", status=500)
    client = FakeClient([err, err])
    await patch_through_backoffs(client, rounds=3, attempts=3)
    assert len(client.calls) == 3

    client = FakeClient([ForbiddenError("no", status=403)])
    with pytest.raises(ForbiddenError):
        await patch_through_backoffs(client, rounds=3)
    assert len(client.calls) == 1


async def test_not_found_while_deleting_is_fine() -> None:
    obj = doc()
    obj["metadata"]["finalizers"] = ["finalizers.fluxcd.io"]
    obj["metadata"]["deletionTimestamp"] = "2026-05-01T00:00:00Z"
    client = FakeClient([NotFoundError("gone", status=404)])
    patcher = StatusPatcher(client=client, obj=obj, clock=FakeClock())
    ks = parse_kustomization(obj)
    ks.metadata.finalizers.clear()
    ks.status.last_handled_reconcile_at = "now"
    await patcher.patch(ks)
    assert len(client.calls) == 1  # the status patch is not attempted on a vanished object


@pytest.mark.parametrize("shed", [
    TooManyRequestsError("Too many requests, please try again later.", status=429),
    InternalServerError("the server is shutting down", status=503),
], ids=["429", "5xx"])
async def test_an_answer_the_client_already_waited_out_is_not_retried_again(shed: ApiError) -> None:
    """The client sends a request again after each Retry-After (10 times); retrying on top would multiply them."""
    shed.waited_out = True  # as the client marks an answer that carried Retry-After
    client = FakeClient([shed] * 5)
    with pytest.raises(type(shed)):
        await patch_through_backoffs(client, rounds=6)
    assert len(client.calls) == 1


@pytest.mark.parametrize("err", [
    TooManyRequestsError("Too many requests", status=429),  # no Retry-After: the client did not retry it
    ConflictError("the object has been modified", status=409),
    ServerTimeoutError("the server was unable to return a response in the time allotted", status=504),
    InternalServerError("etcd leader changed", status=500),
    TransportError("connection refused"),
], ids=["429-without-retry-after", "conflict", "timeout", "5xx", "transport"])
async def test_conflicts_timeouts_and_server_errors_are_still_retried(err: Exception) -> None:
    client = FakeClient([err])
    await patch_through_backoffs(client, rounds=3)
    assert len(client.calls) == 2
