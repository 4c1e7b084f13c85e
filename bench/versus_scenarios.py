"""The scenarios of issue 36, run the same way whichever controller is under test (``bench/versus.py``).

Each takes a fresh ``Lab`` (a cluster, the artifact server, the driver's watch) and a ``Contender``, sets up
the workload, starts the controller and measures phases with ``Running.phase``: a phase is over when the
driver's watch sees every Kustomization Ready with the expected ``lastAppliedRevision`` (or, for a no-op
round, ``lastHandledReconcileAt`` at the driver's token), which both controllers write. The workloads are
the bench's own (``workload``, ``monorepo``, ``big``, ``health_waits``), so the figures compare with the
single-controller scenarios:

- ``cold`` N × 4 objects (a Deployment scaled to 0, ServiceAccount, Service, ConfigMap; ``wait: false``):
  cold start from the controller's spawn, a new revision of every source (the ConfigMap and the image
  change), a periodic no-op round (``requestedAt`` on all);
- ``latency``: N idle Kustomizations, then one source at a time gets a new revision; p50/p99 of the time to
  the reconcile's start (``Reconciling``/``Ready=Unknown`` seen) and to Ready;
- ``monorepo``: one GitRepository of N app directories, one Kustomization each: cold, one app changed, a
  component shared by every tenth app changed, a no-op round;
- ``big``: one Kustomization of N ConfigMaps, one file each, under ``namespace:``: cold, one object changed,
  no-op; and, on a cluster of its own, the reference ``kubectl kustomize DIR | kubectl apply --server-side``
  of the same directory (``big_reference``);
- ``sops``: N Kustomizations of 10 Secrets each, every file SOPS-encrypted for one age key (the
  Kustomizations' ``decryption.secretRef``): cold, new values in every Secret, no-op;
- ``starvation``: 8 Kustomizations wait (``wait: true``, ``timeout: 2m``) on a Deployment that never becomes
  available (one replica: a real control plane has no scheduler; the embedded server is told by an
  annotation), then 100 healthy ones with ``wait: true`` are created: time until all 100 are Ready;
- ``chain``: 20 Kustomizations, each ``dependsOn`` the previous one, created dependents first, each
  controller at its default ``--requeue-dependency``: time until all are Ready.

Health checks on the real control plane: only ``starvation`` waits (``wait: true``); its healthy apps'
Deployments have 0 replicas, which kube-controller-manager reports available without a kubelet or
scheduler, and its broken ones 1, which never becomes available there. Every other scenario applies with
``wait: false``. So both controllers can finish every scenario on either cluster.
"""

from __future__ import annotations

import asyncio
import base64
import resource
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench import big as big_mod
from bench import monorepo as mono
from bench.health_waits import _create_broken, _waiting
from bench.scenarios import Metrics, _kubectl_apply, percentile
from bench.versus import Contender, Lab, Running
from bench.workload import (
    APPS_NS,
    FLUX_NS,
    app_files,
    bounded,
    create_namespaces,
    install_crds,
    kustomization,
    publish,
    request_reconcile,
    setup,
)
from kustomize_controller.kustomize.sops.tree import EncryptionRules
from kustomize_controller.testing.artifacts import publish_source
from tests.unit.kustomize.sops.sopsgen import AgeKey, Recipe, encrypt_document

SECRETS_PER_APP = 10
SOPS_SECRET = "sops-age"


def _within(n: int) -> float:
    """How long a phase of ``n`` Kustomizations may take before the run is called failed: generous, since
    upstream's default client throttling (50 requests/s) makes minutes of a large round."""
    return max(600.0, n * 0.8)


async def _noop(lab: Lab, ctrl: Running, names: list[str], key: str) -> None:
    before = await ctrl.snap(key)
    modified = lab.tracker.modified
    token = f"bench-{key}-{time.time_ns()}"
    started = time.perf_counter()
    await request_reconcile(lab.client, names, token)
    handled = await lab.tracker.wait_handled(names, token, within=_within(len(names)))
    await ctrl.phase(key, before, handled - started, per=len(names))
    # every write of a Kustomization is one MODIFIED event; one of them is the driver's requestedAt patch
    ctrl.m[f"{key}.status_writes_per_ks"] = (lab.tracker.modified - modified) / len(names) - 1


