"""A test that leaves a child process behind fails itself, at its own teardown.

A child outliving its test used to surface as a ``ResourceWarning`` (``subprocess … is still running``,
unclosed pipe transports) in whichever later test on the same worker happened to garbage-collect it.
Here the test process's children are listed when a test's setup starts and again after its teardown
(every fixture finalised); one that is new and still there after a short bounded wait (a reaper thread
may be finishing) fails that test, naming each child, and is killed so that later tests start clean.
Listing reads ``/proc/self/task/*/children`` (a few small files), else scans ``/proc``: cheap enough for
every test.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.runtime import child as child_mod

GRACE_SECONDS = 2.0
_BEFORE = pytest.StashKey[set[int]]()


def children() -> set[int]:
    """Pids whose parent is this process (zombies included: an unreaped child is a leak too)."""
    me = os.getpid()
    files = list(Path(f"/proc/{me}/task").glob("*/children"))
    if files:
        found: set[int] = set()
        for f in files:
            with contextlib.suppress(OSError):
                found.update(int(pid) for pid in f.read_text().split())
        return found
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                # the command name may hold spaces and parentheses: the fields follow the last ')'
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    found.add(int(entry.name))
    return found


def describe(pid: int) -> str:
    try:
        argv = (Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"))[:-1]
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return f"{pid} (gone)"
    command = " ".join(a.decode(errors="replace") for a in argv) or "?"
    return f"{pid} [{'zombie' if state == 'Z' else state}] {command[:200]}"


def leaked_since(before: set[int], *, grace: float = GRACE_SECONDS) -> set[int]:
    deadline = time.monotonic() + grace
    while True:
        new = children() - before
        if not new or time.monotonic() >= deadline:
            return new
        time.sleep(0.02)


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for whoever adopted it, not for us)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_nothing_left(before: set[int]) -> None:
    """No child beyond ``before``, no other task pending on the running loop, and nothing that a full
    garbage collection finalises with a complaint (an unclosed transport's or a Popen's ResourceWarning)."""
    complaints: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: complaints.append(f"{u.exc_type.__name__}: {u.exc_value}")
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert complaints == []
    assert [describe(pid) for pid in children() - before] == []
    with contextlib.suppress(RuntimeError):  # no running loop: no tasks to check
        current = asyncio.current_task()
        assert [t for t in asyncio.all_tasks() if t is not current and not t.done()] == []


def count_events(monkeypatch: pytest.MonkeyPatch, on_event: Callable[[int], None]) -> list[int]:
    """Call ``on_event(n)`` after :func:`run_child` handles its n-th I/O event (a read, an end of pipe,
    a write, the exit), so that a test can cut a run at every state it passes through. Returns the
    counter, for the test to reset between runs."""
    seen = [0]
    for name in ("_read", "_write", "_exited", "_poll_exit"):
        original = getattr(child_mod._Child, name)

        def handler(self: Any, *args: Any, _original: Any = original) -> None:
            _original(self, *args)
            seen[0] += 1
            on_event(seen[0])

        monkeypatch.setattr(child_mod._Child, name, handler)
    return seen


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_BEFORE] = children()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    result = yield
    leaked = leaked_since(item.stash.get(_BEFORE, set()))
    if leaked:
        lines = [describe(pid) for pid in sorted(leaked)]
        for pid in leaked:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"{item.nodeid} left {len(leaked)} child process(es) running: " + "; ".join(lines), pytrace=False)
    return result
