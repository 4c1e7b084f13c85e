"""Fixtures for the end-to-end scenarios against a real cluster (``E2E_KUBECONFIG``).

Without ``E2E_KUBECONFIG`` every test here is collected and skipped with the reason below, so
``pytest e2e`` exits 0 and says why. With it, each test gets a ``scenario`` (see ``harness.Scenario``):

- the Kustomization and source CRDs are installed once per session when the cluster lacks them
  (``manifests/crd/bases``, and ``FLUX_ASSETS/crds`` (sources, notifications) when set, else
  ``<repo>/../shared/reference/crds``; existing CRDs are left alone) and
  deleted again at the end of the session (only those installed here);
- a fresh namespace ``e2e-<random>``, torn down after the controller stopped: its Kustomizations lose
  their finalizers (no controller is left to release them) and are deleted, then the namespace is
  deleted and waited for, so a run leaves the cluster as it found it and the next run starts clean;
- an ``ArtifactServer`` on 127.0.0.1 — the controller runs on this machine, so loopback reaches it;
- the controller as a subprocess with real flags (``harness.ControllerProcess``), watching only the
  test's namespace, started before the test and stopped with SIGTERM after it. A test fails when the
  controller does not exit 0 on SIGTERM.
  When a test fails, the controller's logs are printed with its report.

Extra controller flags for one test: ``@pytest.mark.controller_args("--concurrent=2", ...)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.testing.artifacts import ArtifactServer
from tests.flux import assets as flux_assets

from .harness import REPO_ROOT, ControllerProcess, Kubectl, Scenario, kubectl_binary

E2E_DIR = Path(__file__).resolve().parent
SKIP_REASON = "E2E_KUBECONFIG is not set: the e2e scenarios need a real cluster (see e2e/README.md)"
RUN_ID = secrets.token_hex(3)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "controller_args(*args): extra flags for the e2e controller process")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("E2E_KUBECONFIG"):
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if item.path.is_relative_to(E2E_DIR):
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    setattr(item, f"e2e_report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = os.environ.get("E2E_KUBECONFIG")
    if not path:
        pytest.skip(SKIP_REASON)
    if not Path(path).is_file():
        pytest.fail(f"E2E_KUBECONFIG={path}: no such file")
    return path


def _kubectl_sync(kubeconfig: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    argv = [kubectl_binary(), "--kubeconfig", kubeconfig, *args]
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _crd_files() -> list[Path]:
    """Ours for Kustomizations; Flux's own from ``FLUX_ASSETS/crds`` for sources and notifications when
    there (source-controller wants HelmChart's too), else the source CRDs of the shared reference."""
    shared = REPO_ROOT.parent / "shared" / "reference" / "crds"
    own = sorted((REPO_ROOT / "manifests" / "crd" / "bases").glob("*.yaml"))
    flux = flux_assets.crd_files("source.", "notification.")
    return (own or sorted(shared.glob("kustomize.toolkit.fluxcd.io_*.yaml"))) + (
        flux or sorted(shared.glob("source.toolkit.fluxcd.io_*.yaml"))
    )


@pytest.fixture(scope="session")
def crds(kubeconfig: str) -> Iterator[list[str]]:
    """Install the CRDs the cluster lacks; yield the names of those installed here, delete them after.
    One of ours still terminating (an earlier run's removal) is waited out first: it serves no creates."""
    files = {next(line.split(":", 1)[1].strip() for line in path.read_text().splitlines()
                  if line.startswith("  name:")): path for path in _crd_files()}
    for crd in json.loads(_kubectl_sync(kubeconfig, "get", "crd", "-o", "json"))["items"]:
        if crd["metadata"]["name"] in files and crd["metadata"].get("deletionTimestamp"):
            _kubectl_sync(kubeconfig, "wait", f"crd/{crd['metadata']['name']}", "--for=delete", "--timeout=120s",
                          timeout=180)
    present = set(_kubectl_sync(kubeconfig, "get", "crd", "-o", "name").split())
    installed: list[str] = []
    for name, path in files.items():
        if f"customresourcedefinition.apiextensions.k8s.io/{name}" in present:
            continue
        _kubectl_sync(kubeconfig, "apply", "--server-side", "--field-manager=e2e", "--validate=false", "-f", str(path))
        installed.append(name)
    for name in installed:
        _kubectl_sync(kubeconfig, "wait", f"crd/{name}", "--for=condition=established", "--timeout=60s")
    try:
        yield installed
    finally:
        if installed:
            _kubectl_sync(kubeconfig, "delete", "crd", *installed, "--ignore-not-found", "--wait=true",
                          "--timeout=120s", timeout=180)


@contextlib.contextmanager
def ephemeral_namespace(kubeconfig: str, *, deferred: list[str] | None = None) -> Iterator[str]:
    """A fresh ``e2e-<run>-<random>`` namespace, torn down on exit (``_tear_down_namespace``). With
    ``deferred``, its deletion is only started and its name appended there: whoever owns the list waits
    for them all (``wait_namespaces_gone``) while the next tests run."""
    name = f"e2e-{RUN_ID}-{secrets.token_hex(3)}"
    manifest = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kustomize-controller.e2e/ephemeral": "true"}}}
    _kubectl_sync(kubeconfig, "apply", "--server-side", "--field-manager=e2e", "--validate=false", "-f", "-",
                  stdin=json.dumps(manifest))
    try:
        yield name
    finally:
        _tear_down_namespace(kubeconfig, name, wait=deferred is None)
        if deferred is not None:
            deferred.append(name)


def wait_namespaces_gone(kubeconfig: str, names: list[str], *, within: int = 240) -> None:
    """Wait until every namespace in ``names`` is gone (their deletion started by ``ephemeral_namespace``)."""
    if names:
        _kubectl_sync(kubeconfig, "wait", "--for=delete", *(f"namespace/{n}" for n in names),
                      f"--timeout={within}s", timeout=within + 60)


@pytest.fixture
def namespace(kubeconfig: str, crds: list[str]) -> Iterator[str]:
    with ephemeral_namespace(kubeconfig) as name:
        yield name


def _tear_down_namespace(kubeconfig: str, name: str, *, wait: bool = True) -> None:
    """Remove the test's Kustomizations (finalizers first: the controller has stopped) and the namespace,
    and (``wait``) wait until it is gone."""
    listed = _kubectl_sync(kubeconfig, "get", "kustomizations.kustomize.toolkit.fluxcd.io", "-n", name,
                           "-o", "name", "--ignore-not-found")
    for ref in listed.split():
        _kubectl_sync(kubeconfig, "patch", ref, "-n", name, "--type=merge",
                      "-p", '{"metadata":{"finalizers":null}}')
    if listed.strip():
        _kubectl_sync(kubeconfig, "delete", "kustomizations.kustomize.toolkit.fluxcd.io", "--all", "-n", name,
                      "--ignore-not-found", "--wait=true", "--timeout=60s", timeout=90)
    _kubectl_sync(kubeconfig, "delete", "namespace", name, "--ignore-not-found", f"--wait={str(wait).lower()}",
                  "--timeout=120s", timeout=180)


@pytest.fixture
async def kube(kubeconfig: str) -> AsyncIterator[KubeClient]:
    client = KubeClient(config=await load_kubeconfig(kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def artifacts() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as server:
        yield server


@pytest.fixture
def controller_args() -> tuple[str, ...]:
    """Flags every controller of this directory gets (a conftest further down may add some)."""
    return ()


@pytest.fixture
async def controller(
    request: pytest.FixtureRequest, kubeconfig: str, namespace: str, tmp_path: Path,
    controller_args: tuple[str, ...],
) -> AsyncIterator[ControllerProcess]:
    marker = request.node.get_closest_marker("controller_args")
    process = ControllerProcess(
        kubeconfig=kubeconfig,
        log_path=tmp_path / "controller.log",
        runtime_namespace=namespace,
        extra_args=(*controller_args, *(marker.args if marker else ())),
    )
    await process.start()
    try:
        yield process
    finally:
        code = await process.stop()
        report = getattr(request.node, "e2e_report_call", None)
        if report is None or report.failed:
            sys.stderr.write(f"\n--- controller logs ({process.log_path}) ---\n{process.logs()}\n")
        if code != 0:
            pytest.fail(f"controller exited with {code} after SIGTERM (want 0)\n--- logs ---\n{process.logs()}")


@pytest.fixture
def scenario(
    namespace: str, kube: KubeClient, kubeconfig: str, artifacts: ArtifactServer, controller: ControllerProcess
) -> Scenario:
    return Scenario(namespace=namespace, kube=kube, kubectl=Kubectl(kubeconfig), artifacts=artifacts,
                    controller=controller)
