"""``python -m tests.controlplane``: run a command beside a real control plane, or keep one up.

    python -m tests.controlplane run [--export VAR]... [--keep] [--no-controller-manager] [--apiserver-arg ARG]...
            -- COMMAND...
        start the control plane from $KUBE_ASSETS, run COMMAND with each VAR (default TEST_KUBECONFIG) set to
        its admin kubeconfig, then stop everything; exits with COMMAND's status. Without usable assets it
        prints one line saying what is missing and exits 0 (``--require`` makes that exit 2).
    python -m tests.controlplane up [--keep]
        start it, print the kubeconfig path, serve until SIGINT/SIGTERM.

``--apiserver-arg`` adds a kube-apiserver flag (repeatable; it wins over the harness's own, e.g.
``--apiserver-arg=--profiling=true`` for ``/debug/pprof``).

SIGINT/SIGTERM are passed on to COMMAND; the control plane is stopped whatever happens.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from .plane import ASSETS_ENV, ControlPlane, ControlPlaneError, missing_assets


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane")
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb in ("run", "up"):
        p = sub.add_parser(verb)
        p.add_argument("--keep", action="store_true", help="keep the work directory (logs, audit log)")
        p.add_argument("--no-controller-manager", action="store_true")
        p.add_argument("--require", action="store_true", help="missing assets are an error (exit 2)")
        p.add_argument("--workdir", type=Path, default=None)
        p.add_argument("--apiserver-arg", action="append", default=[], metavar="ARG",
                       help="an extra kube-apiserver flag (repeatable)")
    run = sub.choices["run"]
    run.add_argument("--export", action="append", default=[], metavar="VAR",
                     help="environment variable to set to the admin kubeconfig (repeatable)")
    run.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    assets = os.environ.get(ASSETS_ENV)
    why = missing_assets(assets)
    if why:
        print(f"skipped: no real control plane: {why}", file=sys.stderr)
        return 2 if args.require else 0
    assert assets is not None
    plane = ControlPlane(assets=Path(assets), workdir=args.workdir, keep=args.keep,
                         controller_manager=not args.no_controller_manager,
                         apiserver_args=tuple(args.apiserver_arg))
    stop = threading.Event()
    child: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        for proc in child:
            if proc.poll() is None:
                proc.send_signal(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    try:
        plane.start()
        print(f"control plane up in {time.monotonic() - started:.1f}s at {plane.url}; "
              f"kubeconfig {plane.admin_kubeconfig}", file=sys.stderr, flush=True)
        if args.verb == "up":
            print(plane.admin_kubeconfig, flush=True)
            while not stop.wait(1.0):
                pass
            return 0
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            print("run: no command given", file=sys.stderr)
            return 2
        env = dict(os.environ)
        for var in args.export or ["TEST_KUBECONFIG"]:
            env[var] = str(plane.admin_kubeconfig)
        proc = subprocess.Popen(command, env=env)
        child.append(proc)
        return proc.wait()
    except ControlPlaneError as err:
        print(f"control plane: {err}", file=sys.stderr)
        return 2
    finally:
        plane.stop()
        if args.keep and plane.workdir is not None:
            print(f"kept {plane.workdir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
