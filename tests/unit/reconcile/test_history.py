from datetime import UTC, datetime, timedelta

from kustomize_controller.api.meta import Snapshot
from kustomize_controller.reconcile.history import upsert

T = datetime(2026, 5, 1, 12, 0, 0, 900_000, tzinfo=UTC)


def add(history: list[Snapshot], digest: str, status: str = "ReconciliationSucceeded", minutes: int = 0) -> None:
    upsert(history, digest=digest, now=T + timedelta(minutes=minutes), duration=1.5,
           status=status, metadata={"revision": f"rev-{digest}"})


def test_new_entries_go_first_and_list_is_capped_at_five() -> None:
    history: list[Snapshot] = []
    for i in range(7):
        add(history, f"sha256:{i}", minutes=i)
    assert [h.digest for h in history] == [f"sha256:{i}" for i in (6, 5, 4, 3, 2)]
    first = history[0]
    assert first.total_reconciliations == 1
    assert first.first_reconciled == first.last_reconciled == (T + timedelta(minutes=6)).replace(microsecond=0)
    assert first.last_reconciled_duration == "1.5s"
    dumped = first.model_dump(by_alias=True)
    assert dumped["lastReconciledStatus"] == "ReconciliationSucceeded"
    assert dumped["metadata"] == {"revision": "rev-sha256:6"}


def test_same_digest_and_status_is_bumped_and_moved_to_front() -> None:
    history: list[Snapshot] = []
    add(history, "sha256:a")
    add(history, "sha256:b", minutes=1)
    add(history, "sha256:a", minutes=2)
    assert [h.digest for h in history] == ["sha256:a", "sha256:b"]
    assert history[0].total_reconciliations == 2
    assert history[0].first_reconciled == T.replace(microsecond=0)
    assert history[0].last_reconciled == (T + timedelta(minutes=2)).replace(microsecond=0)


def test_same_digest_with_other_status_is_a_new_entry() -> None:
    history: list[Snapshot] = []
    add(history, "sha256:a")
    add(history, "sha256:a", status="HealthCheckFailed")
    assert [(h.digest, h.last_reconciled_status) for h in history] == [
        ("sha256:a", "HealthCheckFailed"), ("sha256:a", "ReconciliationSucceeded"),
    ]


def test_entries_are_never_changed_in_place_so_a_list_copy_is_a_snapshot() -> None:
    history: list[Snapshot] = []
    for i in range(5):
        add(history, f"sha256:{i}", minutes=i)
    snapshot = list(history)
    dumped = [h.model_dump() for h in snapshot]
    add(history, "sha256:2", minutes=10)  # bumps an existing entry
    add(history, "sha256:new", minutes=11)  # inserts, drops the oldest
    add(history, "sha256:new", status="HealthCheckFailed", minutes=12)
    assert [h.model_dump() for h in snapshot] == dumped
    assert history[2].digest == "sha256:2" and history[2].total_reconciliations == 2


def test_duration_is_recorded_to_the_nanosecond_as_go_prints_it() -> None:
    history: list[Snapshot] = []
    upsert(history, digest="sha256:a", now=T, duration=0.265691109, status="ReconciliationSucceeded", metadata={})
    assert history[0].last_reconciled_duration == "265.691109ms"
