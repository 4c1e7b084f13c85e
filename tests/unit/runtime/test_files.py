import asyncio
import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.runtime import files as files_mod
from kustomize_controller.runtime.files import open_off_loop


async def test_opens_for_reading_and_writing(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    with await open_off_loop(target, "wb") as out:
        out.write(b"payload")
    with await open_off_loop(target, "rb") as src:
        assert src.read() == b"payload"


async def test_an_open_error_reaches_the_caller(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await open_off_loop(tmp_path / "missing", "rb")


async def test_text_modes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="binary files only"):
        await open_off_loop(tmp_path / "a.txt", "w")


class _SlowOpen:
    """Stands in for the worker thread's ``open``: holds until released, then opens (or fails)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, fail: bool = False) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.opened: list[Any] = []
        self.settled = asyncio.Event()  # the cancelled caller's clean-up has seen the thread's result
        self._fail = fail
        self._real_open, real_close = files_mod._open_binary, files_mod._close_opened

        def close_opened(opening: "asyncio.Future[Any]") -> None:
            real_close(opening)
            self.settled.set()

        monkeypatch.setattr(files_mod, "_open_binary", self)
        monkeypatch.setattr(files_mod, "_close_opened", close_opened)

    def __call__(self, path: Path, mode: str) -> Any:
        self.entered.set()
        self.release.wait(10)
        if self._fail:
            raise PermissionError(13, "Permission denied", str(path))
        self.opened.append(self._real_open(path, mode))
        return self.opened[-1]

    async def cancel_while_opening(self, target: Path, mode: str) -> None:
        task = asyncio.ensure_future(open_off_loop(target, mode))
        await asyncio.to_thread(self.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # the cancellation is not held up by the thread
        self.release.set()
        await asyncio.wait_for(self.settled.wait(), 10)


@pytest.mark.parametrize("mode", ["rb", "wb"])
async def test_a_caller_cancelled_while_the_file_opens_closes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The worker thread opens the file whatever happens to the caller; the cancelled caller closes it
    (a crash-injected controller left it to the garbage collector: "Exception ignored in: <_io.FileIO …>",
    which the ``error`` warning filter turns into a failure of whichever test runs next)."""
    target = tmp_path / "a.tar.gz"
    target.write_bytes(b"x")
    slow = _SlowOpen(monkeypatch)
    await slow.cancel_while_opening(target, mode)
    assert len(slow.opened) == 1 and slow.opened[0].closed


async def test_a_cancelled_caller_drops_the_open_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``open`` that fails after its caller left must not be reported as "exception was never retrieved"."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        await _SlowOpen(monkeypatch, fail=True).cancel_while_opening(tmp_path / "a", "rb")
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))]


def test_no_module_opens_a_file_in_a_bare_worker_thread() -> None:
    """``to_thread(open, …)`` leaks the file to the garbage collector when its caller is cancelled;
    every module goes through ``open_off_loop`` instead."""
    import ast

    import kustomize_controller

    offenders = []
    for module in sorted(Path(kustomize_controller.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            if not (isinstance(func, ast.Attribute) and func.attr in ("to_thread", "run_in_executor")):
                continue
            target = node.args[1] if func.attr == "run_in_executor" and len(node.args) > 1 else node.args[0]
            if (isinstance(target, ast.Name) and target.id == "open") or (
                isinstance(target, ast.Attribute) and target.attr == "open"
            ):
                offenders.append(f"{module.name}:{node.lineno}")
    assert not offenders
