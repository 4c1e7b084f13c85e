"""``kustomize-controller approve``: show a Kustomization's plan as ``diff`` does, and approve it.

``kustomize-controller approve NAME [-n NAMESPACE] [--kubeconfig FILE] [--yes] [--verbose]`` and the
controller flags ``diff`` takes (``--override-manager``, ``--feature-gates``, ``--sops-age-secret``, …)
runs the same preview as ``diff`` (``reconcile/preview.py``, writing nothing) planned as the apply plans
(``as_applied``: drift that ``drift-detection: warn`` keeps is no change), prints it, its plan id and
counts, and why the controller holds its own plan; then, once confirmed (a ``y`` on stdin, or ``--yes``
for scripts), approves it with ``approve_plan``: ``kustomize.toolkit.fluxcd.io/approved-plan: <id>`` and
``kustomize.toolkit.fluxcd.io/approved-at: <now>`` in one merge patch — a new approval, even of a plan
approved before. The annotations enqueue the Kustomization; the controller applies only if the plan it
computes has that id — if the cluster or the source moved in between, the new plan waits for its own
approval and the ``Approved`` condition says so — and only once: the apply uses the approval up, and a
later plan with the same id (drift back, a revert) waits for another ``approve``. Approving is therefore
safe whatever happens after the preview; what is approved is exactly what was shown, one time.

``approve_plan(client, namespace=, name=, plan_id=, clock=)`` is the one place that approves a plan as a
user (the web UI calls it too); it checks nothing else.

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
from datetime import UTC, datetime
from typing import TextIO

from kustomize_controller.api.changes import (
    APPROVAL_ANNOTATION,
    APPROVED_AT_ANNOTATION,
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
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.settings import FlagError

EXIT_APPROVED, EXIT_DECLINED = 0, 1


class ApproveError(Exception):
    """The plan cannot be approved (the message says why)."""


def rfc3339_nano(moment: datetime) -> str:
    """``moment`` in UTC as Go's ``time.RFC3339Nano`` writes it (fraction without trailing zeros)."""
    moment = moment.astimezone(UTC)
    fraction = f"{moment.microsecond * 1000:09d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


async def approve_plan(client: KubeClient, *, namespace: str, name: str, plan_id: str, clock: Clock) -> str:
    """Approve plan ``plan_id`` of the Kustomization ``namespace/name`` as ``client``'s user: one merge patch
    of ``approved-plan: <plan_id>`` and ``approved-at: <now, RFC3339Nano UTC>``, a new approval that the
    controller applies once (docs/change-management.md). Returns the ``approved-at`` token written; raises
    ``KubeError`` (e.g. ``NotFoundError``, ``ForbiddenError``) when the patch fails. Checks nothing else:
    the caller shows the plan and knows the Kustomization waits for approvals."""
    token = rfc3339_nano(clock.now())
    annotations = {APPROVED_PLAN_ANNOTATION: plan_id, APPROVED_AT_ANNOTATION: token}
    await client.patch(API_VERSION, KIND, name, namespace, {"metadata": {"annotations": annotations}},
                       patch_type="merge")
    return token


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
        await approve_plan(client, namespace=args.namespace, name=args.name, plan_id=plan.id, clock=RealClock())
        print(f"{subject}: approved {plan.describe()} for revision {preview.revision} (applied once; a later "
              f"plan with this id needs another approval)", file=out)
        outcome.append(EXIT_APPROVED)

    try:
        asyncio.run(run_preview(args, err, as_applied=True, first=check, then=approve))
    except (ApproveError, PreviewError, KubeError, FlagError, OSError, ValueError) as exc:
        print("error: " + " ".join(str(exc).split()), file=err)
        return EXIT_ERROR
    return outcome[0] if outcome else EXIT_ERROR
