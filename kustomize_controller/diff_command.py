"""``kustomize-controller diff``: what the next reconcile of a Kustomization would change on a live cluster.

``kustomize-controller diff NAME [-n NAMESPACE] [--kubeconfig FILE] [--path DIR] [--verbose]
[--output text|json] [--override-manager M]... [--feature-gates MigrateAPIVersion=true]`` runs
``reconcile.preview`` (the reconcile pipeline up to the server-side dry-run, writing nothing, with the
apply options the controller would use given the same ``--override-manager``,
``--custom-apply-stage-kinds`` and MigrateAPIVersion gate) with the credentials of the kubeconfig and
prints, per object in apply order then prune order:

- ``Kind/namespace/name created`` (with a note when it cannot be validated before its Namespace or
  CRD exists);
- ``Kind/namespace/name configured`` and a unified diff of the live object and the dry-run result
  (server noise removed, Secret values masked);
- ``Kind/namespace/name would be recreated (...)`` for an immutable-field change with ``force``;
- ``Kind/namespace/name deleted`` for what prune would remove;
- ``unchanged`` and ``skipped`` objects only with ``--verbose``.

Exit status as ``kubectl diff``: 0 nothing would change, 1 something would, 2 an error (usage, the
pipeline, or any object's dry-run; what could be computed is still printed). Progress and errors go
to stderr, the diff to stdout; ``--output json`` prints one JSON document instead. Both give the plan's
id and counts (what ``approve`` would approve, ``reconcile/gate/plan.py``) and, when the controller holds
its plan (``approval: manual``, a closed sync window), the condition that says so: the diff is then the
pending plan.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

import aiohttp

from kustomize_controller.apply.changeset import Action
from kustomize_controller.apply.preview import RECREATED, PreviewChange
from kustomize_controller.apply.staging import parse_group_kind_set
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_config
from kustomize_controller.kube.errors import KubeError
from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity, WorkloadIdentityOptions
from kustomize_controller.reconcile.apply_options import ApplySettings
from kustomize_controller.reconcile.preview import Preview, PreviewError, PreviewOptions, preview_kustomization
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.settings import FeatureGates, FlagError

EXIT_SAME, EXIT_CHANGES, EXIT_ERROR = 0, 1, 2
_QUIET = (str(Action.UNCHANGED), str(Action.SKIPPED))


def configure(parser: argparse.ArgumentParser) -> None:
    configure_connection(parser)
    parser.add_argument("--path", default="", metavar="DIR",
                        help="a local directory used instead of the source artifact (the artifact root)")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format")


def configure_connection(parser: argparse.ArgumentParser) -> None:
    """The Kustomization, the cluster, and the controller's flags a preview needs (``diff``, ``approve``)."""
    parser.add_argument("name", metavar="NAME", help="the Kustomization")
    parser.add_argument("-n", "--namespace", default="flux-system", help="its namespace (default flux-system)")
    parser.add_argument("--verbose", action="store_true", help="also list unchanged and skipped objects")
    configure_preview_flags(parser)


def configure_preview_flags(parser: argparse.ArgumentParser) -> None:
    """The cluster and the controller's flags a preview needs (``diff``, ``approve``, ``ui``)."""
    parser.add_argument("--kubeconfig", default="", metavar="FILE", help="kubeconfig (default: KUBECONFIG, ~/.kube)")
    parser.add_argument("--no-remote-bases", action="store_true", help="refuse remote kustomize bases")
    parser.add_argument(
        "--feature-gates", action="append", default=[], metavar="GATES", help="Name=bool pairs, comma separated"
    )
    parser.add_argument("--kustomize-binary", default="", metavar="BIN", help="kustomize or kubectl binary")
    parser.add_argument("--sops-age-secret", default="", metavar="NAMESPACE/NAME",
                        help="the controller's --sops-age-secret, for Kustomizations that rely on it")
    parser.add_argument("--override-manager", action="append", default=[], metavar="MANAGER",
                        help="the controller's --override-manager (repeatable): its fields are taken over")
    parser.add_argument("--custom-apply-stage-kinds", default="", metavar="KINDS",
                        help="the controller's --custom-apply-stage-kinds")


def render_text(preview: Preview, *, verbose: bool) -> str:
    out: list[str] = []
    for change in preview.changes:
        if change.error:
            continue  # on stderr
        if change.action in _QUIET and not verbose:
            continue
        if change.action == RECREATED:
            out.append(f"{change.ref} would be recreated ({change.note})\n")
            continue
        note = f" ({change.note})" if change.note else ""
        out.append(f"{change.ref} {change.action}{note}\n")
        out.append(change.diff)
    return "".join(out)


