"""``status.history``: the last five distinct (build digest, outcome) pairs (``meta.History.Upsert``).

Contract:
- An entry is identified by (digest, status). Upserting an existing pair bumps its counter, its
  ``lastReconciled`` time and duration, replaces its metadata and moves it to the front.
- A new pair is inserted at the front; the list is truncated to 5 entries.
- Only reconciles whose build succeeded have a digest, so only those are recorded.
- Entries are never changed in place (an upsert replaces one by an updated copy): a shallow copy
  of the list is a snapshot of the history, which the reconciler keeps to undo an attempt's entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from kustomize_controller.api.duration import format_seconds
from kustomize_controller.api.meta import Snapshot

MAX_SIZE = 5


def upsert(
    history: list[Snapshot],
    *,
    digest: str,
    now: datetime,
    duration: float,  # seconds, from a monotonic clock
    status: str,
    metadata: Mapping[str, str],
) -> None:
    timestamp = now.replace(microsecond=0)
    for index, entry in enumerate(history):
        if entry.digest == digest and entry.last_reconciled_status == status:
            updated = entry.model_copy(
                update={
                    "last_reconciled": timestamp,
                    "last_reconciled_duration": format_seconds(duration),
                    "total_reconciliations": entry.total_reconciliations + 1,
                    "metadata": dict(metadata),
                }
            )
            del history[index]
            history.insert(0, updated)
            break
    else:
        history.insert(
            0,
            Snapshot(
                digest=digest,
                first_reconciled=timestamp,
                last_reconciled=timestamp,
                last_reconciled_duration=format_seconds(duration),
                last_reconciled_status=status,
                total_reconciliations=1,
                metadata=dict(metadata),
            ),
        )
    del history[MAX_SIZE:]
