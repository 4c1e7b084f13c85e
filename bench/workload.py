"""The flux-benchmark workload: N Kustomizations, each with its own GitRepository artifact of 4 objects.

Each app ``app-<i>`` is a Deployment scaled to 0, a ServiceAccount, a Service and a ConfigMap (the
Ingress of flux-benchmark replaced by a ConfigMap, so that no Ingress class matters), in namespace
``apps``; ``objects`` > 4 repeats the four kinds (the big-Kustomization scenario). Kustomizations live
in ``flux-system`` with ``interval: 60m`` (nothing periodic happens during a measurement unless the
benchmark asks for it), ``prune: true`` and ``wait`` as configured.

``Tracker`` follows the Kustomizations with one watch and records, per name, when the driver first saw
it Ready with a given revision, when it first saw a reconcile of a revision start (``Ready=Unknown``,
``Reconciling``) and when ``status.lastHandledReconcileAt`` reached a token. Times are
``time.perf_counter()`` in the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import AlreadyExistsError, GoneError, KubeError, NotFoundError
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source

KS_API = "kustomize.toolkit.fluxcd.io/v1"
# On the embedded API server the namespaces are upstream's; against a real cluster (BENCH_KUBECONFIG)
# they are the benchmark's own (BENCH_NAMESPACE, default "bench-flux", and "<it>-apps"), which every
# scenario deletes when it ends.
EXTERNAL_KUBECONFIG = os.environ.get("BENCH_KUBECONFIG", "")
FLUX_NS = os.environ.get("BENCH_NAMESPACE", "bench-flux") if EXTERNAL_KUBECONFIG else "flux-system"
APPS_NS = f"{FLUX_NS}-apps" if EXTERNAL_KUBECONFIG else "apps"
REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"


def _app_objects(i: int, j: int, rev: int, image_rev: int | None = None) -> str:
    name = f"app-{i}" if j == 0 else f"app-{i}-{j}"
    image_rev = rev if image_rev is None else image_rev
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {APPS_NS}
  labels: {{app: {name}}}
spec:
  replicas: 0
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      serviceAccountName: {name}
      containers:
      - name: app
        image: ghcr.io/stefanprodan/podinfo:6.5.{image_rev}
        ports:
        - {{containerPort: 9898, name: http}}
        resources:
          requests: {{cpu: 10m, memory: 32Mi}}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}
  namespace: {APPS_NS}
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {APPS_NS}
spec:
  selector: {{app: {name}}}
  ports:
  - {{name: http, port: 9898, targetPort: http}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: {APPS_NS}
data:
  revision: "{rev}"
  message: hello from app {i}
"""


