"""The real builder, cut short at every point: no child process, pipe or task outlives a build.

A build is cancelled right after the n-th I/O event of its child (each read, each end of a pipe, the
exit; counted on the runner itself, so deterministic), for every n until a build finishes uncut; also
while it waits for a build slot, once more while its clean-up runs, and over its output cap."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kustomize_controller.kustomize.build import BuilderCommand, KustomizeBuilder
from kustomize_controller.kustomize.errors import KustomizeBuildError
from kustomize_controller.runtime.clock import RealClock
from tests.child_leaks import assert_nothing_left, children, count_events

pytestmark = pytest.mark.builder


def source(tmp_path: Path, objects: int = 20) -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / "kustomization.yaml").write_text("resources: [cms.yaml]\n")
    (root / "cms.yaml").write_text("".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\ndata: {{k: '{'v' * 200}'}}\n"
        for i in range(objects)
    ))
    return root


async def build(builder: KustomizeBuilder, root: Path) -> bytes:
    return await builder.build(root, root=root, workdir=root.parent, allow_remote=False)


async def test_a_build_cancelled_after_every_event_leaves_nothing(
    builder_command: BuilderCommand, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = source(tmp_path)
    builder = KustomizeBuilder(command=builder_command, clock=RealClock())
    expected = await build(builder, root)
    target = [0]
    task: list[asyncio.Task[bytes]] = []
    seen = count_events(monkeypatch, lambda n: task[0].cancel() if n == target[0] else None)
    before = children()
    cut = 0
    for n in range(200):
        target[0], seen[0] = n, 0
        task[:] = [asyncio.ensure_future(build(builder, root))]
        if n == 0:
            task[0].cancel()
        try:
            out = await task[0]
        except asyncio.CancelledError:
            cut += 1
            assert_nothing_left(before)
            continue
        assert out == expected
        break
    else:
        pytest.fail("no build finished uncut")
    assert cut >= 3  # before the start, while reading, at the exit at least
    assert_nothing_left(before)


async def _running_build(builder: KustomizeBuilder, root: Path, before: set[int]) -> asyncio.Task[bytes]:
    """A build whose child is running now. On a loaded machine a whole build can pass between two looks
    (the child exits and is reaped off the loop): that one is awaited and another started."""
    for _ in range(50):
        task = asyncio.ensure_future(build(builder, root))
        while not children() - before and not task.done():
            await asyncio.wait([task], timeout=0.001)
        if not task.done():
            return task
        await task
        assert_nothing_left(before)
    pytest.fail("no build was seen running in 50 attempts")


async def test_cancelled_waiting_for_a_slot_twice_while_cleaning_up_and_over_the_cap(
    builder_command: BuilderCommand, tmp_path: Path
) -> None:
    root = source(tmp_path)
    before = children()
    one_slot = KustomizeBuilder(command=builder_command, clock=RealClock(), max_parallel=1)
    first = asyncio.ensure_future(build(one_slot, root))
    waiting = asyncio.ensure_future(build(one_slot, root))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await first

    for delay in range(3):
        task = await _running_build(one_slot, root, before)
        task.cancel()
        for _ in range(delay):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert_nothing_left(before)

    capped = KustomizeBuilder(command=builder_command, clock=RealClock(), max_output=100)
    with pytest.raises(KustomizeBuildError, match="output exceeds the limit of 100 bytes"):
        await build(capped, root)
    assert_nothing_left(before)
