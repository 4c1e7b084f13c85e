"""The build cache's store and key, the reach of a build, and the cases that must bypass the cache."""

from __future__ import annotations

import asyncio
import hashlib
import pickle
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build_cache import BuildCache, build_key
from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.generate import Overlay
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.kustomize.reach import materialise, reach
from kustomize_controller.kustomize.sops.decryptor import SopsDecryptor
from kustomize_controller.testing.artifacts import pack_dir

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"


def objects(n: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm{i}"}, "data": {"k": "x" * 100}}
            for i in range(n)]


async def test_load_returns_fresh_objects_and_exact_types() -> None:
    import datetime

    cache = BuildCache()
    objs = [{"kind": "X", "when": datetime.date(2024, 1, 1), "raw": b"\x00"}]
    await cache.store("k", objs, "sha256:d")
    got = await cache.load("k")
    assert got is not None and got == (objs, "sha256:d")
    got[0][0]["kind"] = "changed"
    again = await cache.load("k")
    assert again is not None and again[0][0]["kind"] == "X"
    assert await cache.load("other") is None


async def test_memory_bound_evicts_least_recently_used() -> None:
    registry = CollectorRegistry()
    entry = len(pickle.dumps(objects(2), protocol=pickle.HIGHEST_PROTOCOL)) + 256  # blob + per-entry overhead
    cache = BuildCache(max_bytes=2 * entry + entry // 2, metrics=CacheMetrics(registry))
    await cache.store("a", objects(2), "a")
    await cache.store("b", objects(2), "b")
    assert await cache.load("a") is not None  # a is now the most recently used
    await cache.store("c", objects(2), "c")
    assert await cache.load("b") is None and await cache.load("a") is not None and await cache.load("c") is not None
    assert cache.bytes == 2 * entry
    assert registry.get_sample_value("kustomize_controller_build_cache_bytes") == cache.bytes
    await cache.store("huge", objects(100), "h")  # larger than the bound: not kept, nothing else lost
    assert await cache.load("huge") is None and len(cache) == 2


async def test_zero_bound_disables() -> None:
    cache = BuildCache(max_bytes=0)
    await cache.store("a", objects(1), "a")
    assert not cache.enabled and await cache.load("a") is None


async def test_large_entries_are_serialised_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from kustomize_controller.kustomize import build_cache as module

    threads: list[tuple[str, bool]] = []

    def recording(name: str, fn: Any) -> Any:
        def wrapper(arg: Any) -> Any:
            threads.append((name, threading.current_thread() is threading.main_thread()))
            return fn(arg)
        return wrapper

    monkeypatch.setattr(module, "_dumps", recording("dumps", module._dumps))
    monkeypatch.setattr(module, "_loads", recording("loads", module._loads))
    cache = BuildCache()
    large = [{"kind": "ConfigMap", "metadata": {"name": f"cm{i}"}, "data": {"k": f"{i:0100d}"}} for i in range(1000)]
    small = objects(4)
    assert len(module._dumps(large)) > module.OFF_LOOP_BYTES > len(module._dumps(small))
    threads.clear()
    await cache.store("large", large, "l")
    await cache.store("small", small, "s")
    assert threads == [("dumps", False), ("dumps", True)]
    threads.clear()
    got_large, got_small = await cache.load("large"), await cache.load("small")
    assert threads == [("loads", False), ("loads", True)]
    assert got_large == (large, "l") and got_small == (small, "s")
    assert got_large[0] is not large and got_large[0][0] is not large[0]  # fresh objects on every load
    assert await cache.load("large") == (large, "l") and await cache.load("absent") is None
    assert cache.bytes == sum(len(b) + 256 for b, _ in cache._entries.values())


def test_every_key_input_matters() -> None:
    base: dict[str, Any] = {
        "content": "c", "options": BuildOptions(path="p"), "builder": "b", "variables": {"A": "1"},
        "decryption": "none",
    }
    variants: list[dict[str, Any]] = [
        {"content": "c2"}, {"options": BuildOptions(path="p2")}, {"builder": "b2"}, {"variables": {"A": "2"}},
        {"variables": None}, {"decryption": "key"},
        {"options": BuildOptions(path="p", overlay=Overlay(name_prefix="x-"))},
        {"options": BuildOptions(path="p", allow_remote_bases=False)},
        {"options": BuildOptions(path="p", strict_substitution=False)},
    ]
    keys = {build_key(**base)} | {build_key(**{**base, **v}) for v in variants}
    assert len(keys) == len(variants) + 1
    assert build_key(**base) == build_key(**base)


def test_sops_key_identity_follows_the_key_material() -> None:
    one = SopsDecryptor.from_secret_data({"a.txt": b"1"}).cache_identity
    assert one == SopsDecryptor.from_secret_data({"a.txt": b"1"}).cache_identity
    assert one != SopsDecryptor.from_secret_data({"a.txt": b"2"}).cache_identity
    assert one != SopsDecryptor.from_secret_data({"a.txt": b"1"}, global_age_keys={"g.txt": b"1"}).cache_identity
    assert one is not None and len(one.split(":")[0]) == 64  # a sha256 of the material, never the keys


def test_reach_lists_what_a_build_reads_and_the_view_holds_only_that(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for rel, text in {
        "app/kustomization.yaml": "resources: [../base, cm.yaml]\nconfigMapGenerator:\n- name: g\n  files: [d.txt]\n",
        "app/kustomization.yml": "# a second kustomization file: kustomize must still see it\n",
        "app/cm.yaml": CM,
        "app/d.txt": "d",
        "app/unused.yaml": CM,
        "base/kustomization.yaml": "resources: [cm.yaml]\n",
        "base/cm.yaml": CM,
        "other/cm.yaml": CM,
    }.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    found = reach(src, src / "app", Overlay(), allow_remote=False)
    assert set(found.files) == {
        "app/kustomization.yaml", "app/kustomization.yml", "app/cm.yaml", "app/d.txt",
        "base/kustomization.yaml", "base/cm.yaml",
    }
    view = tmp_path / "view"
    materialise(found, src, view)
    assert sorted(str(p.relative_to(view)) for p in view.rglob("*") if p.is_file()) == sorted(found.files)
    (src / "app" / "unused.yaml").write_text("changed")
    assert reach(src, src / "app", Overlay(), allow_remote=False).content_key == found.content_key
    (src / "app" / "d.txt").write_text("changed")
    assert reach(src, src / "app", Overlay(), allow_remote=False).content_key != found.content_key


class IdentifiedBuilder:
    def __init__(self) -> None:
        self.runs = 0

    def cache_identity(self) -> str:
        return "scripted"

    async def build(self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool,
                    batch: object = None) -> bytes:
        self.runs += 1
        return CM.encode()


async def test_remote_bases_bypass_the_cache(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "app" / "kustomization.yaml").write_text("resources:\n- https://example.com/base?ref=v1\n")
    found = reach(src, src / "app", Overlay(), allow_remote=True)
    assert found.remote == ["https://example.com/base?ref=v1"]
    registry = CollectorRegistry()
    builder = IdentifiedBuilder()
    pipeline = BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "ws"),
                             builds=BuildCache(metrics=CacheMetrics(registry)))
    for _ in range(2):
        async with pipeline.local_checkout(src, path="app") as co:
            result = await pipeline.build(co, BuildOptions(path="app"))
        assert not result.reused
    assert builder.runs == 2
    assert registry.get_sample_value("kustomize_controller_build_cache_requests_total", {"result": "bypass"}) == 2


