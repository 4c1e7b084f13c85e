"""The artifact cache over real HTTP: one download per artifact, failures shared and never kept,
eviction of unused trees only, and every check of an uncached checkout still applied."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.errors import ArtifactNotFoundError, DigestError, DownloadError, ExtractError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.testing.artifacts import ArtifactFields, ArtifactServer

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


@dataclass
class Env:
    server: ArtifactServer
    workspace: Workspace
    fetcher: ArtifactFetcher
    registry: CollectorRegistry

    def cache(self, **kw: int) -> ArtifactCache:
        return ArtifactCache(workspace=self.workspace, fetcher=self.fetcher, metrics=CacheMetrics(self.registry), **kw)

    def count(self, result: str) -> float:
        value = self.registry.get_sample_value("kustomize_controller_artifact_cache_requests_total", {"result": result})
        return value or 0.0


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with ArtifactServer() as server, aiohttp.ClientSession() as session:
        fetcher = ArtifactFetcher(session=session, clock=FakeClock(), env={}, retries=0)
        yield Env(server, Workspace(tmp_path / "ws"), fetcher, CollectorRegistry())


async def publish(env: Env, name: str, *apps: str) -> ArtifactFields:
    files = {f"apps/{a}/cm.yaml": CM.format(name=a) for a in apps}
    return await env.server.publish_files(files, name=name)


def path_of(artifact: ArtifactFields) -> str:
    return str(artifact["path"])


async def test_concurrent_and_sequential_checkouts_download_once(env: Env) -> None:
    artifact = await publish(env, "repo", *(f"app{i}" for i in range(20)))
    cache = env.cache()
    roots: list[Path] = []

    async def use() -> None:
        async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as root:
            roots.append(root)
            assert (root / "apps" / "app3" / "cm.yaml").is_file()
            await asyncio.sleep(0.01)

    await asyncio.gather(*(use() for _ in range(10)))
    await use()
    assert env.server.request_count(path_of(artifact)) == 1
    assert len(set(roots)) == 1
    assert (env.count("miss"), env.count("hit")) == (1, 10)
    assert cache.bytes > 0
    await cache.close()
    assert not roots[0].exists()


async def test_concurrent_first_downloads_of_different_artifacts_share_one_directory(env: Env) -> None:
    """The cache's directory is what close() removes and a restart sweeps: one, however the first
    downloads interleave."""
    artifacts = [await publish(env, f"repo{i}", "app") for i in range(5)]
    cache = env.cache()

    async def use(artifact: ArtifactFields) -> Path:
        async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as root:
            return root

    roots = await asyncio.gather(*(use(a) for a in artifacts))
    assert {root.parent for root in roots} == {cache.directory}
    assert [d.name for d in (env.workspace.base).iterdir()] == [cache.directory.name if cache.directory else ""]
    await cache.close()
    assert list(env.workspace.base.iterdir()) == []


async def test_a_failure_is_shared_by_waiters_and_not_kept(env: Env) -> None:
    artifact = await publish(env, "repo", "a")
    env.server.fail(path_of(artifact), status=500, times=1)
    env.server.delay(path_of(artifact), seconds=0.2)
    cache = env.cache()

    async def use() -> Path:
        async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as root:
            return root

    outcomes = await asyncio.gather(*(use() for _ in range(5)), return_exceptions=True)
    assert all(isinstance(o, DownloadError) for o in outcomes), outcomes
    assert len({str(o) for o in outcomes}) == 1
    assert env.server.request_count(path_of(artifact)) == 1
    assert len(cache) == 0 and cache.bytes == 0
    env.server.clear_faults()
    root = await use()  # the next checkout tries again
    assert (root / "apps" / "a" / "cm.yaml").is_file()
    assert env.server.request_count(path_of(artifact)) == 2


async def test_not_found_and_bad_digest_leave_nothing(env: Env) -> None:
    artifact = await publish(env, "repo", "a")
    cache = env.cache()
    missing = artifact["url"] + ".missing"

    async def use() -> None:
        async with cache.acquire(url=missing, digest=artifact["digest"]):
            pass

    env.server.delay(None, seconds=0.2)
    outcomes = await asyncio.gather(*(use() for _ in range(3)), return_exceptions=True)
    env.server.clear_faults()
    assert all(isinstance(o, ArtifactNotFoundError) and o.url == missing for o in outcomes), outcomes
    assert len({id(o) for o in outcomes}) == 3  # each waiter has its own exception object
    assert env.server.request_count(path_of(artifact) + ".missing") == 1
    env.server.corrupt(path_of(artifact))
    with pytest.raises(DigestError):
        async with cache.acquire(url=artifact["url"], digest=artifact["digest"]):
            pass
    assert len(cache) == 0
    assert cache.directory is not None and list(cache.directory.iterdir()) == []


async def test_extraction_limits_and_escapes_apply(env: Env) -> None:
    cache = env.cache(max_extract_bytes=10)
    artifact = await publish(env, "repo", "a")
    with pytest.raises(ExtractError, match="extracted size exceeds the limit"):
        async with cache.acquire(url=artifact["url"], digest=artifact["digest"]):
            pass
    assert cache.directory is not None and list(cache.directory.iterdir()) == []


async def test_least_recently_used_unused_trees_are_evicted(env: Env) -> None:
    first = await publish(env, "one", "a")
    second = await publish(env, "two", "b")
    third = await publish(env, "three", "c")
    size = len(CM.format(name="a"))
    cache = env.cache(max_bytes=2 * size)
    async with cache.acquire(url=first["url"], digest=first["digest"]) as root_one:
        pass
    async with cache.acquire(url=second["url"], digest=second["digest"]) as root_two:
        # Over the bound while three trees exist, but the one in use stays.
        async with cache.acquire(url=third["url"], digest=third["digest"]):
            assert root_two.is_dir()
        assert not root_one.exists()  # least recently used and unused: evicted
    assert cache.bytes <= 2 * size
    async with cache.acquire(url=second["url"], digest=second["digest"]):
        pass
    assert env.server.request_count(path_of(second)) == 1  # still cached
    async with cache.acquire(url=first["url"], digest=first["digest"]):
        pass
    assert env.server.request_count(path_of(first)) == 2  # evicted, so downloaded again


async def test_zero_bound_keeps_nothing_once_unused(env: Env) -> None:
    artifact = await publish(env, "repo", "a")
    cache = env.cache(max_bytes=0)
    async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as root:
        assert root.is_dir()
    assert not root.exists() and cache.bytes == 0


async def test_a_cancelled_loader_hands_over_to_a_waiter(env: Env) -> None:
    # The download is held on a fake clock (not a real delay): the loader is certainly still loading
    # when it is cancelled, however slow the machine.
    clock = FakeClock()
    async with ArtifactServer(clock=clock) as server:
        artifact = await server.publish_files({"apps/a/cm.yaml": CM.format(name="a")}, name="repo")
        server.delay(path_of(artifact), seconds=30)
        cache = env.cache()

        async def use() -> Path:
            async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as root:
                return root

        loader = asyncio.ensure_future(use())
        for _ in range(3000):  # bounded: 30 s
            if server.request_count(path_of(artifact)) == 1 and clock.pending_sleepers == 1:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the loader's download never reached the server")
        waiter = asyncio.ensure_future(use())
        for _ in range(10):  # the waiter finds the load in flight and waits on it (no I/O on the way)
            await asyncio.sleep(0)
        loader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loader
        assert not waiter.done()
        server.clear_faults()
        await clock.advance(30)  # let the server finish the abandoned response
        root = await asyncio.wait_for(waiter, timeout=30)
        assert (root / "apps" / "a" / "cm.yaml").is_file()
        assert server.request_count(path_of(artifact)) == 2  # the waiter loaded it itself
        await cache.close()


async def test_the_cache_directory_is_swept_after_a_crash(env: Env) -> None:
    artifact = await publish(env, "repo", "a")
    cache = env.cache()
    async with cache.acquire(url=artifact["url"], digest=artifact["digest"]):
        pass
    assert cache.directory is not None
    assert cache.directory.name.startswith(f"kustomization-{os.getpid()}-")  # what Workspace.sweep() removes


async def test_a_tree_removed_from_disk_is_extracted_again(env: Env) -> None:
    import shutil

    artifact = await publish(env, "repo", "a")
    cache = env.cache()
    async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as root:
        pass
    shutil.rmtree(root)  # a /tmp cleaner
    async with cache.acquire(url=artifact["url"], digest=artifact["digest"]) as again:
        assert (again / "apps" / "a" / "cm.yaml").is_file()
    assert env.server.request_count(path_of(artifact)) == 2
    assert cache.bytes == len(CM.format(name="a"))
