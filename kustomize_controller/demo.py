"""``kustomize-controller demo``: the controller working end to end on this machine, no cluster needed.

What it does, in order:
1. starts the embedded development API server (``kustomize_controller.testing.apiserver``) and
   installs the Kustomization CRD (generated from our models) and minimal source CRDs;
2. publishes ``examples/`` as a source artifact over HTTP on 127.0.0.1 and records it in the
   ``flux-system/examples`` GitRepository's status, as source-controller would;
3. creates the Kustomization of ``examples/kustomization.yaml``;
4. runs the controller (the same ``run_controller`` as in a cluster); the embedded server runs no
   kubelet, so it is started with ``simulate_workloads`` (Deployments report the status a finished
   rollout has) and health checks can pass;
5. serves the web UI (``kustomize-controller ui``, ``docs/ui.md``) on 127.0.0.1 as the embedded server's
   admin and prints its address (``--ui-port``; another free port when that one is taken);
6. prints the Kustomization's conditions and the applied objects whenever they change, until
   Ctrl-C — or, with ``--once``, until it is Ready (exit 0) or ``--timeout`` passes (exit 1).

With ``--change-management`` (docs/change-management.md), once Ready it goes on to show both gates:
``approval: manual`` holds a new revision (``Approved=False ApprovalRequired`` with its plan) until the
demo approves the plan id, as ``kustomize-controller approve`` does; then a deny sync window closing
15 s later holds the next revision (``SyncAllowed=False SyncWindowClosed``), which lands when the
window closes. ``--once`` then exits after the last revision is applied.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import yaml

from kustomize_controller.api.changes import (
    APPROVAL_ANNOTATION,
    APPROVED_AT_ANNOTATION,
    APPROVED_PLAN_ANNOTATION,
    SYNC_WINDOWS_ANNOTATION,
)
from kustomize_controller.api.crdgen import build_crd
from kustomize_controller.app import run_controller
from kustomize_controller.approve_command import approve_plan
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.settings import Settings
from kustomize_controller.testing.apiserver import ApiServer
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source
from kustomize_controller.testing.sourcecrds import source_crds
from kustomize_controller.ui.command import DEFAULT_PORT as DEFAULT_UI_PORT
from kustomize_controller.ui.command import preview_defaults, ui_server
from kustomize_controller.ui.server import UiOptions, UiServer

#: where an installation keeps the examples (the image's ``/opt/venv``: ``scripts/install_image.py`` puts them there)
EXAMPLES_UNDER_PREFIX = Path("share") / "kustomize-controller" / "examples"
KS_API = "kustomize.toolkit.fluxcd.io/v1"


def default_examples() -> Path:
    """A checkout's ``examples/`` when running from one, else the copy under the installation prefix."""
    checkout = Path(__file__).resolve().parent.parent / "examples"
    if (checkout / "kustomization.yaml").is_file():
        return checkout
    return Path(sys.prefix) / EXAMPLES_UNDER_PREFIX


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="exit after the Kustomization is Ready")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for Ready with --once")
    parser.add_argument("--examples", default=str(default_examples()),
                        help="directory published as the source (default: %(default)s)")
    parser.add_argument("--change-management", action="store_true",
                        help="once Ready, show an approval (approval: manual) and a sync window holding new revisions")
    parser.add_argument("--ui-port", type=int, default=DEFAULT_UI_PORT,
                        help="port of the web UI on 127.0.0.1 (%(default)s; another free one when taken; -1: no UI)")