async def test_local_builds_are_cached_by_content(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "app" / "cm.yaml").write_text(CM)
    builder = IdentifiedBuilder()
    pipeline = BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "ws"), builds=BuildCache())
    for _ in range(2):
        async with pipeline.local_checkout(src, path="app") as co:
            await pipeline.build(co, BuildOptions(path="app"))
    assert builder.runs == 1
    (src / "app" / "cm.yaml").write_text(CM + "data: {a: b}\n")
    async with pipeline.local_checkout(src, path="app") as co:
        assert not (await pipeline.build(co, BuildOptions(path="app"))).reused
    assert builder.runs == 2


class KustomizationRecorder(IdentifiedBuilder):
    """Records the kustomization file each run of kustomize would read."""

    def __init__(self) -> None:
        super().__init__()
        self.kustomizations: list[str] = []

    async def build(self, directory: Path, *, root: Path, workdir: Path, allow_remote: bool,
                    batch: object = None) -> bytes:
        self.kustomizations.append((directory / "kustomization.yaml").read_text())
        return await super().build(directory, root=root, workdir=workdir, allow_remote=allow_remote)


class LocalFetcher:
    """Serves tarballs from memory (the artifact cache only calls ``fetch``)."""

    def __init__(self, blobs: dict[str, bytes]) -> None:
        self.blobs = blobs

    async def fetch(self, url: str, digest: str, dest: Path) -> int:
        await asyncio.to_thread(dest.write_bytes, self.blobs[url])
        return len(self.blobs[url])


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often kustomization generation and the confinement walk run, wherever they are called from."""
    from kustomize_controller.kustomize import confine as confine_mod
    from kustomize_controller.kustomize import generate as generate_mod
    from kustomize_controller.kustomize import pipeline as pipeline_mod
    from kustomize_controller.kustomize import reach as reach_mod

    calls = {"generate": 0, "walk": 0}

    def counting(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    render = counting("generate", generate_mod.render_kustomization)
    walk = counting("walk", confine_mod.check_confinement)
    monkeypatch.setattr(generate_mod, "render_kustomization", render)  # used by generate()
    monkeypatch.setattr(reach_mod, "render_kustomization", render)
    monkeypatch.setattr(reach_mod, "check_confinement", walk)
    monkeypatch.setattr(pipeline_mod, "check_confinement", walk)
    return calls


def app_source(root: Path) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "cm.yaml").write_text(CM)
    (root / "app" / "other.yaml").write_text(CM.replace("name: cm", "name: other"))
    return root


OVERLAID = BuildOptions.from_spec({"path": "app", "namePrefix": "p-", "targetNamespace": "t"})


async def test_a_miss_generates_and_walks_once_and_builds_what_an_uncached_build_builds(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    src = app_source(tmp_path / "src")
    plain = KustomizationRecorder()
    uncached = BuildPipeline(builder=plain, workspace=Workspace(tmp_path / "ws"))
    async with uncached.local_checkout(src, path="app") as co:
        expected = await uncached.build(co, OVERLAID)
    assert counted == {"generate": 1, "walk": 1}

    for variant in ("local", "shared"):
        counted.update(generate=0, walk=0)
        recorder = KustomizationRecorder()
        workspace = Workspace(tmp_path / f"ws-{variant}")
        if variant == "local":
            pipeline = BuildPipeline(builder=recorder, workspace=workspace, builds=BuildCache())
            checkout = pipeline.local_checkout(src, path="app")
        else:
            blob = pack_dir(src)
            fetcher = LocalFetcher({"a": blob})
            artifacts = ArtifactCache(workspace=workspace, fetcher=fetcher)  # type: ignore[arg-type]
            pipeline = BuildPipeline(builder=recorder, workspace=workspace, artifacts=artifacts, builds=BuildCache())
            checkout = pipeline.checkout(url="a", digest="sha256:" + hashlib.sha256(blob).hexdigest(), path="app")
        async with checkout as co:
            result = await pipeline.build(co, OVERLAID)
        assert counted == {"generate": 1, "walk": 1}, variant  # once, not once for the key and once for the build
        assert not result.reused and recorder.kustomizations == plain.kustomizations, variant
        assert "namePrefix: p-" in recorder.kustomizations[0] and "namespace: t" in recorder.kustomizations[0]
        assert (result.objects, result.digest) == (expected.objects, expected.digest)
        assert "kustomization.yaml" not in {p.name for p in (src / "app").iterdir()}  # the source is untouched
        assert list(workspace.base.iterdir()) in ([], [artifacts.directory] if variant == "shared" else [])


async def test_a_symlinked_kustomization_is_replaced_not_written_through(tmp_path: Path) -> None:
    """A local directory keeps its symlinks; the build writes the generated file in the link's place."""
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "app" / "cm.yaml").write_text(CM)
    (src / "real.yaml").write_text("resources: [cm.yaml]\n")
    (src / "app" / "kustomization.yaml").symlink_to("../real.yaml")
    outputs = []
    for builds in (None, BuildCache()):
        recorder = KustomizationRecorder()
        pipeline = BuildPipeline(builder=recorder, workspace=Workspace(tmp_path / "ws"), builds=builds)
        async with pipeline.local_checkout(src, path="app") as co:
            await pipeline.build(co, BuildOptions(path="app"))
            assert (co.root / "real.yaml").read_text() == "resources: [cm.yaml]\n"
        outputs.append(recorder.kustomizations)
    assert outputs[0] == outputs[1] and "sortOptions" in outputs[0][0]


