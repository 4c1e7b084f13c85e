"""Change management on a Kustomization: the annotations, conditions and reasons of its two gates.

The ``v1`` CRD schema stays upstream's, so both gates are switched on by annotations (docs/change-management.md):

- ``kustomize.toolkit.fluxcd.io/approval``: ``manual`` holds every change until a person approves its
  plan; ``auto`` (or absent) is upstream's behaviour. Values are matched after trimming blanks,
  case-insensitively; anything else is an error the reconciler reports, never a silent fallback
  (falling back to ``auto`` would apply what a user asked to review).
- ``kustomize.toolkit.fluxcd.io/approved-plan``: the id of the plan a person approved.
- ``kustomize.toolkit.fluxcd.io/approved-at``: an opaque token set with it (``kustomize-controller approve``
  writes the current time, RFC3339Nano UTC): the pair is one approval, applied once. Setting the token
  anew approves the same plan again; never echoed into a status (``reconcile/gate/approval.py``).
- ``kustomize.toolkit.fluxcd.io/sync-windows``: a YAML or JSON list of sync windows (Argo CD's model).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from kustomize_controller.api.annotations import annotation_choice

APPROVAL_ANNOTATION: Final = "kustomize.toolkit.fluxcd.io/approval"
APPROVED_PLAN_ANNOTATION: Final = "kustomize.toolkit.fluxcd.io/approved-plan"
APPROVED_AT_ANNOTATION: Final = "kustomize.toolkit.fluxcd.io/approved-at"
SYNC_WINDOWS_ANNOTATION: Final = "kustomize.toolkit.fluxcd.io/sync-windows"
#: every annotation whose change enqueues the Kustomization (they stand in for spec fields)
GATE_ANNOTATIONS: Final = (APPROVAL_ANNOTATION, APPROVED_PLAN_ANNOTATION, APPROVED_AT_ANNOTATION,
                            SYNC_WINDOWS_ANNOTATION)

#: condition types (removed while their gate is off)
APPROVED_CONDITION: Final = "Approved"
SYNC_ALLOWED_CONDITION: Final = "SyncAllowed"

#: reasons of ``Approved`` (and of the ``ApprovalRequired`` event)
APPROVAL_REQUIRED_REASON: Final = "ApprovalRequired"
PLAN_APPROVED_REASON: Final = "PlanApproved"
NO_CHANGES_REASON: Final = "NoChanges"
#: reasons of ``SyncAllowed`` (and of its events)
SYNC_WINDOW_OPEN_REASON: Final = "SyncWindowOpen"
SYNC_WINDOW_CLOSED_REASON: Final = "SyncWindowClosed"
INVALID_SYNC_WINDOW_REASON: Final = "InvalidSyncWindow"


class ApprovalMode(StrEnum):
    AUTO = "auto"
    MANUAL = "manual"


class InvalidApprovalModeError(ValueError):
    """The approval annotation holds a value that is neither ``auto`` nor ``manual``."""


def approval_mode(annotations: Mapping[str, str] | None) -> ApprovalMode:
    """The mode the annotations select (``auto`` when the annotation is absent)."""
    return annotation_choice(annotations, APPROVAL_ANNOTATION, ApprovalMode, default=ApprovalMode.AUTO,
                             error=InvalidApprovalModeError)


def approved_plan(annotations: Mapping[str, str] | None) -> str:
    """The plan id a person approved (``""`` when none)."""
    return str((annotations or {}).get(APPROVED_PLAN_ANNOTATION) or "").strip()


def approved_at(annotations: Mapping[str, str] | None) -> str:
    """The token set with the approved plan (``""`` when none): opaque, compared, never shown."""
    return str((annotations or {}).get(APPROVED_AT_ANNOTATION) or "")
