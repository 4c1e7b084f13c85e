"""Opening a file in a worker thread without leaking it to a cancelled caller.

Contract:
- ``open_off_loop(path, mode)`` opens ``path`` in binary ``mode`` (``"rb"``, ``"wb"``, …) in a worker
  thread and returns the open file; the caller owns it and closes it (``with``).
- A worker thread cannot be cancelled: it opens the file whatever happens to the awaiting task. A
  caller cancelled meanwhile re-raises the cancellation at once and the file the thread opened is
  closed as soon as the thread hands it back, instead of being left to the garbage collector (whose
  ``ResourceWarning`` fails a later, unrelated test at random).
- Errors of ``open`` (``OSError``) reach the caller unchanged; a cancelled caller drops them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import BinaryIO, cast


def _open_binary(path: Path, mode: str) -> BinaryIO:
    return cast(BinaryIO, open(path, mode))  # the caller owns the file


async def open_off_loop(path: Path, mode: str) -> BinaryIO:
    """``path`` opened in binary ``mode`` in a worker thread; closed again if the caller is cancelled."""
    if "b" not in mode:
        raise ValueError(f"open_off_loop opens binary files only, not mode {mode!r}")
    opening = asyncio.ensure_future(asyncio.to_thread(_open_binary, path, mode))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_opened)
        raise


def _close_opened(opening: asyncio.Future[BinaryIO]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


__all__ = ["open_off_loop"]
