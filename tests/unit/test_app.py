"""The application's wiring of dependents (gate ``EnableDependencyQueueing``) through the controller's own
watch: only an update that makes a dependency ready enqueues its dependents; adds and deletes do not."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry

from kustomize_controller.api.kustomization import API_VERSION, KIND
from kustomize_controller.app.run import _log_builder
from kustomize_controller.app.watches import wire_dependents
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.transport import HttpRequest, MockResponse, MockTransport
from kustomize_controller.kustomize.build import BuilderCommand
from kustomize_controller.kustomize.pin import PINNED_KUSTOMIZE
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.controller import Controller, Request
from kustomize_controller.runtime.cpus import AFFINITY, CGROUP_QUOTA, UsableCpus
from kustomize_controller.runtime.informer import Informer
from kustomize_controller.runtime.logs import configure_logging
from kustomize_controller.runtime.metrics import RuntimeMetrics
from kustomize_controller.settings import Settings


class _Idle:
    async def reconcile(self, request: Request) -> Any:
        raise AssertionError("not run")


def ks(name: str, namespace: str, *, deps: list[dict[str, str]] = (), ready: bool = False,  # type: ignore[assignment]
       rv: int = 1) -> dict[str, Any]:
    status = {"observedGeneration": 1, "lastAppliedRevision": "r1",
              "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}]}
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "generation": 1, "resourceVersion": str(rv)},
            "spec": {"dependsOn": list(deps)}, "status": status}


def wired() -> tuple[Informer, Controller]:
    clock = FakeClock()

    def refuse(request: HttpRequest) -> MockResponse:
        raise AssertionError(f"no request expected: {request.method} {request.url}")

    client = KubeClient.for_server("http://fake", transport=MockTransport(refuse))
    informer = Informer(client=client, api_version=API_VERSION, kind=KIND, clock=clock, rng=random.Random(0))
    controller = Controller(name="kustomization", reconciler=_Idle(), clock=clock,
                            metrics=RuntimeMetrics(clock=clock, registry=CollectorRegistry()))
    wire_dependents(controller, informer)
    return informer, controller


async def queued(controller: Controller) -> list[Request]:
    out = []
    while len(controller.queue):
        request = await controller.queue.get()
        controller.queue.done(request)
        out.append(request)
    return out


async def test_only_becoming_ready_wakes_dependents_across_namespaces_and_never_round_a_cycle() -> None:
    informer, controller = wired()
    base = ks("base", "infra", deps=[{"name": "app", "namespace": "apps"}])  # a cycle: app -> base -> app
    app = ks("app", "apps", deps=[{"name": "base", "namespace": "infra"}])
    web = ks("web", "apps", deps=[{"name": "base", "namespace": "infra"}])
    db = ks("db", "infra", deps=[{"name": "base"}])  # the dependent's namespace: infra/base
    for obj in (base, app, web, db):
        informer._handle("ADDED", obj)
    assert await queued(controller) == []  # adds wake nothing

    informer._handle("MODIFIED", ks("base", "infra", deps=[{"name": "app", "namespace": "apps"}], ready=True, rv=2))
    woken = await queued(controller)
    assert sorted(woken) == [Request("apps", "web"), Request("infra", "db")]  # not apps/app: a cycle

    informer._handle("MODIFIED", ks("base", "infra", deps=[{"name": "app", "namespace": "apps"}], ready=True, rv=3))
    assert await queued(controller) == []  # ready already, same revision

    informer._handle("DELETED", ks("base", "infra", deps=[{"name": "app", "namespace": "apps"}], ready=True, rv=4))
    assert await queued(controller) == []  # a deletion does not make anything ready


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """The controller's log configuration writing to memory (restored afterwards: another test of the
    session may have set the level to error); returns a reader of the JSON lines."""
    saved = structlog.get_config()
    out = io.StringIO()
    configure_logging(level="info", encoding="json", stream=out)
    try:
        yield lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        structlog.configure(**saved)


def test_start_up_says_which_builder_and_warns_when_it_is_not_the_pinned_one(
    log_lines: Callable[[], list[dict[str, Any]]],
) -> None:
    pinned = BuilderCommand(("/venv/bin/kubectl", "kustomize"), "kubectl", "v1.36.3", PINNED_KUSTOMIZE, "installed")
    _log_builder(pinned, UsableCpus(count=4, source=AFFINITY, online=4), Settings())
    [line] = log_lines()
    assert {k: v for k, v in line.items() if k != "ts"} == {
        "level": "info", "logger": "setup", "msg": "kustomize builder", "path": "/venv/bin/kubectl",
        "source": "installed", "flavour": "kubectl", "version": "v1.36.3", "kustomize_version": PINNED_KUSTOMIZE,
        "cpus": 4, "cpus_from": "affinity", "parallel_builds": 8,
        "batch_size": 32, "batch_wait_s": 0.25, "batch_wait_until": 2}
    other = BuilderCommand(("/usr/bin/kubectl", "kustomize"), "kubectl", "v1.32.0", "v5.5.0", "PATH")
    limited = UsableCpus(count=2, source=CGROUP_QUOTA, online=8, quota=1.5, cgroup="/sys/fs/cgroup")
    _log_builder(other, limited, Settings(build_concurrency=3))
    _, info, warning = log_lines()
    assert (info["level"], info["path"], info["kustomize_version"]) == ("info", "/usr/bin/kubectl", "v5.5.0")
    assert (info["cpus"], info["cpus_from"], info["cpu_quota"], info["cgroup"], info["parallel_builds"]) == (
        2, "cgroup quota", 1.5, "/sys/fs/cgroup", 3)
    assert warning["level"] == "warning" and warning["path"] == "/usr/bin/kubectl"
    assert warning["msg"].startswith("the kustomize builder is not the version upstream Flux pins")
    assert (warning["kustomize_version"], warning["pinned"]) == ("v5.5.0", PINNED_KUSTOMIZE)
