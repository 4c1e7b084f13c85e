"""Clean-up that must reach its end although the task running it is cancelled, once or again.

A worker thread cannot be cancelled: ``asyncio.to_thread`` work goes on after its awaiting task was
cancelled, and may create what the clean-up is there to remove (a view directory, an unpacked tree) or
hold what it must reap (a child process). ``run_to_end(cleanup)`` runs ``cleanup`` in its own task,
waits for it through every cancellation of the caller, then re-raises the first of those
cancellations, so nothing is left behind and no cancellation is lost. ``cleanup`` must be bounded by
its own timeouts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


async def run_to_end(cleanup: Coroutine[Any, Any, None]) -> None:
    """Await ``cleanup`` to its end, then re-raise a cancellation that arrived meanwhile."""
    task = asyncio.ensure_future(cleanup)
    cancelled = False
    while True:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            continue
        break
    if cancelled:
        raise asyncio.CancelledError


__all__ = ["run_to_end"]