async def test_an_overlay_or_a_decryption_change_misses(tmp_path: Path) -> None:
    src = app_source(tmp_path / "src")
    builder = KustomizationRecorder()
    pipeline = BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "ws"), builds=BuildCache())

    async def run(options: BuildOptions, decryptor: Any = None) -> bool:
        async with pipeline.local_checkout(src, path="app") as co:
            return (await pipeline.build(co, options, decryptor=decryptor)).reused

    one = SopsDecryptor.from_secret_data({"a.txt": b"1"})
    two = SopsDecryptor.from_secret_data({"a.txt": b"2"})
    assert not await run(OVERLAID)
    assert await run(OVERLAID)
    assert not await run(BuildOptions.from_spec({"path": "app", "namePrefix": "q-", "targetNamespace": "t"}))
    assert not await run(OVERLAID, one)
    assert await run(OVERLAID, one)
    assert not await run(OVERLAID, two)
    assert builder.runs == 4
    assert "namePrefix: q-" in builder.kustomizations[1]


class SlowViews:
    """A pipeline over a cached artifact whose views block in their worker thread until ``release``."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import threading

        from kustomize_controller.kustomize import pipeline as pipeline_mod

        self.entered, self.release = threading.Event(), threading.Event()

        def slow_materialise(*args: Any, **kwargs: Any) -> None:
            self.entered.set()
            self.release.wait(10)
            materialise(*args, **kwargs)

        monkeypatch.setattr(pipeline_mod, "materialise", slow_materialise)
        blob = pack_dir(app_source(tmp_path / "src"))
        self.digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        self.workspace = Workspace(tmp_path / "ws")
        self.artifacts = ArtifactCache(workspace=self.workspace, fetcher=LocalFetcher({"a": blob}))  # type: ignore[arg-type]
        self.pipeline = BuildPipeline(builder=IdentifiedBuilder(), workspace=self.workspace, artifacts=self.artifacts)

    def left_behind(self) -> list[Path]:
        return [p for p in self.workspace.base.iterdir() if p != self.artifacts.directory]


async def test_a_build_cancelled_while_its_view_is_made_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = SlowViews(tmp_path, monkeypatch)
    async with slow.pipeline.checkout(url="a", digest=slow.digest, path="app") as co:
        task = asyncio.ensure_future(slow.pipeline.build(co, BuildOptions(path="app")))
        await asyncio.to_thread(slow.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        slow.release.set()  # the view's thread finishes after its build was cancelled
    assert slow.left_behind() == []
    await slow.artifacts.close()


async def test_a_view_is_removed_although_its_checkout_is_cancelled_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shutdown cancelling a reconcile already being cancelled: the view's thread goes on regardless,
    so its removal must wait for it through the second cancellation, and not swallow it."""
    slow = SlowViews(tmp_path, monkeypatch)

    async def reconcile() -> None:
        async with slow.pipeline.checkout(url="a", digest=slow.digest, path="app") as co:
            await slow.pipeline.build(co, BuildOptions(path="app"))

    task = asyncio.ensure_future(reconcile())
    await asyncio.to_thread(slow.entered.wait, 10)
    task.cancel()
    for _ in range(20):  # the first cancellation reaches the checkout's exit, which waits for the view
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # still waiting for the view's thread
    slow.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.left_behind() == []
    await slow.artifacts.close()


