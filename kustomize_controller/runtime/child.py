"""Child processes that never outlive the call that started them: :func:`run_child`.

Contract:

- ``run_child(argv, …)`` starts ``argv`` as the leader of a new session (its own process group), with
  ``stdin`` fed from ``input`` (or ``/dev/null``) and stdout and stderr captured, and returns a
  :class:`ChildResult` once the child has exited and both pipes have reached their end.
- Stdout beyond ``max_output`` bytes fails with :class:`ChildOutputExceeded`; a child still running after
  ``time_limit`` seconds of the injected clock fails with :class:`ChildTimedOut`. Stderr is kept up to
  ``max_stderr`` bytes, the rest read and dropped (a chatty child never blocks on a full pipe).
- On every way out — a result, an error, the time limit, the output cap, a cancellation at any point
  (once or again), the coroutine closed un-awaited because its event loop went away — the child's whole
  process group is killed (``SIGKILL``), the child is reaped and every pipe and descriptor is closed before
  ``run_child`` returns or raises. That clean-up has no ``await`` in it, so nothing can interrupt it: it
  blocks the loop for the moment a killed process takes to exit (a child stuck in the kernel longer than
  :data:`KILL_WAIT` is handed to a daemon thread that reaps it whenever it goes).
- A child that exits by itself has the rest of its process group killed before it is reaped (while its
  pid still names the group): a grandchild left holding a pipe ends with it instead of outliving it.
- The exit is seen through a pidfd (Linux >= 5.3), else by polling with a short back-off; neither needs
  asyncio's child watcher, whose exit notice is lost when the loop closes first (the child then shows up
  as a ``ResourceWarning`` wherever it is garbage-collected).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kustomize_controller.runtime.clock import Clock

KILL_WAIT = 5.0
_CHUNK = 1 << 16
_POLL_FIRST, _POLL_MAX = 0.001, 0.05


@dataclass(frozen=True, slots=True)
class ChildResult:
    returncode: int
    stdout: bytes
    stderr: bytes


class ChildError(Exception):
    """The child was stopped before it finished (it has been killed and reaped)."""


class ChildTimedOut(ChildError):
    def __init__(self, time_limit: float) -> None:
        super().__init__(f"timed out after {time_limit:g}s")
        self.time_limit = time_limit


class ChildOutputExceeded(ChildError):
    def __init__(self, max_output: int) -> None:
        super().__init__(f"output exceeds the limit of {max_output} bytes")
        self.max_output = max_output


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


class _Child:
    """One child's pipes and exit, driven by the event loop's descriptor callbacks (no tasks)."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes | None, *, max_output: int, max_stderr: int) -> None:
        self.proc = proc
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[ChildResult] = self.loop.create_future()
        self._max_output = max_output
        self._max_stderr = max_stderr
        assert proc.stdout is not None and proc.stderr is not None
        self._out_fd, self._err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._out_size = self._err_size = 0
        self._readers: set[int] = set()
        self._writer: int | None = None
        self._input = memoryview(data or b"")
        self._pidfd: int | None = None
        self._poll: asyncio.TimerHandle | None = None
        self._poll_delay = _POLL_FIRST

    def start(self) -> None:
        """Watch the pipes and the exit; whatever it registered before a failure, :meth:`close` undoes."""
        proc = self.proc
        for fd in (self._out_fd, self._err_fd):
            os.set_blocking(fd, False)
            self.loop.add_reader(fd, self._read, fd)
            self._readers.add(fd)
        if proc.stdin is not None:
            fd = proc.stdin.fileno()
            os.set_blocking(fd, False)
            self.loop.add_writer(fd, self._write)
            self._writer = fd
        self._pidfd = _pidfd(proc.pid)
        if self._pidfd is not None:
            self.loop.add_reader(self._pidfd, self._exited)
        else:
            self._poll = self.loop.call_later(self._poll_delay, self._poll_exit)

    def stop(self, err: ChildError) -> None:
        """End the wait with ``err`` (the child is killed by :meth:`close`)."""
        if not self.done.done():
            self.done.set_exception(err)

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.loop.remove_reader(fd)
            self._readers.discard(fd)
            self._finish()
        elif fd == self._out_fd:
            self._out_size += len(chunk)
            if self._out_size > self._max_output:
                self.stop(ChildOutputExceeded(self._max_output))
            else:
                self._out.append(chunk)
        else:
            if self._err_size < self._max_stderr:
                self._err.append(chunk[: self._max_stderr - self._err_size])
            self._err_size += len(chunk)

    def _write(self) -> None:
        assert self._writer is not None and self.proc.stdin is not None
        try:
            sent = os.write(self._writer, self._input[:_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the child closed its stdin: it does not want the rest
            sent = len(self._input)
        self._input = self._input[sent:]
        if not self._input:
            self.loop.remove_writer(self._writer)
            self._writer = None
            self.proc.stdin.close()

    def _poll_exit(self) -> None:
        self._poll = None
        try:
            exited = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            exited = True
        if exited:
            self._exited()
        else:
            self._poll_delay = min(self._poll_delay * 2, _POLL_MAX)
            self._poll = self.loop.call_later(self._poll_delay, self._poll_exit)

    def _exited(self) -> None:
        if self._pidfd is not None:
            self.loop.remove_reader(self._pidfd)
        # Still a zombie, so its pid still names its group: what it left behind goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.poll()
        self._finish()

    def _finish(self) -> None:
        if self.proc.returncode is not None and not self._readers and not self.done.done():
            self.done.set_result(ChildResult(self.proc.returncode, b"".join(self._out), b"".join(self._err)))

    def close(self) -> None:
        """Kill the group, reap the child, close every descriptor. Synchronous: nothing can cut it short."""
        if self._poll is not None:
            self._poll.cancel()
        if not self.loop.is_closed():
            for fd in (*self._readers, *((self._pidfd,) if self._pidfd is not None else ())):
                self.loop.remove_reader(fd)
            if self._writer is not None:
                self.loop.remove_writer(self._writer)
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            try:
                self.proc.wait(timeout=KILL_WAIT)
            except subprocess.TimeoutExpired:
                threading.Thread(target=self.proc.wait, name=f"reap-{self.proc.pid}", daemon=True).start()
        streams: tuple[IO[bytes] | None, ...] = (self.proc.stdin, self.proc.stdout, self.proc.stderr)
        for stream in streams:
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


async def run_child(
    argv: Sequence[str],
    *,
    clock: Clock,
    time_limit: float,
    env: dict[str, str],
    cwd: Path | str | None = None,
    input: bytes | None = None,
    max_output: int,
    max_stderr: int = 1 << 20,
) -> ChildResult:
    """Run ``argv`` to its end (see the module docstring); ``OSError`` when it cannot be started."""
    # Popen, not asyncio's subprocess transport: the fork is as synchronous either way, and owning the
    # pipes and the exit here is what lets the clean-up below run without an await.
    proc = subprocess.Popen(  # noqa: ASYNC220
        list(argv),
        stdin=subprocess.PIPE if input else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    child = _Child(proc, input, max_output=max_output, max_stderr=max_stderr)
    timer: asyncio.Future[None] | None = None
    closing = False
    try:
        child.start()
        timer = asyncio.ensure_future(clock.sleep(time_limit))
        timer.add_done_callback(lambda t: None if t.cancelled() else child.stop(ChildTimedOut(time_limit)))
        return await child.done
    except GeneratorExit:  # closed un-awaited (its loop is gone): no more awaits possible
        closing = True
        raise
    finally:
        if timer is not None:
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                timer.cancel()
        child.close()
        if child.done.done() and not child.done.cancelled():
            child.done.exception()  # retrieved: a stop that raced a cancellation is not reported as lost
        if not closing and timer is not None and not timer.done():
            await asyncio.wait({timer})  # the child is gone already; this only lets the timer finish

__all__ = ["KILL_WAIT", "ChildError", "ChildOutputExceeded", "ChildResult", "ChildTimedOut", "run_child"]
