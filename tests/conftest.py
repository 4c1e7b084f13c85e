"""Shared fixtures. ``cluster``: a Kubernetes API for one test.

By default the embedded API server (``kustomize_controller.testing.apiserver``) is started for each test;
with ``TEST_KUBECONFIG=/path/to/kubeconfig`` the tests run against that real cluster instead. Either way
each test gets:

- ``cluster.namespace``: a fresh namespace made for it (deleted afterwards on a real cluster);
- the project's CRDs (``manifests/crd/bases/*.yaml``) and the Flux source CRDs
  (``<repo>/../shared/reference/crds/source.toolkit.fluxcd.io_*.yaml``) installed and Established (on a
  real cluster, those it lacked are deleted again when the session ends);
- ``cluster.url``, ``cluster.token`` (None when a real kubeconfig authenticates otherwise),
  ``cluster.kubeconfig_path``, ``cluster.server`` (the ``ApiServer``, None on a real cluster — tests that
  need fault injection or history compaction skip then), and ``cluster.session()`` for plain aiohttp calls.

Every test must leave the cluster as it found it (tests/leakcheck.py): after a test, its namespace is
deleted and what it left of the cluster-scoped kinds is found — at once on the embedded server (the test's
teardown fails), at the end of the session after a bounded wait on a real cluster (the session fails).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import gc
import json
import os
import secrets
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import hypothesis
import pytest
from ruamel.yaml import YAML

from kustomize_controller.testing.apiserver import ApiServer
from tests import leakcheck
from tests.child_leaks import pytest_runtest_setup, pytest_runtest_teardown  # noqa: F401  (hooks: a leaked child fails its test)

REPO_ROOT = Path(__file__).resolve().parent.parent

# Property tests check correctness, not speed: Hypothesis's default 200 ms deadline per example fails
# (or reports "Flaky") whenever a loaded 2-core CI machine deschedules the process mid-example.
hypothesis.settings.register_profile("suite", deadline=None)
hypothesis.settings.load_profile("suite")
SHARED = REPO_ROOT.parent / "shared"


@dataclass
class ClusterHandle:
    kubeconfig_path: str
    url: str
    token: str | None
    namespace: str
    server: ApiServer | None
    ssl_context: ssl.SSLContext | None = None
    crds: list[str] = field(default_factory=list)
    embedded_only: bool = False  # the test called require_server(): no leak check (tests/leakcheck.py)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def session(self, **kwargs: Any) -> aiohttp.ClientSession:
        """An aiohttp session with the base URL, credentials and TLS settings of this cluster."""
        headers = {**self.headers(), **kwargs.pop("headers", {})}
        connector = aiohttp.TCPConnector(ssl=self.ssl_context) if self.ssl_context else None
        timeout = kwargs.pop("timeout", aiohttp.ClientTimeout(total=60))
        return aiohttp.ClientSession(self.url, headers=headers, connector=connector, timeout=timeout, **kwargs)

    def require_server(self) -> ApiServer:
        """The embedded server; skips the test on a real cluster."""
        self.embedded_only = True
        if self.server is None:
            pytest.skip("needs the embedded API server (fault injection / history control)")
        return self.server


def _crd_files() -> list[Path]:
    files = sorted((REPO_ROOT / "manifests" / "crd" / "bases").glob("*.yaml"))
    if not files:
        files = sorted((SHARED / "reference" / "crds").glob("kustomize.toolkit.fluxcd.io_*.yaml"))
    return files + sorted((SHARED / "reference" / "crds").glob("source.toolkit.fluxcd.io_*.yaml"))


@pytest.fixture(scope="session")
def crd_documents() -> list[dict[str, Any]]:
    """Every CustomResourceDefinition the test cluster gets, parsed once per session."""
    yaml = YAML(typ="safe")
    docs: list[dict[str, Any]] = []
    for path in _crd_files():
        for doc in yaml.load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(json.loads(json.dumps(doc, default=str)))
    return docs


async def _install_crds(handle: ClusterHandle, crds: list[dict[str, Any]], *, created: set[str] | None = None
                        ) -> None:
    """Apply ``crds``; the names of those the cluster did not have go into ``created``."""
    async with handle.session() as http:
        for crd in crds:
            name = crd["metadata"]["name"]
            if created is not None and name not in created:
                async with http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") as resp:
                    if resp.status == 404:
                        created.add(name)
            async with http.patch(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                params={"fieldManager": "test-fixture", "force": "true"},
                data=json.dumps(crd),
                headers={"Content-Type": "application/apply-patch+yaml"},
            ) as resp:
                if resp.status >= 300:
                    raise RuntimeError(f"CustomResourceDefinition/{name}: install failed: {await resp.text()}")
            handle.crds.append(name)
        for name in handle.crds:
            for _ in range(300):
                async with http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") as resp:
                    body = await resp.json()
                conditions = (body.get("status") or {}).get("conditions") or []
                if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                    break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError(f"CustomResourceDefinition/{name}: not Established after 30 s")


async def _create_namespace(handle: ClusterHandle) -> None:
    async with handle.session() as http, http.post(
        "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": handle.namespace,
                                                 "labels": {"kustomize-controller.test/ephemeral": "true"}}},
    ) as resp:
        if resp.status != 201:
            raise RuntimeError(f"Namespace/{handle.namespace}: create failed: {await resp.text()}")


async def _sockets_closed(*, within: float) -> None:
    """Wait (at most ``within`` seconds) until no TLS socket of this loop is still open: the clients are
    closed by now, and what is left is finishing its TLS shutdown, or an abort whose socket is closed on
    the loop's next turn (aiohttp aborts TLS connections on close: a loop that ends at once leaks them)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    await asyncio.sleep(0.05)
    while loop.time() < deadline:
        if not any(isinstance(o, asyncio.Transport) and getattr(o, "_loop", None) is loop
                   and getattr(o, "_sock", None) is not None
                   and isinstance(getattr(o, "_protocol", None), asyncio.sslproto.SSLProtocol)
                   for o in gc.get_objects()):
            return
        await asyncio.sleep(0.05)


