"""A running controller for behaviour tests: the real ``run_controller`` against the ``cluster`` fixture,
with a loopback artifact server standing in for source-controller.

Tests drive it the way a user does: publish a source revision, create or edit a Kustomization,
then wait for its conditions. Timeouts here are generous upper bounds for waiting, never timing
assertions.

Scope, so that the suite also runs on a real cluster (``TEST_KUBECONFIG``), which keeps whatever earlier
tests left: the controller watches only the test's namespace (``--watch-all-namespaces=false``); a test
that reaches into other namespaces creates them with ``env.create_namespace`` (named ``<namespace>-…``)
and starts the controller with ``watch_all_namespaces=True``. Teardown stops the controller, then removes
every Kustomization in those namespaces (finalizers stripped first: no controller is left to release
them) together with the cluster-scoped objects of its inventory that still carry its owner labels (CRDs,
namespaces: they would outlive the test namespace) and the cluster-scoped objects of the kinds
tests/leakcheck.py tracks whose owner label names one of those namespaces (a failed apply leaves them
outside every inventory), and deletes the ``<namespace>-…`` namespaces; the ``cluster`` fixture deletes the
test namespace and checks that nothing is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.api.inventory import InventoryIdError, parse_inventory_id
from kustomize_controller.apply.selectors import NAMESPACE_LABEL, has_owner_labels, owner_labels
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.controller import Request
from kustomize_controller.runtime.manager import Manager
from kustomize_controller.settings import FeatureGates, Settings, replace
from kustomize_controller.testing.apiserver import ApiServer
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source
from tests import leakcheck
from tests.conftest import ClusterHandle

KS_API = "kustomize.toolkit.fluxcd.io/v1"


class Instance:
    """One more controller process of a test (leader election, crash and restart), running as its own
    user so that the API's request log and client faults (``server.client_faults``) tell it apart."""

    def __init__(self, settings: Settings, user: str = "") -> None:
        self.settings = settings
        self.user = user
        self.manager: Manager | None = None
        self.task: asyncio.Task[int] | None = None

    def start(self) -> None:
        from kustomize_controller.app import run_controller

        def keep(manager: Manager) -> None:
            self.manager = manager

        self.task = asyncio.create_task(run_controller(self.settings, handle_signals=False, on_manager=keep))

    async def wait_leader(self, within: float = 30.0) -> None:
        for _ in range(int(within * 10)):
            if self.manager is not None and self.manager.is_leader:
                return
            assert self.task is None or not self.task.done(), "controller exited"
            await asyncio.sleep(0.1)
        raise AssertionError("never became leader")

    async def stop(self) -> int | None:
        """Stop gracefully (the lease is released); cancel after 30 s."""
        if self.task is None:
            return None
        if self.manager is None:  # not started yet: nothing to release
            await self.kill()
            return None
        self.manager.stop()
        try:
            return await asyncio.wait_for(self.task, 30)
        except TimeoutError:
            await self.kill()
            return None

    async def kill(self) -> None:
        """Cancel the controller task and wait for it (whatever it still sends is the test's business)."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


@dataclass
class ControllerEnv:
    cluster: ClusterHandle
    client: KubeClient
    artifacts: ArtifactServer
    settings: Settings
    task: asyncio.Task[int] | None = None
    extra_tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    manager: Manager | None = None
    extra_namespaces: list[str] = field(default_factory=list)

    @property
    def server(self) -> ApiServer:
        return self.cluster.require_server()

    @property
    def namespace(self) -> str:
        return self.cluster.namespace

    async def start(self, *, clock: Clock | None = None, **overrides: Any) -> None:
        """Run the controller with ``settings`` and ``overrides``; ``clock``: its clock (the real one by default)."""
        from kustomize_controller.app import run_controller

        if overrides:
            self.settings = replace(self.settings, **overrides)
        self.task = asyncio.create_task(
            run_controller(self.settings, clock=clock, handle_signals=False, on_manager=self._set_manager)
        )

    def instance(self, user: str, directory: Path, **overrides: Any) -> Instance:
        """A controller (not started) running as ``user`` (a new ``system:masters`` token) with ``settings``
        and ``overrides``."""
        server = self.server
        token = server.add_user(user, groups=("system:masters",))
        path = directory / f"{user}.kubeconfig"
        path.write_text(json.dumps(server.kubeconfig(token=token, user=user)))
        return Instance(replace(self.settings, kubeconfig=str(path), **overrides), user)

    async def in_namespace(self, suffix: str) -> ControllerEnv:
        """This environment in a new namespace ``<namespace>-<suffix>`` (teardown deletes it): the same
        cluster, client and artifact server, with settings scoped to it; nothing started."""
        name = f"{self.namespace}-{suffix}"
        await self.create_namespace(name)
        return dataclasses.replace(self, cluster=dataclasses.replace(self.cluster, namespace=name),
                                   settings=replace(self.settings, runtime_namespace=name), task=None,
                                   extra_tasks=[], manager=None, extra_namespaces=[])

    def gates(self, **overrides: bool) -> FeatureGates:
        """The feature gates of ``settings`` with ``overrides`` applied (for ``start(feature_gates=...)``)."""
        return FeatureGates(values={**self.settings.feature_gates.values, **overrides})

    def set_gates(self, **overrides: bool) -> None:
        self.settings = replace(self.settings, feature_gates=self.gates(**overrides))

    def _set_manager(self, manager: Manager) -> None:
        self.manager = manager

    def requeued_at(self, name: str = "app") -> float | None:
        """When the controller's delayed requeue of the Kustomization ``name`` is due (on its clock's
        ``monotonic()``), or None when none is waiting."""
        assert self.manager is not None, "controller not started"
        (controller,) = [c for c in self.manager.controllers if c.name == "kustomization"]
        return controller.queue.ready_at(Request(namespace=self.namespace, name=name))

    async def create_namespace(self, name: str) -> None:
        """Another namespace for this test (it must start with ``<namespace>-``; teardown deletes it)."""
        if not name.startswith(f"{self.namespace}-"):
            raise ValueError(f"Namespace/{name}: a test's extra namespaces are named {self.namespace}-…")
        await self.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.extra_namespaces.append(name)

    async def clean_up(self) -> None:
        """Leave the cluster as the test found it (module docstring); run after ``stop()``."""
        listed = await self.client.list("v1", "Namespace")
        extra = sorted({str(n["metadata"]["name"]) for n in listed
                        if str(n["metadata"]["name"]).startswith(f"{self.namespace}-")} | set(self.extra_namespaces))
        for namespace in [self.namespace, *extra]:
            for ks in await self.client.list(KS_API, "Kustomization", namespace):
                name = ks["metadata"]["name"]
                await self._delete_cluster_scoped_inventory(ks)
                with contextlib.suppress(NotFoundError):
                    if ks["metadata"].get("finalizers"):
                        await self.client.patch(KS_API, "Kustomization", name, namespace,
                                                {"metadata": {"finalizers": None}}, patch_type="merge")
                    await self.client.delete(KS_API, "Kustomization", name, namespace)
            for cm in await self.client.list("v1", "ConfigMap", namespace):
                if cm["metadata"].get("finalizers"):  # a test's "hold" finalizer left by a failure
                    with contextlib.suppress(NotFoundError):
                        await self.client.patch("v1", "ConfigMap", cm["metadata"]["name"], namespace,
                                                {"metadata": {"finalizers": None}}, patch_type="merge")
        await self._delete_labelled_cluster_scoped([self.namespace, *extra])
        for namespace in extra:
            with contextlib.suppress(NotFoundError):
                await self.client.delete("v1", "Namespace", namespace)

    async def _delete_cluster_scoped_inventory(self, ks: Mapping[str, Any]) -> None:
        owner = owner_labels(ks["metadata"]["name"], ks["metadata"]["namespace"])
        for entry in ((ks.get("status") or {}).get("inventory") or {}).get("entries") or []:
            try:
                oid = parse_inventory_id(str(entry.get("id", "")))
            except InventoryIdError:
                continue
            if oid.namespace:
                continue  # goes with its namespace
            api_version = f"{oid.group}/{entry.get('v', '')}" if oid.group else str(entry.get("v", ""))
            with contextlib.suppress(NotFoundError, NoKindMatchError):
                live = await self.client.get(api_version, oid.kind, oid.name)
                if has_owner_labels(live, owner):
                    await self.client.delete(api_version, oid.kind, oid.name)

    async def _delete_labelled_cluster_scoped(self, namespaces: list[str]) -> None:
        """Cluster-scoped objects of the tracked kinds that a failed apply left outside every inventory,
        found by the owner label naming one of the test's namespaces."""
        selector = f"{NAMESPACE_LABEL} in ({','.join(namespaces)})"
        for api_version, _, kind in leakcheck.TRACKED:
            with contextlib.suppress(NotFoundError, NoKindMatchError):
                for obj in await self.client.list(api_version, kind, label_selector=selector):
                    with contextlib.suppress(NotFoundError):
                        await self.client.delete(api_version, kind, obj["metadata"]["name"])

    async def metrics_url(self) -> str:
        for _ in range(600):
            if self.manager is not None:
                break
            await asyncio.sleep(0.05)
        assert self.manager is not None, "controller did not start its manager"
        await self.manager.wait_started()
        assert self.manager.metrics_url
        return self.manager.metrics_url

    async def request_reconcile(self, name: str = "app", token: str | None = None) -> str:
        """Set ``reconcile.fluxcd.io/requestedAt`` as ``flux reconcile`` does; returns the token."""
        token = token or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        await self.client.patch(KS_API, "Kustomization", name, self.namespace,
                                {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}},
                                patch_type="merge")
        return token

    async def wait_handled(self, token: str, name: str = "app", *, within: float = 60.0) -> dict[str, Any]:
        return await self.wait_for(
            name, lambda o: (o.get("status") or {}).get("lastHandledReconcileAt") == token, within=within
        )

    async def patch_spec(self, spec: Mapping[str, Any], name: str = "app") -> dict[str, Any]:
        return await self.client.patch(KS_API, "Kustomization", name, self.namespace, {"spec": dict(spec)},
                                       patch_type="merge")

    async def delete_ks(self, name: str = "app") -> None:
        await self.client.delete(KS_API, "Kustomization", name, self.namespace)

    async def wait_gone(self, name: str = "app", *, within: float = 60.0) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while asyncio.get_running_loop().time() < deadline:
            try:
                await self.get_ks(name)
            except NotFoundError:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"Kustomization {name} still exists")

    async def events(self, name: str = "app") -> list[dict[str, Any]]:
        """core/v1 Events about the Kustomization ``name``, oldest first."""
        items = await self.client.list("v1", "Event", self.namespace)
        mine = [e for e in items if (e.get("involvedObject") or {}).get("kind") == "Kustomization"
                and e["involvedObject"].get("name") == name]
        return sorted(mine, key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "",
                                           e["metadata"].get("resourceVersion", "")))

    async def wait_event(self, predicate: Callable[[dict[str, Any]], bool], name: str = "app", *,
                         within: float = 30.0) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + within
        seen: list[dict[str, Any]] = []
        while asyncio.get_running_loop().time() < deadline:
            seen = await self.events(name)
            for event in seen:
                if predicate(event):
                    return event
            await asyncio.sleep(0.1)
        raise AssertionError(f"no matching event; seen: {[(e.get('reason'), e.get('message')) for e in seen]}")

    @contextlib.asynccontextmanager
    async def versions(self, name: str = "app") -> AsyncIterator[list[dict[str, Any]]]:
        """Collect every version of the Kustomization ``name`` written from now on (create it first)."""
        obj = await self.get_ks(name)
        seen: list[dict[str, Any]] = []
        started = asyncio.Event()

        async def follow() -> None:
            stream = self.client.watch(KS_API, "Kustomization", self.namespace,
                                       resource_version=obj["metadata"]["resourceVersion"],
                                       field_selector=f"metadata.name={name}")
            async with contextlib.aclosing(stream):
                started.set()
                async for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        seen.append(event["object"])

        task = asyncio.create_task(follow())
        await started.wait()
        try:
            yield seen
            # Callers wait by polling GET, which can see a version before the watch delivers it:
            # catch up to the current resourceVersion before the stream closes (bounded).
            with contextlib.suppress(NotFoundError):
                latest = (await self.get_ks(name))["metadata"]["resourceVersion"]
                for _ in range(500):
                    if any(o["metadata"]["resourceVersion"] == latest for o in seen) or task.done():
                        break
                    await asyncio.sleep(0.02)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def get(self, api_version: str, kind: str, name: str) -> dict[str, Any]:
        return await self.client.get(api_version, kind, name, self.namespace)

    async def stop_without_grace(self, *, within: float = 120.0) -> int:
        """A graceful stop (SIGTERM) that must not sit out the grace period; returns the exit code.

        The grace period is first raised far beyond ``within`` (a bound on waiting, never a timing
        assertion): returning at all then proves that the in-flight work was cancelled, not waited for,
        however slow the machine is."""
        assert self.manager is not None and self.task is not None, "controller not started"
        self.manager.options = dataclasses.replace(self.manager.options, graceful_shutdown_timeout=10 * within)
        self.manager.stop()
        return await asyncio.wait_for(asyncio.shield(self.task), within)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None

    async def publish(self, files: Mapping[str, str], *, name: str = "repo", revision: str | None = None,
                      kind: str = "GitRepository", metadata: Mapping[str, str] | None = None) -> dict[str, Any]:
        artifact = await self.artifacts.publish_files(files, name=f"{self.namespace}/{name}", revision=revision,
                                                      metadata=metadata)
        await publish_source(self.client, kind=kind, namespace=self.namespace, name=name, artifact=artifact)
        return dict(artifact)

    def kustomization(self, name: str = "app", **spec: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "interval": "10m",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
            **spec,
        }
        return {"apiVersion": KS_API, "kind": "Kustomization",
                "metadata": {"name": name, "namespace": self.namespace}, "spec": body}

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.client.create(obj)

    async def get_ks(self, name: str = "app") -> dict[str, Any]:
        return await self.client.get(KS_API, "Kustomization", name, self.namespace)

    async def wait_for(self, name: str, predicate: Callable[[dict[str, Any]], bool], *,
                       within: float = 60.0) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + within
        last: dict[str, Any] = {}
        while asyncio.get_running_loop().time() < deadline:
            if self.task is not None and self.task.done():
                raise AssertionError(f"controller exited: {self.task.result()!r}")
            try:
                last = await self.get_ks(name)
            except NotFoundError:
                last = {}
            if last and predicate(last):
                return last
            await asyncio.sleep(0.1)
        raise AssertionError(f"Kustomization {name} did not reach the expected state; last status: "
                             f"{last.get('status')}")

    async def wait_ready(self, name: str = "app", *, revision: str | None = None,
                         within: float = 60.0) -> dict[str, Any]:
        def ready(obj: dict[str, Any]) -> bool:
            status = obj.get("status") or {}
            ok = condition(obj, "Ready") == ("True", "ReconciliationSucceeded")
            return ok and (revision is None or status.get("lastAppliedRevision") == revision)
        return await self.wait_for(name, ready, within=within)

    async def exists_cluster_scoped(self, api_version: str, kind: str, name: str) -> bool:
        try:
            await self.client.get(api_version, kind, name)
        except NotFoundError:
            return False
        return True

    async def exists(self, api_version: str, kind: str, name: str) -> bool:
        try:
            await self.client.get(api_version, kind, name, self.namespace)
        except NotFoundError:
            return False
        return True


