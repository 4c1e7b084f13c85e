"""Fixtures for the scenarios with Flux's own parts around our controller (``FLUX_ASSETS``).

On top of ``e2e/conftest.py`` (a real cluster from ``E2E_KUBECONFIG``, our controller in a fresh namespace):

- once per session, started on first use: Flux's source-controller and notification-controller, out of
  cluster on loopback (``tests/flux/controllers.py``), watching every namespace; a moto S3 server; the
  ``flux`` CLI with its cache in the session's work directory;
- our controller gets ``--events-addr`` = notification-controller's event endpoint, as ``flux install``
  configures it;
- per test: a Git server (``GitServer``), an OCI registry (``OciRegistry``) and an HTTP sink for
  notifications (``EventReceiver``), all on loopback;
- ``pair``: our side (the test's namespace) and upstream's — a second namespace watched by Flux's own
  kustomize-controller (``FLUX_ASSETS/kustomize-controller``), which sends its events to the same
  notification-controller.

Without ``FLUX_ASSETS`` (or with binaries missing) every test here is skipped with one line naming what
is missing; tests marked ``upstream`` also need ``FLUX_ASSETS/kustomize-controller``. The session's work
directory (controllers' logs, source-controller's storage) is removed at the end unless a test failed; then
its path is printed.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from kustomize_controller.kube.client import KubeClient
from tests.flux import assets
from tests.flux.cli import FluxCli
from tests.flux.controllers import notification_controller, source_controller, upstream_kustomize_controller
from tests.flux.gitserver import GitServer
from tests.flux.process import FluxProcess
from tests.flux.receiver import EventReceiver
from tests.flux.registry import OciRegistry
from tests.flux.s3 import S3Server

from ..conftest import ephemeral_namespace, wait_namespaces_gone
from ..harness import ControllerProcess
from .sides import Pair, Side

FLUX_DIR = Path(__file__).resolve().parent
NEEDED = (assets.SOURCE_CONTROLLER, assets.NOTIFICATION_CONTROLLER, assets.FLUX_CLI)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "upstream: compares with Flux's own kustomize-controller from FLUX_ASSETS")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    base = assets.missing(NEEDED, crds=True)
    with_upstream = assets.missing((*NEEDED, assets.KUSTOMIZE_CONTROLLER), crds=True)
    for item in items:
        if not item.path.is_relative_to(FLUX_DIR):
            continue
        why = with_upstream if item.get_closest_marker("upstream") else base
        if why:
            item.add_marker(pytest.mark.skip(reason=why))


class FluxControllers:
    def __init__(self, source: FluxProcess, notification: FluxProcess, workdir: Path) -> None:
        self.source = source
        self.notification = notification
        self.workdir = workdir

    @property
    def events_url(self) -> str:
        return self.notification.urls["events"]

    @property
    def receiver_url(self) -> str:
        return self.notification.urls["receiver"]


@pytest.fixture(scope="session")
def flux_workdir(request: pytest.FixtureRequest) -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="kc-e2e-flux-"))
    try:
        yield workdir
    finally:
        if request.session.testsfailed:
            sys.stderr.write(f"\nFlux controllers' logs kept in {workdir}\n")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def flux_controllers(kubeconfig: str, crds: list[str], flux_workdir: Path) -> AsyncIterator[FluxControllers]:
    """source-controller and notification-controller for the whole session (the source CRDs are installed
    by ``crds`` first: source-controller refuses to start without them)."""
    source = source_controller(kubeconfig=kubeconfig, workdir=flux_workdir)
    notification = notification_controller(kubeconfig=kubeconfig, workdir=flux_workdir)
    try:
        await asyncio.gather(source.start(), notification.start())
        yield FluxControllers(source, notification, flux_workdir)
    finally:
        await asyncio.gather(source.stop(), notification.stop())


@pytest.fixture(scope="session")
def namespaces_deleting(kubeconfig: str, flux_controllers: FluxControllers) -> Iterator[list[str]]:
    """The namespaces whose deletion the tests here started: waited for at the end of the session, while
    source-controller and notification-controller still run (they release their objects' finalizers)."""
    names: list[str] = []
    try:
        yield names
    finally:
        wait_namespaces_gone(kubeconfig, names)


@pytest.fixture
def namespace(kubeconfig: str, crds: list[str], namespaces_deleting: list[str]) -> Iterator[str]:
    """The test's namespace, as e2e/conftest.py makes it; its deletion is waited for at the end of the session
    instead of after each test."""
    with ephemeral_namespace(kubeconfig, deferred=namespaces_deleting) as name:
        yield name


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


@pytest.fixture(scope="session")
def flux(kubeconfig: str, flux_workdir: Path) -> FluxCli:
    cache = flux_workdir / "cli-cache"
    cache.mkdir(exist_ok=True)
    return FluxCli(kubeconfig=kubeconfig, cache_dir=cache)


@pytest.fixture
def controller_args(flux_controllers: FluxControllers) -> tuple[str, ...]:
    """Our controller sends its events to notification-controller, as Flux's own is configured to."""
    return (f"--events-addr={flux_controllers.events_url}",)


@pytest.fixture
async def git_server() -> AsyncIterator[GitServer]:
    async with GitServer() as server:
        yield server


@pytest.fixture
async def registry() -> AsyncIterator[OciRegistry]:
    async with OciRegistry() as server:
        yield server


@pytest.fixture
async def receiver() -> AsyncIterator[EventReceiver]:
    async with EventReceiver() as sink:
        yield sink


@pytest.fixture
def ours(namespace: str, kube: KubeClient, flux: FluxCli, controller: ControllerProcess) -> Side:
    """Our controller (started by ``controller``) and its namespace."""
    return Side(label="ours", namespace=namespace, kube=kube, flux=flux)


@pytest.fixture
async def upstream(request: pytest.FixtureRequest, kubeconfig: str, crds: list[str], kube: KubeClient,
                   flux: FluxCli, flux_controllers: FluxControllers,
                   namespaces_deleting: list[str]) -> AsyncIterator[Side]:
    """Flux's own kustomize-controller watching a namespace of its own, its events to notification-controller."""
    with ephemeral_namespace(kubeconfig, deferred=namespaces_deleting) as namespace:
        process = upstream_kustomize_controller(
            kubeconfig=kubeconfig, workdir=flux_controllers.workdir / request.node.name, namespace=namespace,
            events_addr=flux_controllers.events_url)
        await process.start()
        try:
            yield Side(label="upstream", namespace=namespace, kube=kube, flux=flux)
        finally:
            code = await process.stop()
            report = getattr(request.node, "e2e_report_call", None)
            if report is None or report.failed:
                sys.stderr.write(f"\n--- upstream kustomize-controller logs ({process.log_path}) ---\n"
                                 f"{process.logs()}\n")
            if code not in (0, None):
                pytest.fail(f"upstream kustomize-controller exited with {code} after SIGTERM")


@pytest.fixture
def pair(ours: Side, upstream: Side) -> Pair:
    return Pair(ours=ours, upstream=upstream)