async def test_a_loader_cancelled_while_unpacking_hands_over_a_clean_slate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unpacking thread goes on after its loader was cancelled; the waiter that takes over reuses the
    entry's directory name, so the cancelled loader removes what its thread made before it lets go."""
    import threading

    from kustomize_controller.kustomize import artifact_cache as cache_mod
    from kustomize_controller.kustomize.extract import extract_tree as real_extract

    entered, release = threading.Event(), threading.Event()
    calls = 0

    def first_blocks(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            entered.set()
            release.wait(10)
        return real_extract(*args, **kwargs)

    monkeypatch.setattr(cache_mod, "extract_tree", first_blocks)
    blob = pack_dir(app_source(tmp_path / "src"))
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    workspace = Workspace(tmp_path / "ws")
    artifacts = ArtifactCache(workspace=workspace, fetcher=LocalFetcher({"a": blob}))  # type: ignore[arg-type]

    async def use() -> list[str]:
        async with artifacts.acquire(url="a", digest=digest) as root:
            return sorted(p.name for p in (root / "app").iterdir())

    loader = asyncio.ensure_future(use())
    await asyncio.to_thread(entered.wait, 10)
    waiter = asyncio.ensure_future(use())
    await asyncio.sleep(0.05)
    loader.cancel()
    await asyncio.sleep(0.05)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await loader
    assert await asyncio.wait_for(waiter, 30) == ["cm.yaml", "other.yaml"]
    assert calls == 2
    await artifacts.close()
