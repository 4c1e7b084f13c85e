"""``kustomize-controller ui``: serve the web UI on this machine, acting with the user's kubeconfig.

``kustomize-controller ui [--port 9333] [--address 127.0.0.1] [--open] [-n NAMESPACE]
[--sync-windows-configmap NAMESPACE/NAME] [--kubeconfig FILE]`` and the controller flags a plan needs (as
``diff``: ``--override-manager``, ``--feature-gates``, ``--sops-age-secret``, …) serves the pages until
Ctrl-C. Every read and every action is the kubeconfig user's: the API server's RBAC decides what the pages
show and allow; nothing is installed in the cluster.

It binds to loopback unless ``--address`` says otherwise; then it prints a warning that anyone who reaches
the address acts with the user's credentials (the UI has no login of its own), and answers only the names in
``--allow-host`` besides the address itself. ``ui_server`` is the same server for the demo (``demo.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import webbrowser
from collections.abc import AsyncIterator
from typing import TextIO

import aiohttp

from kustomize_controller.diff_command import configure_preview_flags, preview_options, preview_pipeline
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import ConfigError, load_config
from kustomize_controller.kube.transport import limit_tls_read_buffer
from kustomize_controller.kustomize.build import detect_builder
from kustomize_controller.kustomize.errors import BuilderUnavailableError
from kustomize_controller.reconcile.gate.fleet import parse_configmap_ref
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.settings import FlagError
from kustomize_controller.ui.plan import Planner
from kustomize_controller.ui.security import is_loopback
from kustomize_controller.ui.server import UiOptions, UiServer

DEFAULT_PORT = 9333


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to serve on (0: any free one)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to bind (default loopback; any other lets whoever reaches it act as you)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="another host name the UI is reached by (with --address; repeatable)")
    parser.add_argument("--open", action="store_true", help="open the UI in a browser when there is one")
    parser.add_argument("-n", "--namespace", default="",
                        help="show the Kustomizations of one namespace (default: all you may list)")
    parser.add_argument("--sync-windows-configmap", default="", metavar="NAMESPACE/NAME",
                        help="the controller's fleet windows ConfigMap, to show its windows")
    configure_preview_flags(parser)


def preview_defaults() -> argparse.Namespace:
    """The preview flags at their defaults (the demo's UI)."""
    parser = argparse.ArgumentParser()
    configure_preview_flags(parser)
    return parser.parse_args([])


@contextlib.asynccontextmanager
async def ui_server(*, client: KubeClient, options: UiOptions, flags: argparse.Namespace, err: TextIO,
                    clock: Clock | None = None) -> AsyncIterator[UiServer]:
    """A started ``UiServer`` for ``client``'s user with a planner built from ``flags`` (none, with a warning,
    when no kustomize builder is found); stopped on exit."""
    clock = clock or RealClock()
    async with aiohttp.ClientSession() as session:
        planner = None
        try:
            command = await detect_builder(clock=clock, kustomize_binary=flags.kustomize_binary or None)
        except BuilderUnavailableError as exc:
            print(f"warning: no kustomize builder, plans cannot be shown: {exc}", file=err)
        else:
            planner = Planner(client=client, pipeline=preview_pipeline(command, clock=clock, session=session),
                              clock=clock, options=preview_options(flags, client, as_applied=True))
        async with UiServer(client=client, clock=clock, options=options, planner=planner) as server:
            yield server


def warn_if_exposed(options: UiOptions, url: str, err: TextIO) -> None:
    if is_loopback(options.host):
        return
    print("!" * 100, file=err)
    print(f"WARNING: the UI listens on {options.host}:{url.rsplit(':', 1)[1]}, not on loopback. It has no login of its "
          "own: ANYONE WHO CAN REACH THIS ADDRESS READS AND ACTS ON THE CLUSTER WITH YOUR CREDENTIALS (your "
          "kubeconfig), within your RBAC. Use it only behind an authenticating proxy or on a network you trust "
          "(docs/ui.md).", file=err)
    print("!" * 100, file=err, flush=True)


async def _serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    config = await load_config(kubeconfig=args.kubeconfig or None)
    fleet = parse_configmap_ref(args.sync_windows_configmap) if args.sync_windows_configmap else None
    options = UiOptions(host=args.address, port=args.port, extra_hosts=tuple(args.allow_host),
                        namespace=args.namespace or None, fleet_windows=fleet)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with KubeClient(config=config) as client, \
            ui_server(client=client, options=options, flags=args, err=err) as server:
        print(f"kustomize-controller ui: {server.url} (as the user of {config.source or 'the kubeconfig'}, "
              f"server {config.server}); Ctrl-C to stop", file=out, flush=True)
        warn_if_exposed(options, server.url, err)
        if args.open:
            _open(server.url, err)
        await stop.wait()
    print("stopped", file=out)
    return 0


def _open(url: str, err: TextIO) -> None:
    try:
        webbrowser.get()
    except webbrowser.Error:
        print(f"no browser found here: open {url} yourself", file=err)
        return
    webbrowser.open(url)


def main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    limit_tls_read_buffer()
    try:
        return asyncio.run(_serve(args, out, err))
    except (ConfigError, FlagError, ValueError, OSError) as exc:
        print("error: " + " ".join(str(exc).split()), file=err)
        return 2