def _change_json(change: PreviewChange) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "subject": str(change.ref),
        "apiVersion": change.api_version,
        "kind": change.ref.kind,
        "namespace": change.ref.namespace,
        "name": change.ref.name,
        "action": change.action,
    }
    for key in ("diff", "note", "error"):
        value = getattr(change, key)
        if value:
            doc[key] = value
    return doc


def render_json(preview: Preview, *, verbose: bool) -> str:
    objects = [c for c in preview.changes if verbose or c.error or c.action not in _QUIET]
    plan = preview.plan
    doc = {
        "kustomization": preview.subject,
        "revision": preview.revision,
        "changed": preview.changed,
        "plan": {"id": plan.id, "counts": plan.counts()},
        "waiting": preview.waiting,
        "objects": [_change_json(c) for c in objects],
        "errors": preview.errors,
    }
    return json.dumps(doc, indent=2) + "\n"


def say_plan(preview: Preview, err: TextIO) -> None:
    """The plan's id and counts, and why the controller holds its own plan, on stderr."""
    if preview.changed:
        print(f"► {preview.plan.describe()} for revision {preview.revision}", file=err)
    for message in preview.waiting:
        print(f"► the controller holds its plan: {message}", file=err)


def _age_secret(value: str) -> tuple[str, str] | None:
    if not value:
        return None
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name:
        raise PreviewError(f"--sops-age-secret {value!r}: expected NAMESPACE/NAME")
    return namespace, name


def preview_pipeline(command: BuilderCommand, *, clock: Clock, session: aiohttp.ClientSession) -> BuildPipeline:
    """The build pipeline of a preview: the builder ``command``, artifacts fetched with ``session``."""
    return BuildPipeline(
        builder=KustomizeBuilder(command=command, clock=clock),
        workspace=Workspace(),
        fetcher=ArtifactFetcher(session=session, clock=clock, retries=1, env=os.environ),
    )


def preview_options(args: argparse.Namespace, client: KubeClient, *, as_applied: bool) -> PreviewOptions:
    """The preview options the flags of ``configure_preview_flags`` describe, reading with ``client``."""
    gates = FeatureGates.parse(args.feature_gates)
    return PreviewOptions(
        local_root=Path(args.path) if getattr(args, "path", "") else None,
        as_applied=as_applied,
        no_remote_bases=args.no_remote_bases,
        strict_substitution=gates.enabled("StrictPostBuildSubstitutions"),
        sops_age_secret=_age_secret(args.sops_age_secret),
        # spec.decryption.serviceAccountName as the controller honours it: a TokenRequest with the
        # caller's credentials; without the gate it fails as the controller would
        workload_identity=WorkloadIdentity(client=client, cache=None, options=WorkloadIdentityOptions(
            object_level=gates.enabled("ObjectLevelWorkloadIdentity"), environ=dict(os.environ))),
        engine=ApplySettings(
            override_managers=tuple(args.override_manager),
            custom_stage_kinds=parse_group_kind_set(args.custom_apply_stage_kinds),
            migrate_api_version=gates.enabled("MigrateAPIVersion"),
        ),
    )


async def run_preview(
    args: argparse.Namespace,
    err: TextIO,
    *,
    as_applied: bool = False,
    first: Callable[[KubeClient], Awaitable[None]] | None = None,
    then: Callable[[KubeClient, Preview], Awaitable[None]] | None = None,
) -> Preview:
    """The preview the flags of ``configure_connection`` describe; ``first`` and ``then`` run before and after
    it with the same client."""
    FeatureGates.parse(args.feature_gates)  # a bad gate fails before anything is read
    clock = RealClock()
    config = await load_config(kubeconfig=args.kubeconfig or None)
    command = await detect_builder(clock=clock, kustomize_binary=args.kustomize_binary or None)

    def say(message: str) -> None:
        print(f"► {message}", file=err, flush=True)

    async with KubeClient(config=config) as client, aiohttp.ClientSession() as session:
        if first is not None:
            await first(client)
        pipeline = preview_pipeline(command, clock=clock, session=session)
        options = preview_options(args, client, as_applied=as_applied)
        preview = await preview_kustomization(client=client, pipeline=pipeline, clock=clock,
                                              namespace=args.namespace, name=args.name, options=options, progress=say)
        if then is not None:
            await then(client, preview)
        return preview


def main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        preview = asyncio.run(run_preview(args, err))
    except (PreviewError, KubeError, FlagError, OSError, ValueError) as exc:
        print("error: " + " ".join(str(exc).split()), file=err)
        return EXIT_ERROR
    render = render_json if args.output == "json" else render_text
    out.write(render(preview, verbose=args.verbose))
    if args.output != "json":
        say_plan(preview, err)
    for message in preview.errors:
        print(f"error: {message}", file=err)
    if preview.errors:
        return EXIT_ERROR
    return EXIT_CHANGES if preview.changed else EXIT_SAME
