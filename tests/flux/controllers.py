"""Flux's controllers configured to run out of cluster on loopback, side by side (``FluxProcess``es).

Each function returns a ``FluxProcess`` not yet started (``await proc.start()``; ``await proc.stop()``),
with the flags that make it work beside the others on one machine and its extra addresses in ``urls``:

- ``source_controller``: artifacts stored under ``workdir/source-controller-storage`` and served on a free
  loopback port, which is also the advertised address (``status.artifact.url`` is then reachable from this
  machine: no ``SOURCE_CONTROLLER_LOCALHOST`` needed); ``urls["storage"]``. It refuses to start without the
  source CRDs (HelmChart's included): install ``assets.crd_files("source.")`` first.
- ``notification_controller``: its event endpoint (``--events-addr``, where it *listens*) and webhook
  receiver (``--receiverAddr``) on free ports; ``urls["events"]`` is what a kustomize-controller's
  ``--events-addr`` names (``http://127.0.0.1:PORT/``), ``urls["receiver"]``.
- ``upstream_kustomize_controller``: Flux's own kustomize-controller, watching only ``namespace`` (its
  ``RUNTIME_NAMESPACE``) unless told otherwise, so that it can share a cluster with ours; events to
  ``events_addr`` when given.

Logs (JSON lines) go to ``workdir/<name>.log``; ``FluxProcess.logs()`` reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.processes import free_port

from . import assets
from .process import FluxProcess


def source_controller(*, kubeconfig: Path | str, workdir: Path, namespace: str = "flux-system",
                      args: Sequence[str] = ()) -> FluxProcess:
    storage = workdir / "source-controller-storage"
    storage.mkdir(parents=True, exist_ok=True)
    port = free_port()
    return FluxProcess(
        binary=assets.binary(assets.SOURCE_CONTROLLER), kubeconfig=kubeconfig, runtime_namespace=namespace,
        log_path=workdir / "source-controller.log",
        args=[f"--storage-path={storage}", f"--storage-addr=127.0.0.1:{port}",
              f"--storage-adv-addr=127.0.0.1:{port}", *args],
        urls={"storage": f"http://127.0.0.1:{port}"})


def notification_controller(*, kubeconfig: Path | str, workdir: Path, namespace: str = "flux-system",
                            args: Sequence[str] = ()) -> FluxProcess:
    events, receiver = free_port(), free_port()
    return FluxProcess(
        binary=assets.binary(assets.NOTIFICATION_CONTROLLER), kubeconfig=kubeconfig, runtime_namespace=namespace,
        log_path=workdir / "notification-controller.log",
        args=[f"--events-addr=127.0.0.1:{events}", f"--receiverAddr=127.0.0.1:{receiver}", *args],
        urls={"events": f"http://127.0.0.1:{events}/", "receiver": f"http://127.0.0.1:{receiver}"})


def upstream_kustomize_controller(*, kubeconfig: Path | str, workdir: Path, namespace: str,
                                  events_addr: str = "", watch_all_namespaces: bool = False,
                                  args: Sequence[str] = ()) -> FluxProcess:
    flags = [f"--watch-all-namespaces={str(watch_all_namespaces).lower()}"]
    if events_addr:
        flags.append(f"--events-addr={events_addr}")
    return FluxProcess(
        binary=assets.binary(assets.KUSTOMIZE_CONTROLLER), kubeconfig=kubeconfig, runtime_namespace=namespace,
        log_path=workdir / f"upstream-kustomize-controller-{namespace}.log", args=[*flags, *args])
