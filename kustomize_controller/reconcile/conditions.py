"""Condition mechanics of fluxcd/pkg ``runtime/conditions``, as pure functions over a list.

Contract (what status readers — kstatus, ``kubectl wait``, dashboards — rely on):

- Setting a condition stamps ``observedGeneration`` with the object's generation and truncates the
  message to 32,768 characters (ending in ``...``).
- ``lastTransitionTime`` changes only when status, reason or message changes (UTC, whole seconds);
  re-setting the same state keeps it and only refreshes ``observedGeneration``.
- The list is kept sorted: Stalled, Reconciling, Ready first, then the others by observedGeneration
  (newest first), then by type name.
- ``mark_reconciling`` removes Stalled; ``mark_stalled`` removes Reconciling — an object is never
  both progressing and stalled.

The functions mutate the given list in place (it belongs to the status being built) and take the
current time explicitly, so they stay pure and testable.
"""

from __future__ import annotations

from datetime import datetime

from kustomize_controller.api.meta import Condition, ConditionStatus, ConditionType

MAX_MESSAGE_LENGTH = 32768
_TRIM_SUFFIX = "..."
_WEIGHTS: dict[str, int] = {ConditionType.STALLED: 0, ConditionType.RECONCILING: 1, ConditionType.READY: 2}


def trim_message(message: str, limit: int = MAX_MESSAGE_LENGTH) -> str:
    limit = max(limit, len(_TRIM_SUFFIX))
    if len(message) <= limit:
        return message
    return message[: limit - len(_TRIM_SUFFIX)] + _TRIM_SUFFIX


def _sort_key(condition: Condition) -> tuple[int, int, int, str]:
    weight = _WEIGHTS.get(condition.type)
    if weight is not None:
        return (0, weight, 0, "")
    return (1, 0, -(condition.observed_generation or 0), condition.type)


def get(conditions: list[Condition], type_: str) -> Condition | None:
    for condition in conditions:
        if condition.type == type_:
            return condition
    return None


def is_status(conditions: list[Condition], type_: str, status: ConditionStatus) -> bool:
    condition = get(conditions, type_)
    return condition is not None and condition.status == status


def is_true(conditions: list[Condition], type_: str) -> bool:
    return is_status(conditions, type_, ConditionStatus.TRUE)


def is_false(conditions: list[Condition], type_: str) -> bool:
    return is_status(conditions, type_, ConditionStatus.FALSE)


def reason(conditions: list[Condition], type_: str) -> str:
    condition = get(conditions, type_)
    return condition.reason if condition is not None else ""


def set_condition(
    conditions: list[Condition],
    *,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    generation: int,
    now: datetime,
) -> None:
    """Set one condition following the rules in the module docstring."""
    message = trim_message(message)
    transition = now.replace(microsecond=0)
    for index, existing in enumerate(conditions):
        if existing.type != type_:
            continue
        same_state = (
            existing.status == status and existing.reason == reason and existing.message == message
        )
        if same_state:
            if existing.observed_generation != generation:
                conditions[index] = existing.model_copy(update={"observed_generation": generation})
        else:
            conditions[index] = Condition(
                type=type_,
                status=status,
                observed_generation=generation,
                last_transition_time=transition,
                reason=reason,
                message=message,
            )
        break
    else:
        conditions.append(
            Condition(
                type=type_,
                status=status,
                observed_generation=generation,
                last_transition_time=transition,
                reason=reason,
                message=message,
            )
        )
    conditions.sort(key=_sort_key)


def delete(conditions: list[Condition], type_: str) -> None:
    conditions[:] = [c for c in conditions if c.type != type_]


def mark_true(
    conditions: list[Condition], type_: str, reason: str, message: str, *, generation: int, now: datetime
) -> None:
    set_condition(
        conditions, type_=type_, status=ConditionStatus.TRUE, reason=reason, message=message,
        generation=generation, now=now,
    )


def mark_false(
    conditions: list[Condition], type_: str, reason: str, message: str, *, generation: int, now: datetime
) -> None:
    set_condition(
        conditions, type_=type_, status=ConditionStatus.FALSE, reason=reason, message=message,
        generation=generation, now=now,
    )


def mark_unknown(
    conditions: list[Condition], type_: str, reason: str, message: str, *, generation: int, now: datetime
) -> None:
    set_condition(
        conditions, type_=type_, status=ConditionStatus.UNKNOWN, reason=reason, message=message,
        generation=generation, now=now,
    )


def mark_reconciling(
    conditions: list[Condition], reason: str, message: str, *, generation: int, now: datetime
) -> None:
    delete(conditions, ConditionType.STALLED)
    mark_true(conditions, ConditionType.RECONCILING, reason, message, generation=generation, now=now)


def mark_stalled(
    conditions: list[Condition], reason: str, message: str, *, generation: int, now: datetime
) -> None:
    delete(conditions, ConditionType.RECONCILING)
    mark_true(conditions, ConditionType.STALLED, reason, message, generation=generation, now=now)
