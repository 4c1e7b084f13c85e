"""Stepping the event loop in unit tests without the real clock.

Unit tests run on in-memory fakes (no sockets, no threads) and a ``FakeClock``: what the code does next
depends only on how many times the loop turns, never on how long a turn takes. So waiting is counted
in loop turns (``asyncio.sleep(0)``), not seconds: a machine slowed down by other processes takes the
same steps, only slower, where ``asyncio.sleep(0.01)`` followed by an assertion races the code it
waits for. The bound on turns only turns a hang into a failure; it is never a timing assertion.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

MAX_TURNS = 10_000
T = TypeVar("T")


async def until(check: Callable[[], object], *, what: str = "", turns: int = MAX_TURNS) -> None:
    """Turn the loop until ``check()`` is true; fail after ``turns`` turns (it never will be)."""
    for _ in range(turns):
        if check():
            return
        await asyncio.sleep(0)
    if check():
        return
    raise AssertionError(f"not reached after {turns} loop turns: {what or check}")


async def settle(turns: int = 200) -> None:
    """Turn the loop ``turns`` times: everything that can run without time moving has run (use it before
    asserting that something has *not* happened)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def complete(aw: Awaitable[T], *, what: str = "", turns: int = MAX_TURNS) -> T:
    """The result of ``aw``, which must finish within ``turns`` loop turns (without time moving)."""
    task = asyncio.ensure_future(aw)
    try:
        await until(task.done, what=what or "awaited task finished", turns=turns)
    finally:
        if not task.done():
            task.cancel()
    return task.result()
