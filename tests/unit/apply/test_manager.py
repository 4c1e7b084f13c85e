from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.drift import compile_ignore_rules
from kustomize_controller.apply.errors import ApplyFailedError, ApplyStepError, DryRunError
from kustomize_controller.apply.manager import (
    ApplyOptions,
    ResourceManager,
    dry_run_error_message,
    is_immutable_error,
    strip_invalid_ca_bundle,
)
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.errors import (
    ConflictError,
    ForbiddenError,
    InternalServerError,
    InvalidError,
    NotFoundError,
    TransportError,
    api_error_from_status,
)
from kustomize_controller.runtime.clock import FakeClock
from tests.unit.apply.fakes import FakeClient, cm


def manager(client: FakeClient, clock: FakeClock | None = None) -> ResourceManager:
    return ResourceManager(client=client, clock=clock or FakeClock(), concurrency=2)


def ns(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


async def test_creates_then_unchanged_without_writes() -> None:
    client = FakeClient()
    rm = manager(client)
    objs = [cm("b"), cm("a")]
    cs = await rm.apply_all_staged(objs, ApplyOptions())
    assert str(cs) == "ConfigMap/default/a created\nConfigMap/default/b created"
    before = len(client.writes())
    cs2 = await rm.apply_all_staged(objs, ApplyOptions())
    assert [e.action for e in cs2] == [Action.UNCHANGED, Action.UNCHANGED]
    assert len(client.writes()) == before


async def test_configured_when_live_differs() -> None:
    client = FakeClient()
    client.seed(cm("a", data={"k": "old"}))
    cs = await manager(client).apply_all(cm_list := [cm("a", data={"k": "new"})], ApplyOptions())
    assert str(cs) == "ConfigMap/default/a configured"
    assert client.objects[("", "ConfigMap", "default", "a")]["data"] == {"k": "new"}
    assert cm_list[0]["data"] == {"k": "new"}  # input not mutated beyond copies


async def test_failed_dry_run_writes_nothing_in_the_stage() -> None:
    client = FakeClient()
    client.faults[("apply", "bad", True)] = InvalidError(
        'ConfigMap "bad" is invalid: data: Invalid value', status=422, kind="ConfigMap", name="bad"
    )
    with pytest.raises(DryRunError) as info:
        await manager(client).apply_all_staged([cm("a"), cm("bad"), cm("c")], ApplyOptions())
    assert str(info.value) == (
        'ConfigMap/default/bad dry-run failed (Invalid): ConfigMap "bad" is invalid: data: Invalid value'
    )
    assert client.writes() == []


async def test_failed_dry_run_in_later_stage_keeps_earlier_stage_change_set() -> None:
    client = FakeClient()
    client.faults[("apply", "bad", True)] = InvalidError("nope", status=422)
    with pytest.raises(DryRunError) as info:
        await manager(client).apply_all_staged([ns("team"), cm("bad", ns="team")], ApplyOptions())
    assert str(info.value.change_set) == "Namespace/team created"
    assert [c.key[1] for c in client.writes()] == ["Namespace"]


async def test_apply_failure_carries_what_was_written() -> None:
    client = FakeClient()
    client.faults[("apply", "b", False)] = InvalidError("denied by webhook", status=422)
    with pytest.raises(ApplyFailedError) as info:
        await manager(client).apply_all_staged([cm("a"), cm("b")], ApplyOptions())
    assert str(info.value) == "ConfigMap/default/b apply failed: denied by webhook"
    assert str(info.value.change_set) == "ConfigMap/default/a created"
    assert info.value.maybe_stored() == []  # a 4xx: the server refused it, nothing was stored


@pytest.mark.parametrize("error", [
    InternalServerError("etcd request timed out", status=500),
    TransportError("Server disconnected"),
], ids=["5xx", "connection-lost"])
async def test_a_failed_write_whose_answer_may_be_lost_names_its_object(error: Exception) -> None:
    """A 5xx or a lost connection may come after the server stored the object: the error names it, so
    that the caller keeps it in the inventory (it would be orphaned by a revision without it)."""
    client = FakeClient()
    client.seed(cm("b", data={"k": "old"}))
    client.faults[("apply", "b", False)] = error
    with pytest.raises(ApplyFailedError) as info:
        await manager(client).apply_all_staged([cm("a"), cm("b", data={"k": "new"}), cm("c")], ApplyOptions())
    assert str(info.value) == f"ConfigMap/default/b apply failed: {error}"
    assert str(info.value.change_set) == "ConfigMap/default/a created"
    assert [str(e) for e in info.value.maybe_stored()] == ["ConfigMap/default/b configured"]
    assert info.value.maybe_stored()[0].version == "v1"


async def test_a_refused_read_leaves_the_decision_to_the_dry_run() -> None:
    # upstream's ApplyAll ignores the GET's error: an impersonated tenant refused both reads and writes is
    # told what the dry-run (its patch) was refused, not the GET (found by the differential run)
    client = FakeClient()
    client.faults[("get", "a", False)] = ForbiddenError('configmaps "a" is forbidden: cannot get', status=403)
    client.faults[("apply", "a", True)] = ForbiddenError('configmaps "a" is forbidden: cannot patch', status=403)
    with pytest.raises(DryRunError) as info:
        await manager(client).apply_all_staged([cm("a")], ApplyOptions())
    assert str(info.value) == (
        'ConfigMap/default/a dry-run failed (Forbidden): configmaps "a" is forbidden: cannot patch')
    # one allowed to patch but not to read applies
    client.faults.pop(("apply", "a", True))
    cs = await manager(client).apply_all_staged([cm("a")], ApplyOptions())
    assert str(cs) == "ConfigMap/default/a created"


async def test_skip_rules() -> None:
    client = FakeClient()
    client.seed(cm("live-disabled", labels={"kustomize.toolkit.fluxcd.io/reconcile": "Disabled"}))
    client.seed(cm("exists", data={"k": "theirs"}))
    objs = [
        cm("live-disabled", data={"k": "x"}),
        cm("ignored", annotations={"kustomize.toolkit.fluxcd.io/ssa": "ignore"}),
        cm("exists", annotations={"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}),
        cm("fresh", annotations={"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}),
    ]
    cs = await manager(client).apply_all(objs, ApplyOptions())
    assert cs.to_map() == {
        "ConfigMap/default/exists": "skipped",
        "ConfigMap/default/fresh": "created",
        "ConfigMap/default/ignored": "skipped",
        "ConfigMap/default/live-disabled": "skipped",
    }
    assert client.objects[("", "ConfigMap", "default", "exists")]["data"] == {"k": "theirs"}
    written = {c.key[3] for c in client.writes()}
    assert written == {"fresh"}


async def test_immutable_error_without_force_fails_clearly() -> None:
    client = FakeClient()
    client.seed(cm("a"))
    client.faults[("apply", "a", True)] = InvalidError("field is immutable", status=422, kind="ConfigMap", name="a")
    with pytest.raises(DryRunError, match=r"^ConfigMap/default/a dry-run failed \(Invalid\): field is immutable$"):
        await manager(client).apply_all([cm("a", data={"k": "2"})], ApplyOptions())
    assert client.writes() == []


async def test_force_recreates_on_immutable_error() -> None:
    client = FakeClient(linger_gets=2)
    client.seed(cm("a"))
    calls = {"n": 0}

    def fail_first() -> InvalidError | None:
        calls["n"] += 1
        return InvalidError("field is immutable", status=422) if calls["n"] == 1 else None

    client.faults[("apply", "a", True)] = fail_first
    clock = FakeClock()
    rm = manager(client, clock)
    import asyncio

    task = asyncio.create_task(rm.apply_all([cm("a", data={"k": "2"})], ApplyOptions(force=True)))
    for _ in range(10):
        await clock.advance(2)
    cs = await task
    assert str(cs) == "ConfigMap/default/a created"
    verbs = [c.verb for c in client.writes()]
    assert verbs == ["delete", "apply"]
    assert client.writes()[0].body == "Background"


async def test_force_selector_on_live_object() -> None:
    client = FakeClient()
    client.seed(cm("a", annotations={"kustomize.toolkit.fluxcd.io/force": "Enabled"}))
    seen = {"n": 0}

    def once() -> ConflictError | None:
        seen["n"] += 1
        return ConflictError("conflict", status=409) if seen["n"] == 1 else None

    client.faults[("apply", "a", True)] = once
    cs = await manager(client).apply_all([cm("a", data={"k": "2"})], ApplyOptions())
    assert [e.action for e in cs] == [Action.CREATED]


async def test_recreate_wait_times_out() -> None:
    client = FakeClient(linger_gets=1000)
    client.seed(cm("a"))
    client.faults[("apply", "a", True)] = InvalidError("x is immutable", status=422)
    clock = FakeClock()
    import asyncio

    task = asyncio.create_task(manager(client, clock).apply_all([cm("a")], ApplyOptions(force=True, wait_timeout=10)))
    for _ in range(10):
        await clock.advance(2)
    with pytest.raises(ApplyStepError, match="failed to wait for object to be deleted"):
        await task


async def test_cleanup_patch_takes_over_kubectl_fields_then_applies() -> None:
    client = FakeClient()
    live = cm("a")
    live["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    live["metadata"]["managedFields"] = [
        {"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:data": {}}}
    ]
    client.seed(live)
    desired = cm("a")
    desired["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    cs = await manager(client).apply_all([desired], ApplyOptions())
    assert [e.action for e in cs] == [Action.CONFIGURED]
    patch = next(c for c in client.writes() if c.verb == "patch").body
    assert {"op": "remove", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"} in patch
    mf = next(op for op in patch if op["path"] == "/metadata/managedFields")["value"]
    assert mf[-1]["manager"] == "kustomize-controller" and mf[-1]["operation"] == "Apply"


async def test_merge_mode_skips_cleanup() -> None:
    client = FakeClient()
    live = cm("a", annotations={"kustomize.toolkit.fluxcd.io/ssa": "merge"})
    live["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {}}]
    client.seed(live)
    cs = await manager(client).apply_all(
        [cm("a", annotations={"kustomize.toolkit.fluxcd.io/ssa": "merge"})], ApplyOptions()
    )
    assert [e.action for e in cs] == [Action.UNCHANGED]
    assert client.writes() == []


async def test_unknown_kind_dry_run_error() -> None:
    client = FakeClient(unknown_kinds={"Widget"})
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
    with pytest.raises(DryRunError) as info:
        await manager(client).apply_all_staged([widget], ApplyOptions())
    assert str(info.value) == (
        'Widget/default/w dry-run failed: no matches for kind "Widget" in version "example.com/v1"'
    )


async def test_definitions_stage_waits_for_current() -> None:
    client = FakeClient()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {},
    }
    clock = FakeClock()
    import asyncio

    task = asyncio.create_task(manager(client, clock).apply_all_staged([crd, cm("a")], ApplyOptions()))
    for _ in range(5):
        await clock.advance(2)
    # the CRD never gets Established=True in the fake: the stage wait must time out at 60 s
    assert not task.done()
    for _ in range(30):
        await clock.advance(2)
    with pytest.raises(ApplyStepError) as info:
        await task
    assert str(info.value) == (
        "timeout waiting for: [CustomResourceDefinition/widgets.example.com status: 'InProgress']"
    )
    assert str(info.value.change_set) == "CustomResourceDefinition/widgets.example.com created"
    assert ("", "ConfigMap", "default", "a") not in client.objects


def test_is_immutable_error() -> None:
    assert is_immutable_error(InvalidError("x", status=422))
    assert is_immutable_error(ConflictError("x", status=409))
    assert is_immutable_error(RuntimeError("spec.selector: field is immutable"))
    assert is_immutable_error(RuntimeError("cannot change immutable field"))
    assert not is_immutable_error(NotFoundError("x", status=404))


@pytest.mark.parametrize(
    ("err", "ref", "expected"),
    [
        (
            NotFoundError('namespaces "x" not found', status=404),
            ObjRef("", "ConfigMap", "x", "a"),
            'ConfigMap/x/a not found: namespaces "x" not found',
        ),
        (
            NotFoundError("the server could not find", status=404),
            ObjRef("", "ConfigMap", "", "a"),
            "ConfigMap/a namespace not specified: the server could not find",
        ),
        (
            ConflictError(
                "Apply failed with 1 conflict",
                status=409,
                details={"causes": [{"reason": "FieldManagerConflict", "field": ".data.k"}]},
            ),
            ObjRef("", "ConfigMap", "d", "a"),
            "ConfigMap/d/a dry-run failed (FieldManagerConflict): Apply failed with 1 conflict",
        ),
        (
            InvalidError("bad", status=422),
            ObjRef("apps", "Deployment", "d", "x"),
            "Deployment/d/x dry-run failed (Invalid): bad",
        ),
    ],
)
def test_dry_run_error_message(err: Exception, ref: ObjRef, expected: str) -> None:
    assert dry_run_error_message(ref, err) == expected


def test_dry_run_error_reason_is_the_status_reason_even_when_empty() -> None:
    # kube-apiserver answers a typed-patch failure with a 500 Status that has no reason: client-go's
    # ReasonForError gives "" and upstream writes no parentheses (found by the differential run)
    message = ("failed to create typed patch object (ns/settings; /v1, Kind=ConfigMap): .data.count: expected "
               "string, got &value.valueUnstructured{Value:3}\n")
    err = api_error_from_status(500, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                                      "message": message})
    assert err.reason == "InternalError"  # still classified by its code
    assert dry_run_error_message(ObjRef("", "ConfigMap", "ns", "settings"), err) == (
        f"ConfigMap/ns/settings dry-run failed: {message}")
    # an answer that is no Status gets the reason its code implies, as client-go's generic response error
    plain = api_error_from_status(500, b"upstream connect error")
    assert dry_run_error_message(ObjRef("", "ConfigMap", "ns", "settings"), plain) == (
        "ConfigMap/ns/settings dry-run failed (InternalError): upstream connect error")


def test_strip_invalid_ca_bundle() -> None:
    def crd(bundle: str) -> dict[str, Any]:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}},
        }

    bad = crd("Cg==")  # "\n"
    strip_invalid_ca_bundle(bad)
    assert "caBundle" not in bad["spec"]["conversion"]["webhook"]["clientConfig"]
    import base64

    good = crd(base64.b64encode(b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n").decode())
    strip_invalid_ca_bundle(good)
    assert "caBundle" in good["spec"]["conversion"]["webhook"]["clientConfig"]


async def test_namespaced_object_without_namespace() -> None:
    class NoNamespaceClient(FakeClient):
        async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
            if not namespace:
                raise ValueError(f"{kind}/{name}: a namespace is required for a namespaced kind")
            return await super().get(api_version, kind, name, namespace)

        async def apply(self, obj: Any, **kw: Any) -> dict[str, Any]:
            if not (obj.get("metadata") or {}).get("namespace"):
                raise ValueError("a namespace is required for a namespaced kind")
            return await super().apply(obj, **kw)

    obj = cm("a")
    del obj["metadata"]["namespace"]
    with pytest.raises(DryRunError) as info:
        await manager(NoNamespaceClient()).apply_all_staged([obj], ApplyOptions())
    assert str(info.value) == "ConfigMap/a namespace not specified: the server could not find the requested resource"


async def test_migrate_api_version_rewrites_managed_fields_before_the_dry_run() -> None:
    client = FakeClient()
    live = {
        "apiVersion": "example.com/v2",
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "default",
            "managedFields": [
                {"manager": "kustomize-controller", "operation": "Apply", "apiVersion": "example.com/v1"},
                {"manager": "other", "operation": "Update", "apiVersion": "example.com/v2"},
            ],
        },
        "spec": {"size": 1},
    }
    client.seed(live)
    desired = {k: v for k, v in live.items() if k != "metadata"} | {"metadata": {"name": "w", "namespace": "default"}}
    cs = await manager(client).apply_all([desired], ApplyOptions(migrate_api_version=True))
    assert [e.action for e in cs] == [Action.CONFIGURED]
    first_write = client.writes()[0]
    assert first_write.verb == "patch"
    assert [e["apiVersion"] for e in first_write.body[0]["value"]] == ["example.com/v2", "example.com/v2"]
    # the patch happened before the dry-run
    verbs = [(c.verb, c.dry_run) for c in client.calls]
    assert verbs.index(("patch", False)) < verbs.index(("apply", True))
    # without the gate: unchanged, nothing written
    client2 = FakeClient()
    client2.seed(live)
    cs = await manager(client2).apply_all([desired], ApplyOptions())
    assert [e.action for e in cs] == [Action.UNCHANGED] and client2.writes() == []


# --- phase A: one function for apply_all and plan_all, structured concurrency ------------------------


@dataclass
class GatedClient(FakeClient):
    """The dry-run of an object named in ``gates`` waits for that event before it is answered; every
    dry-run's start (also as the event ``began[name]``), answer, failure or cancellation is recorded, so a test sees
    which requests were left running."""

    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    began: defaultdict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))
    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    async def apply(self, obj: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
        name = str(obj["metadata"]["name"])
        self.started.append(name)
        self.began[name].set()
        try:
            if name in self.gates:
                await self.gates[name].wait()
            result = await super().apply(obj, **kw)
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        except Exception:
            self.failed.append(name)
            raise
        self.finished.append(name)
        return result

    def in_flight(self) -> set[str]:
        return set(self.started) - set(self.finished) - set(self.cancelled) - set(self.failed)


def failing_once(failed: asyncio.Event, err: Exception) -> Callable[[], Exception]:
    def fault() -> Exception:
        failed.set()
        return err

    return fault


def gated(release: asyncio.Event, *, failing: str, **fault: Exception) -> tuple[GatedClient, asyncio.Event]:
    """a and c wait for ``release``; ``failing`` (b) fails once c is in flight; the event says it failed."""
    failed = asyncio.Event()
    client = GatedClient()
    client.gates.update(a=release, b=client.began["c"], c=release)
    for name, err in fault.items():
        client.faults[("apply", name, True)] = failing_once(failed, err) if name == failing else err  # type: ignore[assignment]
    return client, failed


async def test_a_failed_dry_run_cancels_the_objects_after_it_and_reports_the_first_failure() -> None:
    release = asyncio.Event()
    client, failed = gated(release, failing="b", b=InvalidError("b is invalid", status=422))
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=3)
    task = asyncio.create_task(rm.apply_all([cm(n) for n in "abcde"], ApplyOptions()))
    await failed.wait()
    release.set()  # "a" (before the failure) and "c" (after it) may go on now
    with pytest.raises(DryRunError) as info:
        await task
    assert str(info.value) == "ConfigMap/default/b dry-run failed (Invalid): b is invalid"
    assert client.cancelled == ["c"]  # in flight after the failure: cancelled
    assert client.started == ["a", "b", "c"]  # d and e were queued: never sent
    assert client.finished == ["a"]  # before the failure in apply order: ran to its end
    assert client.in_flight() == set() and client.writes() == []


async def test_the_first_failure_in_apply_order_wins_whatever_fails_first() -> None:
    release = asyncio.Event()
    client, failed = gated(release, failing="b", a=InvalidError("a is invalid", status=422),
                           b=InvalidError("b is invalid", status=422))
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=4)
    task = asyncio.create_task(rm.apply_all([cm(n) for n in "abcd"], ApplyOptions()))
    await failed.wait()  # b failed first in time; a has not been answered yet
    release.set()
    with pytest.raises(DryRunError, match="ConfigMap/default/a dry-run failed"):
        await task
    assert client.cancelled == ["c"] and client.in_flight() == set()