async def _install_crds(client: KubeClient) -> None:
    for crd in [build_crd(), *source_crds()]:
        await client.apply(crd, field_manager="kustomize-controller-demo", force=True)
    for crd in [build_crd(), *source_crds()]:
        name = crd["metadata"]["name"]
        for _ in range(100):
            live = await client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
            conds = (live.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                break
            await asyncio.sleep(0.1)


def _summary(obj: dict[str, Any]) -> list[str]:
    status = obj.get("status") or {}
    lines = []
    for cond in status.get("conditions") or []:
        lines.append(f"  {cond['type']:<12} {cond['status']:<8} {cond['reason']}: {cond.get('message', '')}")
    entries = (status.get("inventory") or {}).get("entries") or []
    if entries:
        lines.append("  applied objects:")
        for entry in entries:
            namespace, name, group, kind = _split_id(entry["id"])
            where = f"{namespace}/" if namespace else ""
            lines.append(f"    {kind}{'.' + group if group else ''} {where}{name}")
    return lines


def _split_id(value: str) -> tuple[str, str, str, str]:
    from kustomize_controller.api.inventory import parse_inventory_id

    oid = parse_inventory_id(value)
    return oid.namespace, oid.name, oid.group, oid.kind


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    examples = Path(args.examples)
    ks_file = examples / "kustomization.yaml"
    if not ks_file.is_file():
        print(f"error: {ks_file} not found (pass --examples DIR: a Flux kustomization.yaml and its source)",
              file=out)
        return 1
    kustomization = yaml.safe_load(ks_file.read_text())
    namespace = kustomization["metadata"]["namespace"]
    name = kustomization["metadata"]["name"]
    source_name = kustomization["spec"]["sourceRef"]["name"]
    async with ApiServer(simulate_workloads=True) as server, ArtifactServer() as artifacts:
        config = await load_kubeconfig(server.kubeconfig_path)
        async with KubeClient(config=config, qps=-1, burst=-1) as client:
            print(f"embedded API server at {server.url} (kubeconfig: {server.kubeconfig_path})", file=out)
            await _install_crds(client)
            with contextlib.suppress(AlreadyExistsError):
                await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
            artifact = await artifacts.publish_dir(examples, name=f"{namespace}/{source_name}")
            await publish_source(client, namespace=namespace, name=source_name, artifact=artifact)
            print(f"published {examples} as GitRepository/{namespace}/{source_name} "
                  f"revision {artifact['revision']}", file=out)
            await client.create(kustomization)
            print(f"created Kustomization/{namespace}/{name}; starting the controller", file=out)
            settings = Settings(
                kubeconfig=server.kubeconfig_path,
                metrics_addr="127.0.0.1:0",
                health_addr="127.0.0.1:0",
                # old-version Kustomizations (kubectl apply of a v1beta2 file) convert through us
                webhook_addr="127.0.0.1:0",
                webhook_url="auto",
                runtime_namespace=namespace,
                log_level="error",
                requeue_dependency=Settings().requeue_dependency,
            )
            async with contextlib.AsyncExitStack() as stack, asyncio.TaskGroup() as tasks:
                if args.ui_port >= 0:
                    await _start_ui(stack, client, args.ui_port, out)
                controller = tasks.create_task(run_controller(settings, handle_signals=False))
                try:
                    if args.change_management:
                        code = await _watch(client, namespace, name, out, once=True, within=args.timeout,
                                            controller=controller)
                        if code:
                            return code
                        code = await _change_management(client, artifacts, examples, f"{namespace}/{source_name}",
                                                        kustomization, out, within=args.timeout, controller=controller)
                        if code or args.once:
                            return code
                    return await _watch(client, namespace, name, out, once=args.once, within=args.timeout,
                                        controller=controller)
                finally:
                    controller.cancel()


async def _start_ui(stack: contextlib.AsyncExitStack, client: KubeClient, port: int, out: TextIO) -> UiServer | None:
    """The web UI as the embedded server's admin, on ``port`` or, when it is taken, on a free one."""
    for candidate in dict.fromkeys([port, 0]):
        try:
            server = await stack.enter_async_context(
                ui_server(client=client, options=UiOptions(port=candidate), flags=preview_defaults(), err=out))
        except OSError as err:
            print(f"the web UI cannot listen on 127.0.0.1:{candidate}: {err.strerror or err}", file=out)
            continue
        print(f"web UI: {server.url} (watch it converge in a browser; it acts as the embedded server's admin)",
              file=out, flush=True)
        return server
    return None


async def _watch(client: KubeClient, namespace: str, name: str, out: TextIO, *, once: bool, within: float,
                 controller: asyncio.Task[int]) -> int:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: list[str] = []
    while True:
        if controller.done():
            print(f"the controller stopped (exit {controller.result()})", file=out)
            return 1
        try:
            obj = await client.get(KS_API, "Kustomization", name, namespace)
        except (NotFoundError, KubeError) as err:
            print(f"cannot read Kustomization/{namespace}/{name}: {err}", file=out)
            obj = {}
        lines = _summary(obj)
        if lines and lines != last:
            print(f"Kustomization/{namespace}/{name}:", file=out)
            print("\n".join(lines), file=out)
            out.flush()
            last = lines
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (obj.get("status") or {}).get("conditions") or []
        )
        if once and ready:
            print(json.dumps({"ready": True, "revision": obj["status"].get("lastAppliedRevision")}), file=out)
            return 0
        if once and loop.time() > deadline:
            print(f"not Ready after {within:.0f}s", file=out)
            return 1
        await asyncio.sleep(0.5)


