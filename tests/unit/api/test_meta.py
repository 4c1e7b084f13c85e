"""Shared vocabulary: the strings equal the reference, conditions and timestamps behave like metav1."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from kustomize_controller.api.base import validation_messages
from kustomize_controller.api.meta import (
    FIELD_MANAGER,
    FINALIZER,
    RECONCILE_REQUEST_ANNOTATION,
    STATUS_OWNER,
    Condition,
    ConditionStatus,
    ConditionType,
    Key,
    Reason,
    Snapshot,
    SsaPolicy,
    format_time,
)

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "kustomization-v1.md"


def _section(number: int) -> str:
    text = REFERENCE.read_text()
    start = text.index(f"\n## {number}. ")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_every_reason_of_the_reference_table_is_defined_and_nothing_else() -> None:
    table = [line for line in _section(3).splitlines() if line.startswith("| `")]
    reasons = {re.match(r"\| `([A-Za-z]+)`", line).group(1) for line in table}  # type: ignore[union-attr]
    assert reasons == {r.value for r in Reason}


def test_condition_types() -> None:
    assert [t.value for t in ConditionType] == ["Ready", "Reconciling", "Stalled", "Healthy"]
    assert [s.value for s in ConditionStatus] == ["True", "False", "Unknown"]


def test_every_key_of_the_reference_is_defined() -> None:
    keys = set(re.findall(r"`((?:[a-z0-9.-]+\.)+[a-z]+/[A-Za-z-]+)", _section(4)))
    ours = {value for name, value in vars(Key).items() if name.isupper() and isinstance(value, str)}
    ours |= {v for name, value in vars(Key).items() if name.startswith("CLEANUP") for v in value}
    ours |= {RECONCILE_REQUEST_ANNOTATION}
    assert len(keys) >= 15
    # event.toolkit.fluxcd.io/* is a prefix, not a key.
    assert keys - ours == set()


def test_names() -> None:
    assert FINALIZER == "finalizers.fluxcd.io"
    assert FIELD_MANAGER == "kustomize-controller"
    assert STATUS_OWNER == "gotk-kustomize-controller"
    assert [p.value for p in SsaPolicy] == ["Override", "Merge", "IfNotPresent", "Ignore"]


def _condition(**overrides: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "type": "Ready",
        "status": "True",
        "observedGeneration": 4,
        "lastTransitionTime": "2024-05-01T10:00:00Z",
        "reason": "ReconciliationSucceeded",
        "message": "Applied revision: main@sha1:abc",
    }
    doc.update(overrides)
    return doc


def test_condition_round_trip() -> None:
    doc = _condition()
    condition = Condition.model_validate(doc)
    assert condition.last_transition_time == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert condition.model_dump(by_alias=True, exclude_none=True) == doc


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("type", "not a type!", "must match"),
        ("type", "x" * 317, "at most 316"),
        ("reason", "", "at least 1"),
        ("reason", "has space", "must match"),
        ("reason", "R" * 1025, "at most 1024"),
        ("message", "m" * 32769, "at most 32768"),
        ("status", "true", "unsupported value"),
        ("observedGeneration", -1, "greater than or equal to 0"),
        ("lastTransitionTime", "2024-05-01T10:00:00", "timezone"),
        ("lastTransitionTime", 1700000000, "RFC 3339"),
    ],
)
def test_condition_validation(field: str, value: object, fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        Condition.model_validate(_condition(**{field: value}))
    (line,) = validation_messages(err.value, prefix=("status", "conditions", 0))
    assert line.startswith(f"status.conditions[0].{field}: ")
    assert fragment in line


def test_time_is_written_in_utc_whole_seconds() -> None:
    local = datetime(2024, 5, 1, 12, 0, 30, 999_999, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(local) == "2024-05-01T10:00:30Z"
    condition = Condition.model_validate(_condition(lastTransitionTime="2024-05-01T12:00:00.5+02:00"))
    assert condition.model_dump(by_alias=True)["lastTransitionTime"] == "2024-05-01T10:00:00Z"


def test_snapshot_round_trip() -> None:
    doc = {
        "digest": "sha256:2f8c",
        "firstReconciled": "2024-05-01T10:00:00Z",
        "lastReconciled": "2024-05-01T11:00:00Z",
        "lastReconciledDuration": "2.5s",
        "lastReconciledStatus": "ReconciliationSucceeded",
        "totalReconciliations": 7,
        "metadata": {"revision": "main@sha1:abc", "originRevision": "v1.0.0"},
    }
    assert Snapshot.model_validate(doc).model_dump(by_alias=True, exclude_none=True) == doc
