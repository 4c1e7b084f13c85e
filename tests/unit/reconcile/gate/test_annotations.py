"""The approval annotation: auto by default, manual opt-in, anything else an error (never a fallback)."""

from __future__ import annotations

import pytest

from kustomize_controller.api.changes import (
    APPROVAL_ANNOTATION,
    APPROVED_PLAN_ANNOTATION,
    ApprovalMode,
    InvalidApprovalModeError,
    approval_mode,
    approved_plan,
)


@pytest.mark.parametrize(("value", "mode"), [(None, ApprovalMode.AUTO), ("auto", ApprovalMode.AUTO),
                                             (" Manual ", ApprovalMode.MANUAL), ("manual", ApprovalMode.MANUAL)])
def test_modes(value: str | None, mode: ApprovalMode) -> None:
    annotations = {} if value is None else {APPROVAL_ANNOTATION: value}
    assert approval_mode(annotations) is mode


def test_a_typo_is_an_error() -> None:
    with pytest.raises(InvalidApprovalModeError, match="expected 'auto' or 'manual'"):
        approval_mode({APPROVAL_ANNOTATION: "manaul"})


def test_approved_plan() -> None:
    assert approved_plan({APPROVED_PLAN_ANNOTATION: " 3f2a9c1b7d04 "}) == "3f2a9c1b7d04"
    assert approved_plan(None) == ""