@pytest.fixture(params=["released", "held"])
def wait_mode(request: pytest.FixtureRequest, env: ControllerEnv) -> str:
    """Run a test with health waits released from their worker (our default) and held by it
    (``HoldWorkerDuringHealthChecks``, upstream's behaviour)."""
    env.set_gates(HoldWorkerDuringHealthChecks=request.param == "held")
    return str(request.param)


def condition(obj: Mapping[str, Any], type_: str) -> tuple[str, str] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c.get("status"), c.get("reason")
    return None


def condition_message(obj: Mapping[str, Any], type_: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("message", ""))
    return ""


@pytest.fixture
async def env(cluster: ClusterHandle) -> AsyncIterator[ControllerEnv]:
    config = await load_kubeconfig(cluster.kubeconfig_path)
    async with KubeClient(config=config, qps=-1, burst=-1) as client, ArtifactServer() as artifacts:
        settings = Settings(
            kubeconfig=cluster.kubeconfig_path,
            metrics_addr="127.0.0.1:0",
            health_addr="127.0.0.1:0",
            webhook_addr="0",  # tests of old versions turn the conversion webhook on (test_old_versions.py)
            requeue_dependency=__import__("datetime").timedelta(seconds=1),
            kube_api_qps=-1,
            kube_api_burst=-1,
            log_level="error",
            runtime_namespace=cluster.namespace,
            watch_all_namespaces=False,  # see the module docstring
        )
        controller = ControllerEnv(cluster=cluster, client=client, artifacts=artifacts, settings=settings)
        try:
            yield controller
        finally:
            await controller.stop()
            await controller.clean_up()
        # every failure a test provokes must be an expected one: an exception outside the reconcile
        # error tree is what Go calls a panic (a bug), whatever the test asserted
        if controller.manager is not None:
            panics = controller.manager.metrics.registry.get_sample_value(
                "controller_runtime_reconcile_panics_total", {"controller": "kustomization"})
            assert not panics, f"{panics:.0f} reconcile(s) raised an unexpected exception (see the log)"