async def cold(lab: Lab, contender: Contender, n: int, m: Metrics) -> None:
    expected = await setup(lab.client, lab.artifacts, n, wait=False)
    names = list(expected)
    before = lab.zero()
    async with lab.controller(contender, m, name=f"cold-{n}-{contender.label()}") as ctrl:
        try:
            ready = await lab.tracker.wait_ready(expected, within=lab.cold_limit or _within(n))
        except TimeoutError:
            if lab.cold_limit is None:
                raise
            # ``--cold-limit``: what the controller did until then, a lower bound on its cold start
            done = [key for key in expected.items() if key in lab.tracker.ready_at]
            await ctrl.phase("cold", before, time.perf_counter() - ctrl.spawned, per=n, settle=False)
            m["cold.ready_at_limit"] = float(len(done))
            return
        await ctrl.phase("cold", before, ready - ctrl.spawned, per=n)
        m["cold.first_ready_s"] = lab.tracker.first_ready(expected) - ctrl.spawned

        if lab.wants("revision"):
            before = await ctrl.snap("revision")
            started = time.perf_counter()
            revisions = await bounded(publish(lab.client, lab.artifacts, i, rev=2) for i in range(n))
            ready = await lab.tracker.wait_ready(dict(zip(names, revisions, strict=True)), within=_within(n))
            await ctrl.phase("revision", before, ready - started, per=n)
        if lab.wants("noop"):
            await _noop(lab, ctrl, names, "noop")


async def latency(lab: Lab, contender: Contender, n: int, m: Metrics, *, samples: int) -> None:
    expected = await setup(lab.client, lab.artifacts, n, wait=False)
    start_lat: list[float] = []
    ready_lat: list[float] = []
    async with lab.controller(contender, m, name=f"latency-{n}-{contender.label()}") as ctrl:
        await lab.tracker.wait_ready(expected, within=_within(n))
        await ctrl.settle()
        before = await ctrl.snap("latency")
        began = time.perf_counter()
        for k in range(samples):
            i = k % n
            name = f"app-{i}"
            artifact = await lab.artifacts.publish_files(app_files(i, rev=100 + k), name=name)
            revision = str(artifact["revision"])
            t0 = time.perf_counter()
            await publish_source(lab.client, kind="GitRepository", namespace=FLUX_NS, name=name, artifact=artifact)
            await lab.tracker.wait_ready({name: revision}, within=60.0)
            ready_lat.append(lab.tracker.ready_at[(name, revision)] - t0)
            if (name, revision) in lab.tracker.started_at:
                start_lat.append(lab.tracker.started_at[(name, revision)] - t0)
            await asyncio.sleep(0.05)
        await ctrl.phase("latency", before, time.perf_counter() - began, per=samples)
    m["latency.samples"] = float(len(ready_lat))
    for label, values in (("start", start_lat), ("ready", ready_lat)):
        if values:
            m[f"latency.{label}_p50_ms"] = percentile(values, 50) * 1000
            m[f"latency.{label}_p99_ms"] = percentile(values, 99) * 1000
            m[f"latency.{label}_max_ms"] = max(values) * 1000


async def monorepo(lab: Lab, contender: Contender, n: int, m: Metrics) -> None:
    names = [f"app-{i}" for i in range(n)]
    await install_crds(lab.client)
    await create_namespaces(lab.client, FLUX_NS, APPS_NS)
    rev1, _ = await mono._publish(lab.client, lab.artifacts, mono.monorepo_files(n))
    await bounded(lab.client.create(mono.kustomization(i)) for i in range(n))
    before = lab.zero()
    async with lab.controller(contender, m, name=f"monorepo-{n}-{contender.label()}") as ctrl:
        ready = await lab.tracker.wait_ready(dict.fromkeys(names, rev1), within=_within(n))
        await ctrl.phase("cold", before, ready - ctrl.spawned, per=n)
        changed = 1 % n
        for key, files in (("one_app", mono.monorepo_files(n, changed=changed)),
                           ("shared_base", mono.monorepo_files(n, changed=changed, platform_rev=2))):
            if not lab.wants(key):
                continue
            before = await ctrl.snap(key)
            revision, t0 = await mono._publish(lab.client, lab.artifacts, files)
            ready = await lab.tracker.wait_ready(dict.fromkeys(names, revision), within=_within(n))
            await ctrl.phase(key, before, ready - t0, per=n)
        if lab.wants("one_app"):
            cm = await lab.client.get("v1", "ConfigMap", f"app-{changed}", APPS_NS)
            m["one_app.changed_object_updated"] = 1.0 if cm["data"]["revision"] == "2" else 0.0
        if lab.wants("noop"):
            await _noop(lab, ctrl, names, "noop")


