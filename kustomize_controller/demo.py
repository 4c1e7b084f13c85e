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
5. prints the Kustomization's conditions and the applied objects whenever they change, until
   Ctrl-C — or, with ``--once``, until it is Ready (exit 0) or ``--timeout`` passes (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

import yaml

from kustomize_controller.api.crdgen import build_crd
from kustomize_controller.app import run_controller
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from kustomize_controller.settings import Settings
from kustomize_controller.testing.apiserver import ApiServer
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source
from kustomize_controller.testing.sourcecrds import source_crds

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
            async with asyncio.TaskGroup() as tasks:
                controller = tasks.create_task(run_controller(settings, handle_signals=False))
                try:
                    return await _watch(client, namespace, name, out, once=args.once, within=args.timeout,
                                        controller=controller)
                finally:
                    controller.cancel()


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
