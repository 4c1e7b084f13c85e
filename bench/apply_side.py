"""Issue 36, the apply side: what the apply engine and a reconcile cost, in requests and seconds.

    python -m bench.apply_side engine --objects 5000 [--json FILE]
        One Kustomization's objects (``objects`` ConfigMaps, the issue's workload) through the apply
        engine in this process, configured as the reconciler configures it (one ``VerifiedApplies``, the
        previous inventory as ``expected``), phase by phase: ``cold`` (nothing exists), ``noop1`` (the
        interval after it), ``noop2``, ``change`` (one object's data changed), ``drift`` (one object
        edited out of band: it must come back ``configured``), ``fresh`` (a new process: empty memory, the
        objects exist). Per phase: seconds and the requests by verb. Then the apply part of the reference,
        ``kubectl apply --server-side -f`` of the same objects built once, into a namespace of its own.
    python -m bench.apply_side controller --objects 5000 [--json FILE]
        The same objects as files (one ConfigMap a file, listed by a ``kustomization.yaml`` with
        ``namespace:``, the issue's directory) through the controller process: ``kubectl kustomize DIR``
        alone, the reference ``kubectl kustomize DIR | kubectl apply --server-side -f -`` into a namespace
        of its own, then the controller's cold start to Ready, a revision changing one object, and a no-op
        round (``requestedAt``): seconds, requests by verb, CPU of the controller, its kustomize children,
        the API server and etcd. The apply side's share of a phase is its seconds less ``kustomize_s``
        (cold, change) — the build is the other part.
    python -m bench.apply_side scale --kustomizations 10000 [--json FILE]
        The flux-benchmark workload (N Kustomizations of 4 objects, one GitRepository each), cold start only:
        one controller process from its spawn to all Ready; seconds, CPU of the controller, its builds, the
        API server and etcd, requests per Kustomization by verb, peak RSS. (``python -m bench --scenarios
        scale`` measures the same and then a new revision and a no-op round: twice as long at 10,000.)
    python -m bench.apply_side listcost --crowd 10000 --group 16 [--rounds 50]
        What reading a group of a Kustomization's objects costs the API server, one GET each against one
        metadata-only list selected by the owner labels, in a namespace of ``crowd`` ConfigMaps of other
        owners (the 10,000-app workload puts all its objects in one namespace): API server and etcd CPU per
        round of each, for the choice of ``LIST_MIN_OBJECTS`` (apply/plan.py).
    python -m bench.apply_side audit FILE [--user NAME]
        Requests and the API server's own time (``stageTimestamp - requestReceivedTimestamp``) by user,
        verb, resource and dry-run, from a kube-apiserver audit log (``tests/controlplane``'s
        ``audit.jsonl``); watches are counted apart (their time is their lifetime).

Both run against ``BENCH_KUBECONFIG`` when set (e.g. under ``python -m tests.controlplane run --export
BENCH_KUBECONFIG --``), else an embedded API server of their own. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.procs import bench_env, cpu_seconds
from bench.scenarios import Config, cluster
from bench.workload import APPS_NS, EXTERNAL_KUBECONFIG, create_namespaces
from kustomize_controller.apply.changeset import Action, ChangeSet
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.normalize import prepare_objects
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.runtime.clock import RealClock

REF_NS = f"{APPS_NS}-ref"
OWNER = owner_labels("big", "flux-system")
Metrics = dict[str, float]


def configmaps(objects: int, *, namespace: str, changed: int = -1) -> list[dict[str, Any]]:
    """The issue's big Kustomization as built: ``objects`` ConfigMaps; ``changed``: that one's data differs."""
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i:05d}", "namespace": namespace},
             "data": {"revision": "2" if i == changed else "1", "message": f"hello from object {i}"}}
            for i in range(objects)]


def server_pids(client: KubeClient, api: Any) -> dict[str, int]:
    """The API server's and etcd's process ids: the embedded server's, or a control plane's on this machine
    (found by the port in the client's URL); empty when the cluster is elsewhere."""
    if api.pid:
        return {"apiserver": api.pid}
    port = client.config.server.rsplit(":", 1)[-1]
    pids: dict[str, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith(b"kube-apiserver") and f"--secure-port={port}".encode() in argv:
                pids["apiserver"] = int(proc.name)
                etcd = next((a.split(b"=", 1)[1] for a in argv if a.startswith(b"--etcd-servers=")), b"")
                pids["etcd_url"] = int(etcd.rsplit(b":", 1)[-1] or 0)
    if "etcd_url" in pids:
        url_port = pids.pop("etcd_url")
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if argv[0].endswith(b"/etcd") and any(a.startswith(b"--listen-client-urls=") and
                                                       a.endswith(f":{url_port}".encode()) for a in argv):
                    pids["etcd"] = int(proc.name)
    return pids


def cpu_now(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of this process (the driver: the engine and its client) and of ``pids``."""
    out = {"driver": time.process_time()}
    out.update({name: cpu_seconds(pid)[0] for name, pid in pids.items()})
    return out


def request_counts(client: KubeClient) -> collections.Counter[str]:
    """The client's own count (``kustomize_controller_kube_requests_total``) by verb, dry-run and resource."""
    out: collections.Counter[str] = collections.Counter()
    for family in client.rest_metrics.by_resource_total.collect():
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            dry = " (dry-run)" if labels.get("dry_run") == "true" else ""
            sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
            out[f"{labels['verb']}{dry} {labels['resource'] or '(discovery)'}{sub}"] += int(sample.value)
    return out


async def _phase(m: Metrics, name: str, client: KubeClient, engine: ResourceManager,
                 objects: list[dict[str, Any]], expected: Iterable[ObjRef] | None,
                 pids: dict[str, int]) -> ChangeSet:
    before, cpu0 = request_counts(client), cpu_now(pids)
    options = ApplyOptions(expected=None if expected is None else frozenset(expected), owner=OWNER)
    started = time.perf_counter()
    change_set = await engine.apply_all_staged(objects, options)
    m[f"{name}.seconds"] = time.perf_counter() - started
    for what, value in cpu_now(pids).items():
        m[f"{name}.cpu_s.{what}"] = value - cpu0[what]
    delta = request_counts(client) - before
    m[f"{name}.requests"] = float(sum(delta.values()))
    for what, count in delta.items():
        m[f"{name}.req.{what}"] = float(count)
    for action in Action:
        count = sum(1 for e in change_set if e.action is action)
        if count:
            m[f"{name}.{action.value}"] = float(count)
    return change_set


async def engine_phases(client: KubeClient, objects: int, m: Metrics, *, concurrency: int = 4,
                        pids: dict[str, int]) -> None:
    desired = configmaps(objects, namespace=APPS_NS)
    prepare_objects(desired, owner=OWNER)
    verified = VerifiedApplies()
    engine = ResourceManager(client=client, clock=RealClock(), concurrency=concurrency, verified=verified)
    cold = await _phase(m, "cold", client, engine, desired, expected=(), pids=pids)
    inventory = [e.ref for e in cold]
    await _phase(m, "noop1", client, engine, desired, expected=inventory, pids=pids)
    await _phase(m, "noop2", client, engine, desired, expected=inventory, pids=pids)
    changed = configmaps(objects, namespace=APPS_NS, changed=objects // 2)
    prepare_objects(changed, owner=OWNER)
    await _phase(m, "change", client, engine, changed, expected=inventory, pids=pids)
    edited = changed[objects // 3]["metadata"]["name"]
    await client.patch("v1", "ConfigMap", edited, APPS_NS, {"data": {"message": "edited"}}, patch_type="merge",
                       field_manager="kubectl-edit")
    drift = await _phase(m, "drift", client, engine, changed, expected=inventory, pids=pids)
    m["drift.detected"] = float(any(e.action is Action.CONFIGURED and e.ref.name == edited for e in drift))
    fresh = ResourceManager(client=client, clock=RealClock(), concurrency=concurrency, verified=VerifiedApplies())
    await _phase(m, "fresh", client, fresh, changed, expected=inventory, pids=pids)


async def kubectl_apply(cfg: Config, objects: int, kubeconfig: str, workdir: Path, m: Metrics) -> None:
    """The reference's apply part: ``kubectl apply --server-side -f`` of the built objects."""
    built = workdir / "built.yaml"  # as kustomize prints it: one document per object (JSON is YAML)
    built.write_text("".join(f"---\n{json.dumps(o)}\n" for o in configmaps(objects, namespace=REF_NS)))
    kubectl0 = sum(cpu_seconds(os.getpid())[1:])
    proc = await asyncio.create_subprocess_exec(
        cfg.kubectl, "apply", "--server-side", "--field-manager=bench-baseline", "--cache-dir",
        str(workdir / "kube-cache"), "-f", str(built), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env={**bench_env(), "KUBECONFIG": kubeconfig})
    started = time.perf_counter()
    _, err = await proc.communicate()
    m["kubectl_apply.seconds"] = time.perf_counter() - started
    m["kubectl_apply.cpu_s.kubectl"] = sum(cpu_seconds(os.getpid())[1:]) - kubectl0
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl apply failed: {err.decode()[-500:]}")


async def engine(objects: int, *, concurrency: int, reference: bool) -> Metrics:
    m: Metrics = {"objects": float(objects)}
    workdir = Path(tempfile.mkdtemp(prefix="apply-side-"))
    cfg = Config(workdir=workdir)
    async with cluster(cfg, f"apply-side-{objects}") as (api, client, _artifacts):
        try:
            await create_namespaces(client, APPS_NS, REF_NS)
            pids = server_pids(client, api)
            await engine_phases(client, objects, m, concurrency=concurrency, pids=pids)
            if reference:
                cpu0 = cpu_now(pids)
                await kubectl_apply(cfg, objects, api.kubeconfig, workdir, m)
                for what, value in cpu_now(pids).items():
                    if what != "driver":
                        m[f"kubectl_apply.cpu_s.{what}"] = value - cpu0[what]
        finally:
            if EXTERNAL_KUBECONFIG:
                with contextlib.suppress(NotFoundError):
                    await client.delete("v1", "Namespace", REF_NS)
    return m


def big_files(objects: int, *, namespace: str, changed: int = -1) -> dict[str, str]:
    """The issue's directory: ``objects`` ConfigMaps, one file each, and a kustomization with ``namespace:``."""
    files = {f"cm-{o['metadata']['name'][3:]}.yaml": json.dumps(o) + "\n"
             for o in configmaps(objects, namespace=namespace, changed=changed)}
    files["kustomization.yaml"] = (
        f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\nresources:\n"
        + "".join(f"- {name}\n" for name in sorted(files)))
    return files


async def _timed_shell(script: str, env: dict[str, str]) -> tuple[float, float]:
    """Seconds and CPU seconds (this process's reaped children) of a ``bash -o pipefail -c`` script."""
    cpu0 = sum(cpu_seconds(os.getpid())[1:])
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec("bash", "-o", "pipefail", "-c", script, env=env,
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{script[:80]}... failed: {err.decode()[-500:]}")
    return time.perf_counter() - started, sum(cpu_seconds(os.getpid())[1:]) - cpu0


async def controller_phases(objects: int) -> Metrics:
    from bench.procs import metric_sum, requests_by_kind
    from bench.scenarios import _settled, controller
    from bench.workload import FLUX_NS, Tracker, install_crds, kustomization, request_reconcile
    from kustomize_controller.testing.artifacts import publish_source

    m: Metrics = {"objects": float(objects)}
    workdir = Path(tempfile.mkdtemp(prefix="apply-side-"))
    cfg = Config(workdir=workdir)
    within = max(900.0, objects * 0.3)
    async with cluster(cfg, f"apply-side-ctrl-{objects}") as (api, client, artifacts), Tracker(client) as tracker:
        try:
            await install_crds(client)
            await create_namespaces(client, FLUX_NS, APPS_NS, REF_NS)
            pids = server_pids(client, api)
            reference = workdir / "reference"
            reference.mkdir()
            for rel, text in big_files(objects, namespace=REF_NS).items():
                (reference / rel).write_text(text)
            env = {**bench_env(), "KUBECONFIG": api.kubeconfig}
            m["kustomize_s"], m["kustomize_cpu_s"] = await _timed_shell(
                f'"{cfg.kubectl}" kustomize "{reference}" >/dev/null', env)
            cpu0 = cpu_now(pids)
            m["reference_s"], m["reference_cpu_s.kubectl"] = await _timed_shell(
                f'"{cfg.kubectl}" kustomize "{reference}" | "{cfg.kubectl}" apply --server-side '
                f'--field-manager=bench-baseline --cache-dir "{workdir / "kube-cache"}" -f - >/dev/null', env)
            for what, value in cpu_now(pids).items():
                if what != "driver":
                    m[f"reference_cpu_s.{what}"] = value - cpu0[what]

            artifact = await artifacts.publish_files(big_files(objects, namespace=APPS_NS), name="app-0")
            await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name="app-0", artifact=artifact)
            ks = kustomization(0, wait=False)
            ks["spec"]["timeout"] = "30m"
            await client.create(ks)
            cpu0 = cpu_now(pids)
            started = time.perf_counter()
            ctrl = controller(cfg, api, name=f"apply-side-{objects}")
            async with ctrl:
                ready = await tracker.wait_ready({"app-0": str(artifact["revision"])}, within=within)
                m["cold_s"] = ready - started
                before = await _settled(ctrl)
                _phase_costs(m, "cold", ctrl, {}, before, cpu0, pids, requests_by_kind, metric_sum)
                stats = ctrl.stats()
                kcpu0 = stats.children_cpu_s
                cpu0 = cpu_now(pids)
                ccpu0 = stats.cpu_s
                started = time.perf_counter()
                changed = await artifacts.publish_files(big_files(objects, namespace=APPS_NS, changed=0), name="app-0")
                await publish_source(client, kind="GitRepository", namespace=FLUX_NS, name="app-0", artifact=changed)
                ready = await tracker.wait_ready({"app-0": str(changed["revision"])}, within=within)
                m["change_s"] = ready - started
                after = await _settled(ctrl)
                _phase_costs(m, "change", ctrl, before, after, cpu0, pids, requests_by_kind, metric_sum,
                             controller_cpu0=ccpu0, kustomize_cpu0=kcpu0)
                for round_ in (1, 2):
                    before, stats = after, ctrl.stats()
                    ccpu0, kcpu0, cpu0 = stats.cpu_s, stats.children_cpu_s, cpu_now(pids)
                    token = f"apply-side-{time.time_ns()}"
                    started = time.perf_counter()
                    await request_reconcile(client, ["app-0"], token)
                    handled = await tracker.wait_handled(["app-0"], token, within=within)
                    m[f"noop{round_}_s"] = handled - started
                    after = await _settled(ctrl)
                    _phase_costs(m, f"noop{round_}", ctrl, before, after, cpu0, pids, requests_by_kind, metric_sum,
                                 controller_cpu0=ccpu0, kustomize_cpu0=kcpu0)
                m["controller_peak_rss_mib"] = ctrl.stats().peak_rss_mib
        finally:
            if EXTERNAL_KUBECONFIG:
                with contextlib.suppress(NotFoundError):
                    await client.delete("v1", "Namespace", REF_NS)
    m["cold_ratio"] = m["cold_s"] / m["reference_s"]
    m["noop_ratio"] = m["noop2_s"] / m["reference_s"]
    m["cold_apply_side_s"] = m["cold_s"] - m["kustomize_s"]
    return m


async def scale_cold(n: int) -> Metrics:
    from bench.procs import metric_sum, requests_by_kind
    from bench.scenarios import _settled, controller
    from bench.workload import Tracker, setup

    m: Metrics = {"kustomizations": float(n)}
    cfg = Config(workdir=Path(tempfile.mkdtemp(prefix="apply-side-scale-")))
    async with cluster(cfg, f"apply-side-scale-{n}") as (api, client, artifacts), Tracker(client) as tracker:
        started = time.perf_counter()
        expected = await setup(client, artifacts, n, wait=False)
        m["setup_s"] = time.perf_counter() - started
        pids = server_pids(client, api)
        m["loadavg_start"] = os.getloadavg()[0]
        cpu0 = cpu_now(pids)
        started = time.perf_counter()
        ctrl = controller(cfg, api, name=f"scale-{n}")
        async with ctrl:
            ready = await tracker.wait_ready(expected, within=max(600.0, n * 2.0))
            m["cold_s"] = ready - started
            m["first_ready_s"] = tracker.first_ready(expected) - started
            stats = ctrl.stats()
            m["peak_rss_mib"] = stats.peak_rss_mib
            m["cpu_ms_per_ks.controller"] = stats.cpu_s * 1000 / n
            m["cpu_ms_per_ks.kustomize"] = stats.children_cpu_s * 1000 / n
            for what, value in cpu_now(pids).items():
                if what != "driver":
                    m[f"cpu_ms_per_ks.{what}"] = (value - cpu0[what]) * 1000 / n
            m["loadavg_end"] = os.getloadavg()[0]
            samples = await _settled(ctrl)
            m["requests_per_ks"] = metric_sum(samples, "rest_client_requests_total") / n
            for what, count in requests_by_kind(samples).items():
                m[f"req_per_ks.{what}"] = count / n
    return m


async def list_cost(crowd: int, group: int, rounds: int) -> Metrics:
    from bench.workload import bounded

    m: Metrics = {"crowd": float(crowd), "group": float(group)}
    cfg = Config(workdir=Path(tempfile.mkdtemp(prefix="apply-side-list-")))
    async with cluster(cfg, "apply-side-list") as (api, client, _artifacts):
        await create_namespaces(client, APPS_NS)
        ours = configmaps(group, namespace=APPS_NS)
        prepare_objects(ours, owner=OWNER)
        others = [{**o, "metadata": {**o["metadata"], "name": f"other-{i:05d}",
                                      "labels": owner_labels(f"app-{i}", "flux-system")}}
                  for i, o in enumerate(configmaps(crowd, namespace=APPS_NS))]
        await bounded((client.apply(o, field_manager="bench", force=True) for o in [*ours, *others]), limit=16)
        pids = server_pids(client, api)
        selector = ",".join(f"{k}={v}" for k, v in sorted(OWNER.items()))
        for how in ("get", "list", "get", "list"):
            cpu0, started = cpu_now(pids), time.perf_counter()
            for _ in range(rounds):
                if how == "get":
                    for o in ours:
                        await client.get("v1", "ConfigMap", o["metadata"]["name"], APPS_NS)
                else:
                    items = await client.list("v1", "ConfigMap", APPS_NS, label_selector=selector,
                                              metadata_only=True)
                    assert len(items) == group
            m[f"{how}.seconds_per_round"] = (time.perf_counter() - started) / rounds
            for what, value in cpu_now(pids).items():
                m[f"{how}.cpu_ms_per_round.{what}"] = (value - cpu0[what]) * 1000 / rounds
    return m


def _phase_costs(m: Metrics, key: str, ctrl: Any, before: Any, after: Any, cpu0: dict[str, float],
                 pids: dict[str, int], requests_by_kind: Any, metric_sum: Any, *, controller_cpu0: float = 0.0,
                 kustomize_cpu0: float = 0.0) -> None:
    stats = ctrl.stats()
    m[f"{key}_cpu_s.controller"] = stats.cpu_s - controller_cpu0
    m[f"{key}_cpu_s.kustomize"] = stats.children_cpu_s - kustomize_cpu0
    for what, value in cpu_now(pids).items():
        if what != "driver":
            m[f"{key}_cpu_s.{what}"] = value - cpu0[what]
    m[f"{key}_requests"] = (metric_sum(after, "rest_client_requests_total")
                            - metric_sum(before, "rest_client_requests_total") if before else
                            metric_sum(after, "rest_client_requests_total"))
    a, b = requests_by_kind(after), requests_by_kind(before) if before else {}
    for what, count in a.items():
        if count - b.get(what, 0.0):
            m[f"{key}_req.{what}"] = count - b.get(what, 0.0)


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def audit_summary(path: Path, *, user: str | None = None) -> list[tuple[str, int, float]]:
    """``(what, requests, API-server seconds)`` by user, verb, resource and dry-run, most time first."""
    count: collections.Counter[str] = collections.Counter()
    seconds: dict[str, float] = collections.defaultdict(float)
    with path.open() as lines:
        for line in lines:
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete":
                continue
            name = str((event.get("user") or {}).get("username", ""))
            if user is not None and user not in name:
                continue
            ref = event.get("objectRef") or {}
            resource = str(ref.get("resource", "")) + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            dry = " (dry-run)" if "dryRun=All" in str(event.get("requestURI", "")) else ""
            key = f"{name} {event.get('verb')}{dry} {resource or event.get('requestURI', '')[:40]}"
            count[key] += 1
            if event.get("verb") != "watch":
                seconds[key] += _time(event["stageTimestamp"]) - _time(event["requestReceivedTimestamp"])
    return sorted(((k, count[k], seconds[k]) for k in count), key=lambda row: -row[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.apply_side")
    sub = parser.add_subparsers(dest="verb", required=True)
    run = sub.add_parser("engine")
    run.add_argument("--objects", type=int, default=1000)
    run.add_argument("--concurrency", type=int, default=4)
    run.add_argument("--no-reference", action="store_true")
    run.add_argument("--json", default=None)
    scale = sub.add_parser("scale")
    scale.add_argument("--kustomizations", type=int, default=1000)
    scale.add_argument("--json", default=None)
    cost = sub.add_parser("listcost")
    cost.add_argument("--crowd", type=int, default=10000)
    cost.add_argument("--group", type=int, default=16)
    cost.add_argument("--rounds", type=int, default=50)
    cost.add_argument("--json", default=None)
    ctrl = sub.add_parser("controller")
    ctrl.add_argument("--objects", type=int, default=1000)
    ctrl.add_argument("--json", default=None)
    audit = sub.add_parser("audit")
    audit.add_argument("file", type=Path)
    audit.add_argument("--user", default=None)
    audit.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    if args.verb == "audit":
        for what, requests, seconds in audit_summary(args.file, user=args.user)[: args.top]:
            print(f"{requests:8d} {seconds:9.2f} s  {what}")
        return 0
    if args.verb == "controller":
        m = asyncio.run(controller_phases(args.objects))
    elif args.verb == "listcost":
        m = asyncio.run(list_cost(args.crowd, args.group, args.rounds))
    elif args.verb == "scale":
        m = asyncio.run(scale_cold(args.kustomizations))
    else:
        m = asyncio.run(engine(args.objects, concurrency=args.concurrency, reference=not args.no_reference))
    for key in sorted(m):
        print(f"{key:60s} {m[key]:12.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(m, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