async def _real_cluster(kubeconfig: str, namespace: str) -> ClusterHandle:
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    auth = (configuration.api_key or {}).get("authorization") or (configuration.api_key or {}).get("BearerToken")
    token = auth.split(" ", 1)[1] if auth and " " in auth else auth
    context: ssl.SSLContext | None = None
    if configuration.host.startswith("https"):
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if not configuration.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return ClusterHandle(kubeconfig_path=kubeconfig, url=configuration.host.rstrip("/"), token=token,
                         namespace=namespace, server=None, ssl_context=context)


@pytest.fixture(scope="session")
def leak_tracker() -> Iterator[leakcheck.LeakTracker]:
    """On a real cluster, what each test created; checked last, once the session's CRDs are deleted."""
    tracker = leakcheck.LeakTracker()
    yield tracker
    kubeconfig = os.environ.get("TEST_KUBECONFIG")
    if kubeconfig and tracker.created:
        lines = asyncio.run(_leftovers(kubeconfig, tracker))
        if lines:
            raise AssertionError(f"the session left the cluster changed ({leakcheck.WAIT_SECONDS:.0f} s after its "
                                 "end):\n" + "\n".join(f"  {line}" for line in lines))


async def _leftovers(kubeconfig: str, tracker: leakcheck.LeakTracker) -> list[str]:
    lines = await tracker.leftovers(await _real_cluster(kubeconfig, ""))
    await _sockets_closed(within=5.0)  # before asyncio.run closes the loop
    return lines


@pytest.fixture(scope="session")
def suite_crds(leak_tracker: leakcheck.LeakTracker) -> Iterator[set[str]]:
    """On a real cluster, the CRDs this session installed (the cluster lacked them): deleted at its end,
    so that a run leaves the cluster as it found it."""
    created: set[str] = set()
    yield created
    kubeconfig = os.environ.get("TEST_KUBECONFIG")
    if kubeconfig and created:
        leak_tracker.record("the session (CRDs the cluster lacked)",
                            (("CustomResourceDefinition", name) for name in created))
        asyncio.run(_delete_crds(kubeconfig, sorted(created)))


async def _delete_crds(kubeconfig: str, names: list[str]) -> None:
    handle = await _real_cluster(kubeconfig, "")
    async with handle.session() as http:
        for name in names:
            async with http.delete(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"):
                pass
    await _sockets_closed(within=5.0)  # before asyncio.run closes the loop


async def _delete_namespace(handle: ClusterHandle) -> None:
    async with handle.session() as http, http.delete(f"/api/v1/namespaces/{handle.namespace}"):
        pass


@pytest.fixture
async def cluster(request: pytest.FixtureRequest, crd_documents: list[dict[str, Any]], suite_crds: set[str],
                  leak_tracker: leakcheck.LeakTracker) -> AsyncIterator[ClusterHandle]:
    namespace = f"t-{secrets.token_hex(5)}"
    kubeconfig = os.environ.get("TEST_KUBECONFIG")
    if kubeconfig:
        handle = await _real_cluster(kubeconfig, namespace)
        await _install_crds(handle, crd_documents, created=suite_crds)
        await _create_namespace(handle)
        before = await leakcheck.snapshot(handle)
        try:
            yield handle
        finally:
            await _delete_namespace(handle)
            left = await leakcheck.snapshot(handle)
            leak_tracker.record(request.node.nodeid, (left - before) | {("Namespace", namespace)})
            # a closed session's TLS connections finish their shutdown (close_notify, then the server's EOF) on
            # the loop — also one whose request was cancelled during its handshake, which asyncio shuts down
            # gracefully (up to 30 s); the embedded server cuts them when it stops, a real one needs these
            # turns before the test's loop closes, or the sockets are collected unclosed (ResourceWarning) in
            # a later test. A fixed 0.2 s was not always enough on a loaded machine.
            await _sockets_closed(within=5.0)
        return
    async with ApiServer() as server:
        handle = ClusterHandle(kubeconfig_path=server.kubeconfig_path, url=server.url, token=server.token,
                               namespace=namespace, server=server, ssl_context=server.ssl_context())
        await _install_crds(handle, crd_documents)
        await _create_namespace(handle)
        before = await leakcheck.snapshot(handle)
        yield handle
        if not handle.embedded_only and server.serving:
            await _delete_namespace(handle)
            await leakcheck.raise_if_left(handle, request.node.nodeid, before)
