"""Drift detection mode of a Kustomization: the annotation, its values, the condition it reports.

``kustomize.toolkit.fluxcd.io/drift-detection`` on the Kustomization (the CRD schema stays upstream's,
so the switch is an annotation): ``enabled`` (the default, upstream's behaviour: drift is corrected)
or ``warn`` (drift is reported, not corrected; see docs/drift.md). Values are matched exactly after
trimming blanks, case-insensitively; anything else is an error the reconciler reports, never a silent
fallback (falling back to ``enabled`` would revert what a user asked to keep).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from kustomize_controller.api.annotations import annotation_choice

DRIFT_DETECTION_ANNOTATION: Final = "kustomize.toolkit.fluxcd.io/drift-detection"
#: Condition type reported in ``warn`` mode (removed in ``enabled`` mode).
DRIFTED_CONDITION: Final = "Drifted"
#: Reasons of the ``Drifted`` condition and of the ``DriftDetected`` Warning event.
DRIFT_DETECTED_REASON: Final = "DriftDetected"
NO_DRIFT_REASON: Final = "NoDrift"


class DriftMode(StrEnum):
    ENABLED = "enabled"
    WARN = "warn"


class InvalidDriftModeError(ValueError):
    """The annotation holds a value that is neither ``enabled`` nor ``warn``."""


def drift_mode(annotations: Mapping[str, str] | None) -> DriftMode:
    """The mode the annotations select (``enabled`` when the annotation is absent)."""
    return annotation_choice(annotations, DRIFT_DETECTION_ANNOTATION, DriftMode, default=DriftMode.ENABLED,
                             error=InvalidDriftModeError)
