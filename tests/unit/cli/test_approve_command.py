"""``approve_plan``: the one write that approves a plan as a user — both annotations, one merge patch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from kustomize_controller.approve_command import approve_plan, rfc3339_nano
from kustomize_controller.runtime.clock import FakeClock


class Patches:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((args, kwargs))
        return {}


def test_rfc3339_nano_is_gos_format_in_utc() -> None:
    assert rfc3339_nano(datetime(2026, 6, 1, 10, 0, 0, 123450, tzinfo=UTC)) == "2026-06-01T10:00:00.12345Z"
    assert rfc3339_nano(datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)) == "2026-06-01T10:00:00Z"
    east = timezone(timedelta(hours=2))
    assert rfc3339_nano(datetime(2026, 6, 1, 12, 0, 0, 1, tzinfo=east)) == "2026-06-01T10:00:00.000001Z"


async def test_approve_plan_writes_both_annotations_in_one_merge_patch() -> None:
    client = Patches()
    clock = FakeClock(start=datetime(2026, 6, 1, 10, 0, 0, 500000, tzinfo=UTC))
    token = await approve_plan(client, namespace="apps", name="web", plan_id="3f2a9c1b7d04", clock=clock)  # type: ignore[arg-type]
    assert token == "2026-06-01T10:00:00.5Z"
    (args, kwargs), = client.calls
    assert args == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "web", "apps", {"metadata": {"annotations": {
        "kustomize.toolkit.fluxcd.io/approved-plan": "3f2a9c1b7d04",
        "kustomize.toolkit.fluxcd.io/approved-at": "2026-06-01T10:00:00.5Z"}}})
    assert kwargs == {"patch_type": "merge"}
    await clock.advance(1)
    assert await approve_plan(client, namespace="apps", name="web", plan_id="3f2a9c1b7d04", clock=clock) != token  # type: ignore[arg-type]