async def test_a_plan_keeps_per_object_errors_but_an_unexpected_failure_leaves_nothing_running() -> None:
    release = asyncio.Event()
    client, _ = gated(release, failing="", b=InvalidError("b is invalid", status=422))
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=3)
    plan_task = asyncio.create_task(rm.plan_all([cm(n) for n in "abc"], ApplyOptions()))
    await client.began["c"].wait()  # an object's own error does not stop the others
    release.set()
    planned = await plan_task
    assert [(p.ref.name, p.action, bool(p.error)) for p in planned] == [
        ("a", Action.CREATED, False), ("b", Action.UNKNOWN, True), ("c", Action.CREATED, False)]

    release = asyncio.Event()
    client, failed = gated(release, failing="b", b=RuntimeError("transport broke"))
    rm = ResourceManager(client=client, clock=FakeClock(), concurrency=3)
    plan_task = asyncio.create_task(rm.plan_all([cm(n) for n in "abcd"], ApplyOptions()))
    await failed.wait()
    release.set()
    with pytest.raises(RuntimeError, match="transport broke"):
        await plan_task
    # nothing of the plan is still running once plan_all raised
    assert client.in_flight() == set() and client.cancelled == ["c"] and "d" not in client.started
    assert client.finished == ["a"]


async def test_a_plan_is_what_the_apply_computes() -> None:
    def seeded() -> FakeClient:
        client = FakeClient()
        client.seed(cm("same", data={"k": "v"}))
        client.seed(cm("drifted", data={"k": "edited"}))
        client.seed(cm("kept", annotations={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}))
        return client

    objects = [cm("same", data={"k": "v"}), cm("drifted", data={"k": "v"}), cm("new"),
               cm("kept", annotations={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"})]
    planned = await manager(seeded()).plan_all(objects, ApplyOptions())
    applied = await manager(seeded()).apply_all(objects, ApplyOptions())
    assert [(p.ref, p.action) for p in planned] == [(e.ref, e.action) for e in applied]
    assert {p.ref.name: p.action for p in planned} == {
        "drifted": Action.CONFIGURED, "kept": Action.SKIPPED, "new": Action.CREATED, "same": Action.UNCHANGED}


async def test_a_plan_does_not_teach_the_cache_what_other_options_would_plan() -> None:
    """plan_all proves objects in sync with the same fingerprint context as apply_all: a plan under
    ``spec.ignore`` rules must not vouch for the object under other rules."""
    client, verified = FakeClient(), VerifiedApplies()
    client.seed(cm("a", data={"k": "edited"}))
    rm = ResourceManager(client=client, clock=FakeClock(), verified=verified)
    ignoring = ApplyOptions(ignore_rules=compile_ignore_rules([_Rule(["/data"])]))
    assert [p.action for p in await rm.plan_all([cm("a", data={"k": "v"})], ignoring)] == [Action.UNCHANGED]
    assert [p.action for p in await rm.plan_all([cm("a", data={"k": "v"})], ApplyOptions())] == [Action.CONFIGURED]
    assert [e.action for e in await rm.apply_all([cm("a", data={"k": "v"})], ApplyOptions())] == [Action.CONFIGURED]


class _Rule:
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.target = None