async def big(lab: Lab, contender: Contender, objects: int, m: Metrics) -> None:
    """One Kustomization of ``objects`` ConfigMaps; per-object figures (``per=objects``)."""
    await install_crds(lab.client)
    await create_namespaces(lab.client, FLUX_NS, APPS_NS)
    within = max(900.0, objects * 0.3)
    artifact = await lab.artifacts.publish_files(big_mod.big_files(objects, namespace=APPS_NS), name=big_mod.NAME)
    await publish_source(lab.client, kind="GitRepository", namespace=FLUX_NS, name=big_mod.NAME, artifact=artifact)
    ks = kustomization(0, wait=False)
    ks["spec"]["timeout"] = "30m"  # the whole build of 5,000 objects takes minutes on 2 shared cores
    await lab.client.create(ks)
    before = lab.zero()
    async with lab.controller(contender, m, name=f"big-{objects}-{contender.label()}") as ctrl:
        ready = await lab.tracker.wait_ready({big_mod.NAME: str(artifact["revision"])}, within=within)
        await ctrl.phase("cold", before, ready - ctrl.spawned, per=objects)

        if lab.wants("change"):
            before = await ctrl.snap("change")
            started = time.perf_counter()
            changed = await lab.artifacts.publish_files(big_mod.big_files(objects, namespace=APPS_NS, changed=True),
                                                        name=big_mod.NAME)
            await publish_source(lab.client, kind="GitRepository", namespace=FLUX_NS, name=big_mod.NAME,
                                 artifact=changed)
            ready = await lab.tracker.wait_ready({big_mod.NAME: str(changed["revision"])}, within=within)
            await ctrl.phase("change", before, ready - started, per=objects)
        if lab.wants("noop"):
            before = await ctrl.snap("noop")
            token = f"bench-big-{time.time_ns()}"
            started = time.perf_counter()
            await request_reconcile(lab.client, [big_mod.NAME], token)
            handled = await lab.tracker.wait_handled([big_mod.NAME], token, within=within)
            await ctrl.phase("noop", before, handled - started, per=objects)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def big_reference(lab: Lab, objects: int, m: Metrics, *, user: str) -> None:
    """``kubectl kustomize DIR | kubectl apply --server-side -f -`` of the ``big`` directory, on a cluster of its
    own, as ``user`` (its requests told apart on the control plane): wall and CPU seconds of the two kubectl
    processes, the control plane's CPU and the requests; and ``kubectl kustomize DIR`` alone before it."""
    await create_namespaces(lab.client, APPS_NS)
    root = Path(tempfile.mkdtemp(prefix="big-ref-", dir=lab.cfg.workdir))
    directory = root / "app"
    for rel, text in big_mod.big_files(objects, namespace=APPS_NS).items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_text(text)
    await big_mod._kustomize_alone(lab.cfg, directory, m, "reference")
    plane0, cpu0 = lab.site.cpu(), _children_cpu()
    if lab.site.audit is not None:
        lab.site.audit.take()
    started = time.perf_counter()
    await _kubectl_apply(lab.cfg, directory, lab.site.kubeconfig_for(user), root / "kube-cache")
    m["reference.seconds"] = time.perf_counter() - started
    m["reference.cpu_s"] = _children_cpu() - cpu0
    for name, value in lab.site.cpu().items():
        m[f"reference.{name}_cpu_s"] = value - plane0.get(name, 0.0)
    if lab.site.audit is not None:
        await asyncio.sleep(1.0)  # the audit log's last lines
        requests = lab.site.audit.take()[user]
        m["reference.requests"] = float(requests.total)
        m["reference.requests_per_ks"] = requests.total / objects


def sops_files(i: int, *, rev: int, key: AgeKey, secrets: int = SECRETS_PER_APP) -> dict[str, str | bytes]:
    """``secrets`` Secrets of app ``i``, one SOPS-encrypted file each (``data`` encrypted for ``key``)."""
    recipe = Recipe(rules=EncryptionRules(encrypted_regex="^(data|stringData)$"), age_recipients=[key.recipient])
    files: dict[str, str | bytes] = {
        "kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
        + "".join(f"- secret-{j}.yaml\n" for j in range(secrets)),
    }
    for j in range(secrets):
        value = base64.b64encode(f"app {i} secret {j} revision {rev}".encode()).decode()
        doc = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": f"app-{i}-{j}", "namespace": APPS_NS},
               "data": {"password": value, "username": base64.b64encode(b"bench").decode()}}
        files[f"secret-{j}.yaml"] = encrypt_document(doc, "yaml", recipe)
    return files


async def _publish_sops(lab: Lab, i: int, *, rev: int, key: AgeKey) -> str:
    artifact = await lab.artifacts.publish_files(sops_files(i, rev=rev, key=key), name=f"app-{i}")
    await publish_source(lab.client, kind="GitRepository", namespace=FLUX_NS, name=f"app-{i}", artifact=artifact)
    return str(artifact["revision"])


