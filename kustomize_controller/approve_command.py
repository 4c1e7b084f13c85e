"""``kustomize-controller approve``: show a Kustomization's plan as ``diff`` does, and approve it.

``kustomize-controller approve NAME [-n NAMESPACE] [--kubeconfig FILE] [--yes] [--verbose]`` and the
controller flags ``diff`` takes (``--override-manager``, ``--feature-gates``, ``--sops-age-secret``, …)
runs the same preview as ``diff`` (``reconcile/preview.py``, writing nothing) planned as the apply plans
(``as_applied``: drift that ``drift-detection: warn`` keeps is no change), prints it, its plan id and
counts, and why the controller holds its own plan; then, once confirmed (a ``y`` on stdin, or ``--yes``
for scripts), sets ``kustomize.toolkit.fluxcd.io/approved-plan: <id>`` on the Kustomization (a merge
patch of that one annotation). The annotation enqueues the Kustomization; the controller applies only
if the plan it computes has that id — if the cluster or the source moved in between, the new plan waits
for its own approval and the ``Approved`` condition says so. Approving is therefore safe whatever
happens after the preview; what is approved is exactly what was shown.

When the controller's pending plan (the ``Approved`` condition) names another id than the preview's, both
are printed: the controller has not planned the current state yet (it will on the annotation's event).

Exit status: 0 approved (or nothing to approve), 1 not confirmed, 2 an error (the Kustomization does
not have ``approval: manual`` — checked before anything is fetched or built —, the preview failed, or
any object's dry-run failed: a plan that cannot be computed is not approved).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from kustomize_controller.api.changes import (
    APPROVAL_ANNOTATION,
    APPROVED_CONDITION,
    APPROVED_PLAN_ANNOTATION,
    ApprovalMode,
    InvalidApprovalModeError,
    approval_mode,
)
from kustomize_controller.api.kustomization import (
    API_VERSION,
    KIND,
    InvalidKustomizationError,
    Kustomization,
    parse_kustomization,
)
from kustomize_controller.diff_command import EXIT_ERROR, configure_connection, render_text, run_preview, say_plan
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import KubeError
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.gate.plan import plan_id_in
from kustomize_controller.reconcile.preview import Preview, PreviewError
from kustomize_controller.settings import FlagError

EXIT_APPROVED, EXIT_DECLINED = 0, 1


class ApproveError(Exception):
    """The plan cannot be approved (the message says why)."""


def configure(parser: argparse.ArgumentParser) -> None:
    configure_connection(parser)
    parser.add_argument("--yes", "-y", action="store_true", help="approve without asking (for scripts)")


def _confirm(question: str, err: TextIO, stdin: TextIO) -> bool:
    print(f"{question} [y/N] ", end="", file=err, flush=True)
    answer = stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def main(args: argparse.Namespace, out: TextIO, err: TextIO, *, stdin: TextIO | None = None) -> int:
    outcome: list[int] = []
    subject = f"{KIND}/{args.namespace}/{args.name}"
    seen: list[Kustomization] = []

    async def check(client: KubeClient) -> None:
        """Before any build: the Kustomization waits for approvals."""
        try:
            ks = parse_kustomization(await client.get(API_VERSION, KIND, args.name, args.namespace))
            if approval_mode(ks.metadata.annotations) is not ApprovalMode.MANUAL:
                raise ApproveError(f"{subject} does not wait for approvals (annotation {APPROVAL_ANNOTATION}: manual)")
        except (InvalidApprovalModeError, InvalidKustomizationError) as exc:
            raise ApproveError(f"{subject}: {exc}") from exc
        seen.append(ks)

    async def approve(client: KubeClient, preview: Preview) -> None:
        out.write(render_text(preview, verbose=args.verbose))
        say_plan(preview, err)
        if preview.errors:
            raise ApproveError(f"{subject}: the plan cannot be computed: " + "; ".join(preview.errors))
        plan = preview.plan
        if plan.empty:
            print(f"{subject}: nothing to approve, revision {preview.revision} is applied", file=out)
            outcome.append(EXIT_APPROVED)
            return
        pending = conditions.get(seen[0].status.conditions, APPROVED_CONDITION)
        pending_id = plan_id_in(pending.message) if pending is not None and pending.status == "False" else ""
        if pending_id and pending_id != plan.id:
            print(f"► the controller's pending plan is {pending_id}; the cluster or the source changed since it "
                  f"planned, this approves {plan.id} as shown", file=err)
        if not args.yes and not _confirm(f"Approve {plan.describe()} of {subject}?", err, stdin or sys.stdin):
            print("not approved", file=err)
            outcome.append(EXIT_DECLINED)
            return
        await client.patch(API_VERSION, KIND, args.name, args.namespace,
                           {"metadata": {"annotations": {APPROVED_PLAN_ANNOTATION: plan.id}}}, patch_type="merge")
        print(f"{subject}: approved {plan.describe()} for revision {preview.revision}", file=out)
        outcome.append(EXIT_APPROVED)

    try:
        asyncio.run(run_preview(args, err, as_applied=True, first=check, then=approve))
    except (ApproveError, PreviewError, KubeError, FlagError, OSError, ValueError) as exc:
        print("error: " + " ".join(str(exc).split()), file=err)
        return EXIT_ERROR
    return outcome[0] if outcome else EXIT_ERROR
