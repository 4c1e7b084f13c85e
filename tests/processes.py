"""Child processes of the test, end-to-end and bench harnesses: a free loopback port, a child that dies with
its parent, and a stop that always ends with the child gone.

The harnesses (``tests/controlplane``, ``tests/flux``, ``e2e/harness.py``, ``bench/procs.py``) start real
processes — kube-apiserver, etcd, Flux's controllers, ours — and own them: each is stopped by its owner, and
should the owner die first, the kernel signals the child (``PR_SET_PDEATHSIG``), so a killed test run leaves
nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import socket
from pathlib import Path

import aiohttp

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def die_with_parent(sig: int = signal.SIGKILL) -> None:  # pragma: no cover - in the child between fork and exec
    """A ``preexec_fn``: the kernel sends the child ``sig`` when the process that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def die_with_parent_gently() -> None:  # pragma: no cover - in the child between fork and exec
    """:func:`die_with_parent` with SIGTERM: the child gets to stop its own children first."""
    die_with_parent(signal.SIGTERM)


async def terminate(proc: asyncio.subprocess.Process, *, grace: float) -> bool:
    """SIGTERM, ``grace`` seconds to exit, then SIGKILL; returns once it has exited, True when it was killed."""
    if proc.returncode is not None:
        return False
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
        return False
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return True


async def wait_ready(proc: asyncio.subprocess.Process, url: str, *, within: float, name: str) -> str:
    """Polls ``url`` (a health endpoint) every 0.2 s until it answers 200: then "". Else why it never did: the
    process exited first, or ``within`` seconds passed (with the last answer or error)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last: object = None
    timeout = aiohttp.ClientTimeout(total=10)
    while True:
        if proc.returncode is not None:
            return f"{name} exited with {proc.returncode} before it was ready"
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as resp:
                if resp.status == 200:
                    return ""
                last = f"{resp.status} {await resp.text()}"
        except (aiohttp.ClientError, TimeoutError) as err:
            last = err
        if loop.time() >= deadline:
            return f"{name} not ready within {within}s; last {url.rsplit('/', 1)[-1]}: {last!r}"
        await asyncio.sleep(0.2)


def read_log(path: Path) -> str:
    """A child's log as text so far; "" before it has one."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