async def sops(lab: Lab, contender: Contender, n: int, m: Metrics) -> None:
    key = AgeKey.generate()
    await install_crds(lab.client)
    await create_namespaces(lab.client, FLUX_NS, APPS_NS)
    await lab.client.create({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": SOPS_SECRET, "namespace": FLUX_NS},
        "data": {"age.agekey": base64.b64encode(key.identity.encode()).decode()}})
    revisions = await bounded(_publish_sops(lab, i, rev=1, key=key) for i in range(n))
    names = [f"app-{i}" for i in range(n)]
    for i in range(n):
        ks = kustomization(i, wait=False)
        ks["spec"]["decryption"] = {"provider": "sops", "secretRef": {"name": SOPS_SECRET}}
        await lab.client.create(ks)
    before = lab.zero()
    async with lab.controller(contender, m, name=f"sops-{n}-{contender.label()}") as ctrl:
        ready = await lab.tracker.wait_ready(dict(zip(names, revisions, strict=True)), within=_within(n))
        await ctrl.phase("cold", before, ready - ctrl.spawned, per=n)

        if lab.wants("revision"):
            before = await ctrl.snap("revision")
            started = time.perf_counter()
            revisions = await bounded(_publish_sops(lab, i, rev=2, key=key) for i in range(n))
            ready = await lab.tracker.wait_ready(dict(zip(names, revisions, strict=True)), within=_within(n))
            await ctrl.phase("revision", before, ready - started, per=n)
            secret = await lab.client.get("v1", "Secret", "app-0-0", APPS_NS)
            m["revision.decrypted"] = float(
                base64.b64decode(secret["data"]["password"]) == b"app 0 secret 0 revision 2")
        if lab.wants("noop"):
            await _noop(lab, ctrl, names, "noop")


async def starvation(lab: Lab, contender: Contender, m: Metrics, *, healthy: int = 100, broken: int = 8) -> None:
    await install_crds(lab.client)
    await create_namespaces(lab.client, FLUX_NS, APPS_NS)
    revisions = await bounded(publish(lab.client, lab.artifacts, i, rev=1) for i in range(healthy))
    expected = {f"app-{i}": rev for i, rev in enumerate(revisions)}
    async with lab.controller(contender, m, name=f"starvation-{contender.label()}") as ctrl:
        names = await _create_broken(lab.client, lab.artifacts, broken)
        # a controller that holds a worker while it waits has at most --concurrent of them waiting
        await _waiting(lab.client, names, count=min(broken, contender.concurrent))
        before = await ctrl.snap("healthy")
        started, wall = time.perf_counter(), time.time()
        await bounded(lab.client.create(kustomization(i, wait=True)) for i in range(healthy))
        ready = await lab.tracker.wait_ready(expected, within=1800.0)
        await ctrl.phase("healthy", before, ready - started, per=healthy)
        # when the controller manager had rolled out the last healthy Deployment: the floor both controllers'
        # health checks (a poll every 5 s) wait for
        settled = await _deployments_settled(lab, [f"app-{i}" for i in range(healthy)])
        if settled is not None:
            m["healthy.deployments_settled_s"] = settled - wall


async def _deployments_settled(lab: Lab, names: list[str]) -> float | None:
    """The latest time (epoch seconds, to the second) one of these Deployments' ``Progressing`` condition
    last changed — to ``NewReplicaSetAvailable``, once it is Current — or None if one has none."""
    wanted = set(names)
    latest = 0.0
    for item in await lab.client.list("apps/v1", "Deployment", APPS_NS):
        if item["metadata"]["name"] not in wanted:
            continue
        stamps = [c.get("lastUpdateTime") for c in (item.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Progressing"]
        if not stamps or not stamps[0]:
            return None
        latest = max(latest, datetime.fromisoformat(str(stamps[0]).replace("Z", "+00:00")).timestamp())
    return latest or None


async def chain(lab: Lab, contender: Contender, m: Metrics, *, depth: int = 20) -> None:
    await install_crds(lab.client)
    await create_namespaces(lab.client, FLUX_NS, APPS_NS)
    revisions = await bounded(publish(lab.client, lab.artifacts, i, rev=1) for i in range(depth))
    expected = {f"app-{i}": rev for i, rev in enumerate(revisions)}
    objs = []
    for i in range(depth):
        obj = kustomization(i, wait=False)
        if i:
            obj["spec"]["dependsOn"] = [{"name": f"app-{i - 1}"}]
        objs.append(obj)
    async with lab.controller(contender, m, name=f"chain-{contender.label()}") as ctrl:
        before = await ctrl.snap("chain")
        started = time.perf_counter()
        for obj in reversed(objs):  # dependents first: each finds its dependency missing or not Ready
            await lab.client.create(obj)
        ready = await lab.tracker.wait_ready(expected, within=depth * 90.0)
        await ctrl.phase("chain", before, ready - started, per=depth)
