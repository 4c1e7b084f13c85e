"""``run_child``: results and limits, and no child, pipe or task left behind on any way out.

The cancellation tests count the runner's own I/O events (a read, the end of a pipe, the exit) on a
script whose stages we control, and cancel the run right after the n-th one, for every n: so every
state the runner can be in when its caller goes away is tried, deterministically, with no timing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.runtime import child as child_mod
from kustomize_controller.runtime.child import ChildOutputExceeded, ChildResult, ChildTimedOut, run_child
from kustomize_controller.runtime.clock import FakeClock, RealClock
from tests.child_leaks import assert_nothing_left, children, count_events, running

ENV = {"PATH": "/usr/bin:/bin"}
# Each stage is a separate event for the runner: output, error output, the end of stdout while the
# process still runs, more error output, the exit.
STAGED = "echo out1; echo err1 >&2; sleep 0.02; echo out2; exec 1>&-; sleep 0.02; echo err2 >&2; exit 3"


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def gone(pid: int, *, within: float = 30.0) -> bool:
    """Whether ``pid`` stops running within a bound. The runner kills the group before it hands over its
    result, but a SIGKILL takes effect only when the kernel next runs its target, which a loaded machine
    may delay: a bounded wait for that, not a timer."""
    deadline = time.monotonic() + within
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def run(script: str, **kw: Any) -> ChildResult:
    opts: dict[str, Any] = {"clock": RealClock(), "time_limit": 60.0, "env": ENV, "max_output": 1 << 20, **kw}
    return await run_child(sh(script), **opts)


async def test_result_stdin_and_stderr_cap() -> None:
    res = await run("cat; echo oops >&2; exit 2", input=b"x" * 300_000, max_stderr=3)
    assert res == ChildResult(2, b"x" * 300_000, b"oop")


async def test_output_cap_and_timeout_kill_the_child() -> None:
    before = children()
    with pytest.raises(ChildOutputExceeded, match="output exceeds the limit of 1000 bytes"):
        await run("yes; sleep 60", max_output=1000)
    clock = FakeClock()
    task = asyncio.ensure_future(run("sleep 60", clock=clock, time_limit=30))
    while not clock.pending_sleepers:
        await asyncio.wait([task], timeout=0.01)
    await clock.advance(30)
    with pytest.raises(ChildTimedOut, match="timed out after 30s"):
        await task
    assert_nothing_left(before)


async def test_what_the_child_leaves_in_its_group_ends_with_it(tmp_path: Path) -> None:
    """A grandchild holding the pipes would otherwise keep the run waiting until its time limit."""
    pidfile = tmp_path / "grandchild"
    before = children()
    res = await run(f"sleep 60 & echo $! > {pidfile}; echo done")
    assert res.stdout == b"done\n"
    assert gone(int(pidfile.read_text()))
    assert_nothing_left(before)


async def test_a_missing_program_is_an_os_error() -> None:
    with pytest.raises(FileNotFoundError):
        await run_child(["/nonexistent/kustomize"], clock=RealClock(), time_limit=5, env=ENV, max_output=10)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
async def test_cancelled_after_every_event_nothing_is_left(
    monkeypatch: pytest.MonkeyPatch, pidfd: bool
) -> None:
    if not pidfd:
        monkeypatch.setattr(child_mod, "_pidfd", lambda pid: None)
    target: list[int] = [0]
    task: list[asyncio.Task[ChildResult]] = []
    seen = count_events(monkeypatch, lambda n: task[0].cancel() if n == target[0] else None)
    before = children()
    tried = 0
    for n in range(50):
        target[0], seen[0] = n, 0
        task[:] = [asyncio.ensure_future(run(STAGED, input=b"in\n"))]
        if n == 0:
            task[0].cancel()  # before it even started its child
        try:
            res = await task[0]
        except asyncio.CancelledError:
            tried += 1
            assert_nothing_left(before)
            continue
        assert (res.returncode, res.stdout, res.stderr) == (3, b"out1\nout2\n", b"err1\nerr2\n")
        break
    else:
        pytest.fail("the run never finished before its cancellation")
    assert tried >= 5  # spawn, out1/err1, out2, end of stdout, err2, exit: every stage was cut
    assert_nothing_left(before)


async def test_cancelled_again_while_cleaning_up() -> None:
    before = children()
    for delay in range(4):  # the second cancellation lands at successive points of the first's clean-up
        task = asyncio.ensure_future(run("echo started; exec sleep 60"))
        await asyncio.sleep(0.05)
        task.cancel()
        for _ in range(delay):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert_nothing_left(before)


def test_the_loop_going_away_mid_run_leaves_nothing() -> None:
    """A shutdown that closes the loop: with every task cancelled (``asyncio.run``'s way), also when the
    run was already being cancelled (the old clean-up then lost the child's exit notice: "subprocess …
    is still running" and unclosed pipe transports, later, in another test); and with the running
    coroutine simply dropped (closed by the garbage collector)."""
    before = children()

    async def start(cancel: bool) -> asyncio.Task[ChildResult]:
        task = asyncio.ensure_future(run("echo started; exec sleep 60"))
        await asyncio.sleep(0.05)
        if cancel:
            task.cancel()
            await asyncio.sleep(0)
        return task

    for cancel in (False, True):
        with asyncio.Runner() as runner:
            runner.run(start(cancel))
        assert_nothing_left(before)

    loop = asyncio.new_event_loop()
    task = loop.run_until_complete(start(False))
    loop.close()
    del task
    assert_nothing_left(before)
