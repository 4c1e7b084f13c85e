"""What a page may do, each one write as the user — so the API server's RBAC decides, and a refusal reaches
the page as the ``ForbiddenError`` it is.

- ``reconcile_now``: a merge patch of ``reconcile.fluxcd.io/requestedAt`` to a new token, as ``flux reconcile
  kustomization`` writes it (refused, as flux refuses, when the Kustomization is suspended).
- ``suspend`` / ``resume``: a merge patch of ``spec.suspend`` true / false, as ``flux suspend``/``flux resume``
  (resume writes no annotation: the generation change makes the controller reconcile).
- ``approve_plan``: approves a plan id through the one function ``kustomize-controller approve`` uses
  (``approve_command.approve_plan``): ``approved-plan`` set to exactly that id and a new ``approved-at`` token,
  one merge patch — an approval the controller applies once, and only to a plan with that id, so approving
  what a page showed is safe whatever happened since (docs/change-management.md).
  ``check_approvable`` first refuses a Kustomization that does not wait for approvals, as the command does.
"""

from __future__ import annotations

import re
from typing import Any

from kustomize_controller import approve_command
from kustomize_controller.api.changes import (
    APPROVAL_ANNOTATION,
    ApprovalMode,
    InvalidApprovalModeError,
    approval_mode,
)
from kustomize_controller.api.kustomization import API_VERSION, KIND
from kustomize_controller.api.meta import RECONCILE_REQUEST_ANNOTATION
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.runtime.clock import Clock

PLAN_ID = re.compile(r"^[0-9a-f]{12}$")


class ActionError(Exception):
    """The action cannot be done (the message says why); nothing was written."""


def _subject(namespace: str, name: str) -> str:
    return f"{KIND}/{namespace}/{name}"


async def _patch(client: KubeClient, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    return await client.patch(API_VERSION, KIND, name, namespace, body, patch_type="merge")


async def reconcile_now(client: KubeClient, *, namespace: str, name: str, clock: Clock) -> str:
    """Request a reconcile; returns the token written."""
    ks = await client.get(API_VERSION, KIND, name, namespace)
    if (ks.get("spec") or {}).get("suspend") is True:
        raise ActionError(f"{_subject(namespace, name)}: resource is suspended")
    token = clock.now().isoformat()
    await _patch(client, namespace, name, {"metadata": {"annotations": {RECONCILE_REQUEST_ANNOTATION: token}}})
    return token


async def suspend(client: KubeClient, *, namespace: str, name: str) -> None:
    await _patch(client, namespace, name, {"spec": {"suspend": True}})


async def resume(client: KubeClient, *, namespace: str, name: str) -> None:
    await _patch(client, namespace, name, {"spec": {"suspend": False}})


async def check_approvable(client: KubeClient, *, namespace: str, name: str) -> dict[str, Any]:
    """The Kustomization, when it waits for approvals (``approval: manual``); ``ActionError`` otherwise."""
    ks = await client.get(API_VERSION, KIND, name, namespace)
    try:
        mode = approval_mode((ks.get("metadata") or {}).get("annotations"))
    except InvalidApprovalModeError as err:
        raise ActionError(f"{_subject(namespace, name)}: {err}") from err
    if mode is not ApprovalMode.MANUAL:
        raise ActionError(f"{_subject(namespace, name)} does not wait for approvals "
                          f"(annotation {APPROVAL_ANNOTATION}: manual)")
    return ks


async def approve_plan(client: KubeClient, *, namespace: str, name: str, plan_id: str, clock: Clock) -> str:
    """Approve exactly ``plan_id`` (module contract) with the write ``kustomize-controller approve`` makes: a new
    one-shot approval (``approved-plan`` and ``approved-at`` in one merge patch). Returns the token written."""
    if not PLAN_ID.match(plan_id):
        raise ActionError(f"{_subject(namespace, name)}: {plan_id!r} is not a plan id (12 hex digits)")
    return await approve_command.approve_plan(client, namespace=namespace, name=name, plan_id=plan_id, clock=clock)
