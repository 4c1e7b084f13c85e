"""``tests/processes.py``: the harnesses' stop and readiness wait."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.processes import free_port, read_log, terminate, wait_ready

IGNORES_TERM = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('up', flush=True)\ntime.sleep(60)")


async def _started(code: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    assert await proc.stdout.readline() == b"up\n"  # its handlers are in place
    return proc


async def test_a_child_that_exits_on_sigterm_is_not_killed() -> None:
    proc = await _started("import time\nprint('up', flush=True)\ntime.sleep(60)")
    assert await terminate(proc, grace=10) is False
    assert proc.returncode == -15
    assert await terminate(proc, grace=10) is False  # once gone, nothing to do


async def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = await _started(IGNORES_TERM)
    assert await terminate(proc, grace=0.2) is True
    assert proc.returncode == -9


async def test_waiting_for_readiness_says_why_it_never_came(tmp_path: Path) -> None:
    proc = await _started("print('up', flush=True)")
    await proc.wait()
    url = f"http://127.0.0.1:{free_port()}/readyz"
    assert await wait_ready(proc, url, within=5, name="thing") == "thing exited with 0 before it was ready"
    alive = await _started(IGNORES_TERM)
    try:
        why = await wait_ready(alive, url, within=0.3, name="thing")
        assert why.startswith("thing not ready within 0.3s; last readyz: ") and "Connect" in why
    finally:
        await terminate(alive, grace=0.1)
    assert read_log(tmp_path / "none.log") == ""