def app_files(i: int, *, rev: int = 1, objects: int = 4, image_rev: int | None = None) -> dict[str, str]:
    """``image_rev`` (default ``rev``): the Deployment's image tag; a revision that keeps it changes only
    the ConfigMap (issue 13's "new revision" phase)."""
    groups = max(1, objects // 4)
    return {
        "kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n- app.yaml\n",
        "app.yaml": "".join(_app_objects(i, j, rev, image_rev) for j in range(groups)),
    }


def write_app_dir(root: Path, i: int, *, rev: int = 1, objects: int = 4) -> Path:
    target = root / f"app-{i}"
    target.mkdir(parents=True, exist_ok=True)
    for name, text in app_files(i, rev=rev, objects=objects).items():
        (target / name).write_text(text)
    return target


SHARD_KEY = "sharding.fluxcd.io/key"


def shard_of(i: int, shards: int) -> str:
    """The shard of app ``i`` when the Kustomizations are spread over ``shards`` (round robin)."""
    return f"shard{i % shards + 1}"


def kustomization(i: int, *, wait: bool, shards: int = 0) -> dict[str, Any]:
    """``shards`` > 0: labelled ``sharding.fluxcd.io/key: shard<k>`` for one of ``shards`` shards."""
    metadata: dict[str, Any] = {"name": f"app-{i}", "namespace": FLUX_NS}
    if shards:
        metadata["labels"] = {SHARD_KEY: shard_of(i, shards)}
    return {
        "apiVersion": KS_API,
        "kind": "Kustomization",
        "metadata": metadata,
        "spec": {
            "interval": "60m",
            "retryInterval": "10s",
            "timeout": "5m",
            "path": "./",
            "prune": True,
            "wait": wait,
            "sourceRef": {"kind": "GitRepository", "name": f"app-{i}"},
        },
    }


def crd_documents() -> list[dict[str, Any]]:
    files = sorted((REPO_ROOT / "manifests" / "crd" / "bases").glob("*.yaml"))
    files += sorted((SHARED / "reference" / "crds").glob("source.toolkit.fluxcd.io_*.yaml"))
    yaml = YAML(typ="safe")
    docs: list[dict[str, Any]] = []
    for path in files:
        for doc in yaml.load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(json.loads(json.dumps(doc, default=str)))
    return docs


async def install_crds(client: KubeClient) -> None:
    """Install the CRDs; on a real cluster only the missing ones (never overwrite an installed Flux)."""
    crds = crd_documents()
    for crd in crds:
        if EXTERNAL_KUBECONFIG:
            with contextlib.suppress(NotFoundError):
                await client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
                continue
        await client.apply(crd, field_manager="bench", force=True)
    for crd in crds:
        for _ in range(300):
            live = await client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
            conditions = (live.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"CustomResourceDefinition/{crd['metadata']['name']} not Established after 30 s")
    for crd in crds:
        await _served(client, crd)


async def _served(client: KubeClient, crd: dict[str, Any]) -> None:
    """Wait until discovery serves every version of ``crd``: an API server publishes it a moment after
    ``Established`` (the embedded one too), and a create before that is a NoKindMatch."""
    spec = crd["spec"]
    for version in spec["versions"]:
        api_version = f"{spec['group']}/{version['name']}"
        for _ in range(300):
            try:
                await client.mapper.resolve(api_version, spec["names"]["kind"])
                break
            except NoKindMatchError:
                await asyncio.sleep(0.1)
        else:
            name = crd["metadata"]["name"]
            raise RuntimeError(f"CustomResourceDefinition/{name} {api_version} not served after 30 s")


async def create_namespaces(client: KubeClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(AlreadyExistsError):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def delete_namespaces(client: KubeClient, *, within: float = 300.0) -> None:
    """Remove the benchmark's namespaces from a real cluster (Kustomization finalizers dropped first,
    since no controller is left to handle them) and wait until they are gone."""
    with contextlib.suppress(NotFoundError, NoKindMatchError):  # NoKindMatch: the CRD is not installed yet
        for ks in await client.list(KS_API, "Kustomization", FLUX_NS):
            if ks["metadata"].get("finalizers"):
                await client.patch(KS_API, "Kustomization", ks["metadata"]["name"], FLUX_NS,
                                   {"metadata": {"finalizers": None}}, patch_type="merge")
    for name in (FLUX_NS, APPS_NS):
        with contextlib.suppress(NotFoundError):
            await client.delete("v1", "Namespace", name)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for name in (FLUX_NS, APPS_NS):
        while loop.time() < deadline:
            try:
                await client.get("v1", "Namespace", name)
            except NotFoundError:
                break
            await asyncio.sleep(1.0)
        else:
            raise TimeoutError(f"Namespace/{name} still exists after {within:.0f} s")


async def bounded(coros: Iterable[Any], *, limit: int = 8) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


async def publish(client: KubeClient, artifacts: ArtifactServer, i: int, *, rev: int, objects: int = 4,
                  image_rev: int | None = None) -> str:
    """Publish revision ``rev`` of app ``i`` and point its GitRepository at it; returns the revision."""
    files = app_files(i, rev=rev, objects=objects, image_rev=image_rev)
    artifact = await artifacts.publish_files(files, name=f"app-{i}")
    await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name=f"app-{i}", artifact=artifact)
    return str(artifact["revision"])


async def setup(
    client: KubeClient, artifacts: ArtifactServer, n: int, *, wait: bool, objects: int = 4, shards: int = 0
) -> dict[str, str]:
    """CRDs, namespaces, N sources and N Kustomizations (``shards``: labelled for that many shards);
    returns name → expected revision."""
    await install_crds(client)
    await create_namespaces(client, FLUX_NS, APPS_NS)
    revisions = await bounded(publish(client, artifacts, i, rev=1, objects=objects) for i in range(n))
    await bounded(client.create(kustomization(i, wait=wait, shards=shards)) for i in range(n))
    return {f"app-{i}": rev for i, rev in enumerate(revisions)}


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return {}


class Tracker:
    """One watch on the Kustomizations of ``FLUX_NS``; see the module docstring."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.ready_at: dict[tuple[str, str], float] = {}  # (name, revision) -> first seen Ready
        self.started_at: dict[tuple[str, str], float] = {}  # (name, revision) -> first seen reconciling
        self.handled_at: dict[tuple[str, str], float] = {}  # (name, token) -> first seen handled
        self.failures: dict[str, str] = {}
        self.modified = 0  # MODIFIED events seen (each is one write of a Kustomization)
        self.relists = 0
        self.stream_errors: list[str] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _observe(self, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        name = obj["metadata"]["name"]
        status = obj.get("status") or {}
        ready = _condition(obj, "Ready")
        if ready.get("status") == "True":
            revision = str(status.get("lastAppliedRevision") or "")
            self.ready_at.setdefault((name, revision), now)
            self.failures.pop(name, None)
        elif ready.get("status") == "Unknown":
            attempted = str(status.get("lastAttemptedRevision") or "")
            self.started_at.setdefault((name, attempted), now)
        elif ready.get("status") == "False":
            self.failures[name] = str(ready.get("message", ""))[:300]
        reconciling = _condition(obj, "Reconciling")
        if reconciling.get("status") == "True":
            self.started_at.setdefault((name, str(status.get("lastAttemptedRevision") or "")), now)
        token = status.get("lastHandledReconcileAt")
        if token:
            self.handled_at.setdefault((name, str(token)), now)
        self._changed.set()

    async def _run(self) -> None:
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    page = await self.client.list_page(KS_API, "Kustomization", FLUX_NS)
                    for item in page.get("items") or []:
                        self._observe(item)
                    resource_version = str((page.get("metadata") or {}).get("resourceVersion") or "")
                stream = self.client.watch(KS_API, "Kustomization", FLUX_NS, resource_version=resource_version,
                                           timeout_seconds=600)
                async with contextlib.aclosing(stream) as events:
                    async for event in events:
                        obj = event["object"]
                        resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or resource_version)
                        if event["type"] == "MODIFIED":
                            self.modified += 1
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._observe(obj)
            except GoneError:
                resource_version = None
            except (KubeError, OSError, TimeoutError, ValueError) as err:
                self.stream_errors.append(repr(err)[:200])
                resource_version = None
                await asyncio.sleep(0.2)

    async def __aenter__(self) -> Tracker:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def relist(self) -> None:
        """Observe the current state of every Kustomization (the fallback when the watch is quiet)."""
        self.relists += 1
        for item in await self.client.list(KS_API, "Kustomization", FLUX_NS):
            self._observe(item)

    async def wait(self, done: Callable[[], bool], *, within: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        quiet_since = loop.time()
        while not done():
            if self._task is not None and self._task.done():
                raise RuntimeError(f"the watch of Kustomizations stopped: {self._task.exception()!r}")
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                sample = dict(list(self.failures.items())[:3])
                raise TimeoutError(f"{what}: not reached after {within:.0f} s; failures: {sample}")
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 1.0))
                quiet_since = loop.time()
            except TimeoutError:
                if loop.time() - quiet_since >= 5.0:
                    await self.relist()  # a watch that stalled must not stall the benchmark
                    quiet_since = loop.time()

    async def wait_ready(self, expected: dict[str, str], *, within: float) -> float:
        """Wait until every name is Ready with its expected revision; returns the time the last one was seen."""
        await self.wait(_drained(list(expected.items()), self.ready_at), within=within,
                        what=f"{len(expected)} Kustomizations Ready")
        return max(self.ready_at[(n, r)] for n, r in expected.items())

    def first_ready(self, expected: dict[str, str]) -> float:
        """When the first of ``expected`` was seen Ready with its expected revision (after ``wait_ready``)."""
        return min(self.ready_at[(n, r)] for n, r in expected.items())

    async def wait_handled(self, names: Iterable[str], token: str, *, within: float) -> float:
        keys = [(n, token) for n in names]
        try:
            await self.wait(_drained(list(keys), self.handled_at), within=within,
                            what=f"{len(keys)} reconciles of token {token}")
        except TimeoutError as err:
            missing = [n for n, t in keys if (n, t) not in self.handled_at]
            raise TimeoutError(f"{err}; {len(missing)} not handled, e.g. {missing[:5]}; "
                               f"relists {self.relists}, stream errors {self.stream_errors[-3:]}") from err
        return max(self.handled_at[k] for k in keys)


def _drained(pending: list[tuple[str, str]], seen: dict[tuple[str, str], float]) -> Callable[[], bool]:
    """A ``done`` check that is O(1) amortised per call: it pops the keys already seen from the end of
    ``pending`` and stops at the first not seen yet (``all(...)`` over 10,000 keys on every watch event
    made the driver itself quadratic in N)."""

    def done() -> bool:
        while pending and pending[-1] in seen:
            pending.pop()
        return not pending

    return done


async def request_reconcile(client: KubeClient, names: Iterable[str], token: str) -> None:
    body = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}}
    await bounded(
        (client.patch(KS_API, "Kustomization", n, FLUX_NS, body, patch_type="merge") for n in names), limit=16
    )