async def _publish_variant(artifacts: ArtifactServer, client: KubeClient, examples: Path, source: str,
                           message: str) -> str:
    """Publish ``examples`` with another podinfo UI message: a new revision with one configured object."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "examples"
        shutil.copytree(examples, copy)
        configmap = copy / "podinfo" / "configmap.yaml"
        doc = yaml.safe_load(configmap.read_text())
        doc["data"]["PODINFO_UI_MESSAGE"] = message
        configmap.write_text(yaml.safe_dump(doc))
        artifact = await artifacts.publish_dir(copy, name=source)
    namespace, name = source.split("/", 1)
    await publish_source(client, namespace=namespace, name=name, artifact=artifact)
    return str(artifact["revision"])


async def _until(client: KubeClient, ks: dict[str, Any], out: TextIO, predicate: Any, *, within: float,
                 controller: asyncio.Task[int]) -> dict[str, Any] | None:
    """Print the Kustomization's conditions as they change until ``predicate`` holds (None: timed out)."""
    namespace, name = ks["metadata"]["namespace"], ks["metadata"]["name"]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: list[str] = []
    while loop.time() < deadline and not controller.done():
        obj = await client.get(KS_API, "Kustomization", name, namespace)
        # the conditions only (the objects do not change here)
        lines = [line for line in _summary(obj) if line[2] != " " and "applied objects" not in line]
        if lines != last:
            print(f"Kustomization/{namespace}/{name}:", file=out)
            print("\n".join(lines), file=out)
            out.flush()
            last = lines
        if predicate(obj):
            return dict(obj)
        await asyncio.sleep(0.5)
    print("the change-management demo did not reach the expected state", file=out)
    return None


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), {})


async def _change_management(client: KubeClient, artifacts: ArtifactServer, examples: Path, source: str,
                             ks: dict[str, Any], out: TextIO, *, within: float, controller: asyncio.Task[int]) -> int:
    namespace, name = ks["metadata"]["namespace"], ks["metadata"]["name"]

    async def annotate(annotations: dict[str, str | None]) -> None:
        await client.patch(KS_API, "Kustomization", name, namespace, {"metadata": {"annotations": annotations}},
                           patch_type="merge")

    print("\n== approval: manual — a new revision waits for its plan to be approved", file=out)
    await annotate({APPROVAL_ANNOTATION: "manual"})
    second = await _publish_variant(artifacts, client, examples, source, "Approved by a person")
    print(f"published revision {second}", file=out)
    obj = await _until(client, ks, out, lambda o: _condition(o, "Approved").get("reason") == "ApprovalRequired"
                       and second in _condition(o, "Approved").get("message", ""), within=within, controller=controller)
    if obj is None:
        return 1
    plan_id = plan_id_in(_condition(obj, "Approved")["message"])
    print(f"approving plan {plan_id}, as `kustomize-controller approve {name} -n {namespace} --yes` does", file=out)
    await approve_plan(client, namespace=namespace, name=name, plan_id=plan_id, clock=RealClock())
    if await _until(client, ks, out, lambda o: (o.get("status") or {}).get("lastAppliedRevision") == second,
                    within=within, controller=controller) is None:
        return 1

    print("\n== a deny sync window, closing in 15 s, holds the next revision until it closes", file=out)
    closes = datetime.now(UTC) + timedelta(seconds=15)
    fired = datetime.now(UTC).replace(second=0, microsecond=0)
    window = {"kind": "deny", "schedule": f"{fired.minute} {fired.hour} * * *", "timeZone": "UTC",
              "duration": f"{int((closes - fired).total_seconds()) + 1}s"}
    await annotate({APPROVAL_ANNOTATION: None, APPROVED_PLAN_ANNOTATION: None, APPROVED_AT_ANNOTATION: None,
                    SYNC_WINDOWS_ANNOTATION: json.dumps([window])})
    third = await _publish_variant(artifacts, client, examples, source, "Applied after the sync window")
    print(f"published revision {third}", file=out)
    if await _until(client, ks, out, lambda o: _condition(o, "SyncAllowed").get("reason") == "SyncWindowClosed"
                    and (o.get("status") or {}).get("lastAttemptedRevision") == third,
                    within=within, controller=controller) is None:
        return 1
    obj = await _until(client, ks, out, lambda o: (o.get("status") or {}).get("lastAppliedRevision") == third,
                       within=within, controller=controller)
    if obj is None:
        return 1
    print(json.dumps({"ready": True, "revision": third, "change_management": True}), file=out)
    return 0


def main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    loop = asyncio.new_event_loop()
    task = loop.create_task(_run(args, out))
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        print("stopped", file=out)
        return 0
    finally:
        loop.close()
