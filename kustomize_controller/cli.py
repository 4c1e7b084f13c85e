"""The ``kustomize-controller`` command line.

Commands are registered in :data:`COMMANDS` (name → :class:`Command`): ``run`` (the controller,
the default when the first argument names no command), ``build``, ``diff`` (``diff_command.py``),
``approve`` (``approve_command.py``), ``ui`` (``ui/command.py``) and ``demo``. A command either declares
argparse arguments (``configure`` + ``handler``) or takes its arguments unparsed (``raw_handler``), which
is what the controller's pflag-compatible flags need.

``kustomize-controller build PATH [--kustomization FILE] [--no-remote-bases]
[--feature-gates ...] [--kustomize-binary ...]`` renders offline what a reconcile would apply:
PATH plays the artifact root (what a source artifact unpacks to, and the confinement root; it is
copied, never modified), FILE is a Kustomization whose ``spec.path`` selects the directory,
whose overlays and commonMetadata apply and whose inline ``postBuild.substitute`` feeds
substitution. ``substituteFrom`` and ``decryption`` need a cluster: they are reported on stderr
and skipped. Output: multi-document YAML on stdout. Bad input: exit status 1 and a one-line
reason on stderr (``error: ...``); usage errors exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from kustomize_controller.api.kustomization import InvalidKustomizationError, parse_kustomization
from kustomize_controller.kustomize.build import KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.errors import KustomizeError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.pin import PINNED_KUSTOMIZE
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.settings import FeatureGates, FlagError

PROG = "kustomize-controller"
DEFAULT_COMMAND = "run"


class CommandError(Exception):
    """Bad input to a command: printed as one ``error: ...`` line, exit status 1."""


@dataclass(frozen=True)
class Command:
    help: str
    configure: Callable[[argparse.ArgumentParser], None] | None = None
    handler: Callable[[argparse.Namespace, TextIO, TextIO], int] | None = None
    raw_handler: Callable[[list[str], TextIO, TextIO], int] | None = None


# --- build -------------------------------------------------------------------------------------


def _configure_build(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="the artifact root (a directory; copied, not modified)")
    parser.add_argument(
        "--kustomization", metavar="FILE", help="a Kustomization whose spec.path, overlays and substitute apply"
    )
    parser.add_argument("--no-remote-bases", action="store_true", help="refuse remote kustomize bases")
    parser.add_argument(
        "--feature-gates", action="append", default=[], metavar="GATES", help="Name=bool pairs, comma separated"
    )
    parser.add_argument("--kustomize-binary", default="", metavar="BIN", help="kustomize or kubectl binary")


def _load_kustomization(file: str) -> dict[str, Any]:
    try:
        text = Path(file).read_text(encoding="utf-8")
    except OSError as err:
        raise CommandError(f"cannot read {file}: {err.strerror or err}") from err
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise CommandError(f"{file} is not valid YAML: {err}") from err
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "Kustomization":
            try:
                parse_kustomization(doc)
            except InvalidKustomizationError as err:
                raise CommandError(str(err)) from err
            return doc
    raise CommandError(f"{file} holds no Kustomization object")


def _build(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        gates = FeatureGates.parse(args.feature_gates)
    except FlagError as exc:
        raise CommandError(str(exc)) from exc
    root = Path(args.path)
    if not root.is_dir():
        raise CommandError(f"artifact root {args.path} is not a directory")
    spec: dict[str, Any] = {}
    if args.kustomization:
        obj = _load_kustomization(args.kustomization)
        spec = obj.get("spec") or {}
        refs = (spec.get("postBuild") or {}).get("substituteFrom") or []
        if refs:
            names = ", ".join(f"{r.get('kind')}/{r.get('name')}" for r in refs)
            print(f"warning: postBuild.substituteFrom needs a cluster, skipped: {names}", file=err)
        if spec.get("decryption"):
            print("warning: decryption needs keys from the cluster, skipped", file=err)
    options = BuildOptions.from_spec(
        spec,
        no_remote_bases=args.no_remote_bases,
        strict_substitution=gates.enabled("StrictPostBuildSubstitutions"),
    )

    async def run() -> str:
        clock = RealClock()
        command = await detect_builder(clock=clock, kustomize_binary=args.kustomize_binary or None)
        if not command.pinned:
            print(f"warning: the kustomize builder {command.argv[0]} is kustomize "
                  f"{command.kustomize_version or 'of unknown version'}, not the {PINNED_KUSTOMIZE} upstream Flux "
                  "pins: the output may differ from Flux's", file=err)
        pipeline = BuildPipeline(builder=KustomizeBuilder(command=command, clock=clock), workspace=Workspace())
        async with pipeline.local_checkout(root, path=options.path) as checkout:
            result = await pipeline.build(checkout, options)
        return result.render()

    try:
        rendered = asyncio.run(run())
    except KustomizeError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(str(exc)) from exc
    out.write(rendered)
    return 0


# --- run (the controller) and demo ---------------------------------------------------------------


def _run_controller(argv: list[str], out: TextIO, err: TextIO) -> int:
    import os

    from kustomize_controller.settings import parse_flags, usage

    if any(a in ("-h", "--help") for a in argv):
        commands = "\n".join(f"  {name:<8} {command.help}" for name, command in COMMANDS.items())
        print(f"Usage: {PROG} [run] [flags]\n       {PROG} COMMAND ...\n\nCommands:\n{commands}\n\n"
              f"Flags of run (the controller, the default command):\n{usage()}", file=out)
        return 0
    try:
        settings, _ = parse_flags(argv, runtime_namespace=os.environ.get("RUNTIME_NAMESPACE", ""))
    except FlagError as exc:
        print(f"error: {exc}", file=err)
        return 2
    from kustomize_controller.app import run_controller
    from kustomize_controller.kube.transport import limit_tls_read_buffer

    limit_tls_read_buffer()
    return asyncio.run(run_controller(settings))


def _configure_diff(parser: argparse.ArgumentParser) -> None:
    from kustomize_controller.diff_command import configure

    configure(parser)


def _diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kustomize_controller.diff_command import main as diff_main
    from kustomize_controller.kube.transport import limit_tls_read_buffer

    limit_tls_read_buffer()
    return diff_main(args, out, err)


def _configure_approve(parser: argparse.ArgumentParser) -> None:
    from kustomize_controller.approve_command import configure

    configure(parser)


def _approve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kustomize_controller.approve_command import main as approve_main
    from kustomize_controller.kube.transport import limit_tls_read_buffer

    limit_tls_read_buffer()
    return approve_main(args, out, err)


def _configure_ui(parser: argparse.ArgumentParser) -> None:
    from kustomize_controller.ui.command import configure

    configure(parser)


def _ui(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kustomize_controller.ui.command import main as ui_main

    return ui_main(args, out, err)


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    from kustomize_controller.demo import configure

    configure(parser)


def _demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kustomize_controller.demo import main as demo_main
    from kustomize_controller.kube.transport import limit_tls_read_buffer

    limit_tls_read_buffer()
    return demo_main(args, out, err)


COMMANDS: dict[str, Command] = {
    "run": Command(
        help="run the controller (the default command; flags as upstream, see --help)",
        raw_handler=_run_controller,
    ),
    "build": Command(
        help="render offline what a reconcile would apply",
        configure=_configure_build,
        handler=_build,
    ),
    "diff": Command(
        help="show what the next reconcile of a Kustomization would change on a live cluster (writes nothing)",
        configure=_configure_diff,
        handler=_diff,
    ),
    "approve": Command(
        help="show the plan of a Kustomization with approval: manual, as diff does, and approve it (once)",
        configure=_configure_approve,
        handler=_approve,
    ),
    "ui": Command(
        help="serve a live web UI of the Kustomizations on this machine, acting with your kubeconfig",
        configure=_configure_ui,
        handler=_ui,
    ),
    "demo": Command(
        help="run the controller on the embedded API server with the examples/ source (no cluster needed)",
        configure=_configure_demo,
        handler=_demo,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Flux kustomize-controller in Python")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub_parser = sub.add_parser(name, help=command.help, description=command.help)
        if command.configure is not None:
            command.configure(sub_parser)
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] not in COMMANDS:
        args_list = [DEFAULT_COMMAND, *args_list]
    raw = COMMANDS.get(args_list[0])
    try:
        if raw is not None and raw.raw_handler is not None:
            return raw.raw_handler(args_list[1:], out, err)
        parser = build_parser()
        try:
            args = parser.parse_args(args_list)
        except SystemExit as exc:
            return int(exc.code or 0)
        handler = COMMANDS[args.command].handler
        if handler is None:
            raise CommandError(f"command '{args.command}' has no handler")
        return handler(args, out, err)
    except CommandError as exc:
        print("error: " + " ".join(str(exc).split()), file=err)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
