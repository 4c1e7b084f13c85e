"""The artifact server: reproducible packing, the published fields, serving and faults."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import os
import re
import tarfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kustomize_controller.api.source import Artifact
from kustomize_controller.kustomize.errors import ArtifactNotFoundError, DigestError, DownloadError
from kustomize_controller.kustomize.extract import extract_tarball
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.testing.artifacts import (
    ArtifactServer,
    _replacing,
    minimal_spec,
    pack_dir,
    pack_files,
)

TIMEOUT = aiohttp.ClientTimeout(total=30)
APP = {
    "app/kustomization.yaml": "resources:\n- cm.yaml\n",
    "app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
    "README.md": b"bytes are kept as they are\n",
}


def members(data: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getmembers()


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


async def download(url: str, method: str = "GET") -> tuple[int, bytes, Any]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as http, http.request(method, url) as resp:
        return resp.status, await resp.read(), resp.headers


@pytest.fixture
async def server() -> AsyncIterator[ArtifactServer]:
    async with ArtifactServer() as srv:
        yield srv


# ------------------------------------------------------------------------------------------- packing


def test_pack_files_ignores_insertion_order() -> None:
    assert pack_files(APP) == pack_files(dict(reversed(list(APP.items()))))


def test_pack_files_entries_are_sorted_and_normalised() -> None:
    infos = members(pack_files(APP))
    assert [i.name for i in infos] == ["README.md", "app", "app/cm.yaml", "app/kustomization.yaml"]
    for info in infos:
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", "")
        assert info.mode == (0o755 if info.isdir() else 0o644)


def test_gzip_header_carries_no_time_or_name() -> None:
    data = pack_files(APP)
    assert data[:2] == b"\x1f\x8b"
    flags, mtime = data[3], int.from_bytes(data[4:8], "little")
    assert flags & 0x08 == 0  # no FNAME
    assert mtime == 0


def test_content_changes_change_the_bytes() -> None:
    changed = {**APP, "app/cm.yaml": APP["app/cm.yaml"] + "data: {}\n"}
    assert pack_files(changed) != pack_files(APP)


def test_pack_dir_is_independent_of_mtimes_and_ownership_bits(tmp_path: Path) -> None:
    write_tree(tmp_path, APP)
    first = pack_dir(tmp_path)
    for path in tmp_path.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    (tmp_path / "app" / "cm.yaml").chmod(0o600)
    assert pack_dir(tmp_path) == first
    assert first == pack_files(APP)


def test_pack_dir_keeps_exec_bits_links_and_empty_dirs_and_skips_git(tmp_path: Path) -> None:
    write_tree(tmp_path, {"run.sh": "#!/bin/sh\n", ".git/HEAD": "ref: refs/heads/main\n", "a/x.yaml": "a: 1\n"})
    (tmp_path / "run.sh").chmod(0o700)
    (tmp_path / "empty").mkdir()
    (tmp_path / "link.yaml").symlink_to("a/x.yaml")
    (tmp_path / "dirlink").symlink_to("a")
    infos = {i.name: i for i in members(pack_dir(tmp_path))}
    assert sorted(infos) == ["a", "a/x.yaml", "dirlink", "empty", "link.yaml", "run.sh"]
    assert infos["run.sh"].mode == 0o755
    assert infos["link.yaml"].issym() and infos["link.yaml"].linkname == "a/x.yaml"
    assert infos["dirlink"].issym()
    assert infos["empty"].isdir()


def test_pack_dir_refuses_special_files_and_missing_dirs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        pack_dir(tmp_path / "missing")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="fifo: not a regular file"):
        pack_dir(tmp_path)


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "./a", "", "a/./b"])
def test_pack_files_refuses_paths_that_are_not_plain_relative(bad: str) -> None:
    with pytest.raises(ValueError, match="relative path"):
        pack_files({bad: "x"})


def test_packed_tree_round_trips_through_the_controller_extractor(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(pack_files(APP))
    dest = tmp_path / "out"
    dest.mkdir()
    assert extract_tarball(archive, dest) == 3
    for rel, content in APP.items():
        expected = content.encode() if isinstance(content, str) else content
        assert (dest / rel).read_bytes() == expected


# ------------------------------------------------------------------------------------------ publishing


async def test_published_fields_describe_the_served_bytes(server: ArtifactServer) -> None:
    fields = await server.publish_files(APP, name="gitrepository/default/app")
    data = pack_files(APP)
    sha256 = hashlib.sha256(data).hexdigest()
    assert fields["path"] == f"gitrepository/default/app/{sha256}.tar.gz"
    assert fields["url"] == f"{server.url}/{fields['path']}"
    assert fields["digest"] == f"sha256:{sha256}"
    assert fields["size"] == len(data)
    assert fields["revision"] == f"main@sha1:{hashlib.sha1(data).hexdigest()}"
    assert re.fullmatch(r"main@sha1:[0-9a-f]{40}", fields["revision"])
    assert fields["metadata"] == {}
    status, body, headers = await download(fields["url"])
    assert status == 200 and body == data
    assert headers["Content-Type"] == "application/gzip"
    assert "Content-Encoding" not in headers
    # the fields are a valid status.artifact for the controller's model
    artifact = Artifact.model_validate(fields)
    assert artifact.size == len(data)


async def test_same_content_same_path_and_digest(server: ArtifactServer, tmp_path: Path) -> None:
    write_tree(tmp_path, APP)
    from_dir = await server.publish_dir(tmp_path, name="app")
    from_memory = await server.publish_files(APP, name="app")
    assert (from_dir["path"], from_dir["digest"]) == (from_memory["path"], from_memory["digest"])
    changed = await server.publish_files({**APP, "README.md": "other"}, name="app")
    assert changed["digest"] != from_dir["digest"] and changed["path"] != from_dir["path"]
    # both revisions stay downloadable (source-controller keeps the old artifact until GC)
    assert (await download(from_dir["url"]))[0] == 200
    assert (await download(changed["url"]))[0] == 200


async def test_caller_revision_metadata_and_clock() -> None:
    clock = FakeClock(start=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))
    async with ArtifactServer(clock=clock) as server:
        fields = await server.publish_files(
            APP, name="oci", revision="v1.0.0@sha256:" + "a" * 64, metadata={"org.opencontainers.image.revision": "x"}
        )
    assert fields["revision"] == "v1.0.0@sha256:" + "a" * 64
    assert fields["lastUpdateTime"] == "2026-03-04T05:06:07Z"
    assert fields["metadata"] == {"org.opencontainers.image.revision": "x"}


async def test_publish_archive_serves_bytes_verbatim(server: ArtifactServer) -> None:
    fields = await server.publish_archive(b"not a tarball", name="broken")
    assert (await download(fields["url"]))[1] == b"not a tarball"


async def test_bad_names_and_unstarted_server() -> None:
    async with ArtifactServer() as server:
        with pytest.raises(ValueError, match="relative path"):
            await server.publish_files(APP, name="../escape")
    with pytest.raises(RuntimeError, match="not started"):
        await ArtifactServer().publish_files(APP, name="x")


async def test_stop_removes_storage_and_is_idempotent() -> None:
    server = ArtifactServer()
    await server.start()
    fields = await server.publish_files(APP, name="app")
    root = server.storage
    assert root is not None
    stored = root / fields["path"]
    assert await asyncio.to_thread(stored.is_file)
    await server.stop()
    await server.stop()
    assert server.storage is None
    assert not await asyncio.to_thread(root.exists)
    with pytest.raises(aiohttp.ClientConnectionError):
        await download(fields["url"])


# --------------------------------------------------------------------------------------------- serving


async def test_head_unknown_paths_and_request_counts(server: ArtifactServer) -> None:
    fields = await server.publish_files(APP, name="app")
    status, body, headers = await download(fields["url"], method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) == fields["size"]
    assert (await download(f"{server.url}/app/unknown.tar.gz"))[0] == 404
    assert server.request_count(fields["path"]) == 1
    assert server.request_count() == 2


async def test_unpublish_makes_the_url_404(server: ArtifactServer) -> None:
    fields = await server.publish_files(APP, name="app")
    server.unpublish(fields["path"])
    assert (await download(fields["url"]))[0] == 404
    with pytest.raises(KeyError):
        server.unpublish(fields["path"])


async def test_fail_counts_down_then_serves(server: ArtifactServer) -> None:
    fields = await server.publish_files(APP, name="app")
    server.fail(fields["path"], status=500, times=2)
    statuses = [(await download(fields["url"]))[0] for _ in range(3)]
    assert statuses == [500, 500, 200]


async def test_fail_for_every_path_until_cleared(server: ArtifactServer) -> None:
    a = await server.publish_files(APP, name="a")
    b = await server.publish_files({"x.yaml": "x: 1\n"}, name="b")
    server.fail(status=404)
    assert [(await download(f["url"]))[0] for f in (a, b, a)] == [404, 404, 404]
    server.clear_faults()
    assert (await download(a["url"]))[0] == 200
    with pytest.raises(ValueError, match="HTTP error"):
        server.fail(status=302)


async def test_exact_path_fault_wins_over_wildcard(server: ArtifactServer) -> None:
    a = await server.publish_files(APP, name="a")
    b = await server.publish_files({"x.yaml": "x: 1\n"}, name="b")
    server.fail(status=503)
    server.fail(a["path"], status=404)
    assert (await download(a["url"]))[0] == 404
    assert (await download(b["url"]))[0] == 503


async def test_corrupt_serves_same_length_wrong_digest(server: ArtifactServer) -> None:
    fields = await server.publish_files(APP, name="app")
    server.corrupt(fields["path"])
    status, body, _ = await download(fields["url"])
    assert status == 200 and len(body) == fields["size"]
    assert f"sha256:{hashlib.sha256(body).hexdigest()}" != fields["digest"]


async def test_delay_waits_on_the_injected_clock() -> None:
    clock = FakeClock()
    async with ArtifactServer(clock=clock) as server:
        fields = await server.publish_files(APP, name="app")
        server.delay(fields["path"], seconds=30)
        pending = asyncio.create_task(download(fields["url"]))
        try:
            while clock.pending_sleepers == 0:
                assert not pending.done(), pending
                await asyncio.sleep(0.01)
            await clock.advance(29)
            assert not pending.done()
            await clock.advance(1)
            status, body, _ = await asyncio.wait_for(pending, 30)
        finally:
            pending.cancel()
        assert status == 200 and hashlib.sha256(body).hexdigest() == fields["digest"].split(":")[1]
        with pytest.raises(ValueError, match="negative"):
            server.delay(seconds=-1)


async def test_the_controller_fetcher_reads_it(server: ArtifactServer, tmp_path: Path) -> None:
    """The contract that matters: what the controller's fetcher accepts and refuses."""
    fields = await server.publish_files(APP, name="app")
    async with aiohttp.ClientSession() as http:
        fetcher = ArtifactFetcher(session=http, clock=FakeClock(), retries=0)
        assert await fetcher.fetch(fields["url"], fields["digest"], tmp_path / "ok.tgz") == fields["size"]
        assert gzip.decompress((tmp_path / "ok.tgz").read_bytes())
        server.corrupt(fields["path"])
        with pytest.raises(DigestError, match="doesn't match"):
            await fetcher.fetch(fields["url"], fields["digest"], tmp_path / "bad.tgz")
        server.clear_faults()
        server.fail(fields["path"], status=500)
        with pytest.raises(DownloadError, match="giving up after 1 attempt"):
            await fetcher.fetch(fields["url"], fields["digest"], tmp_path / "bad.tgz")
        server.unpublish(fields["path"])
        server.clear_faults()
        with pytest.raises(ArtifactNotFoundError):
            await fetcher.fetch(fields["url"], fields["digest"], tmp_path / "gone.tgz")


# ------------------------------------------------------------------------------------- status helpers


def test_replacing_nulls_keys_only_in_the_old_value() -> None:
    old = {"path": "a", "size": 3, "metadata": {"k": "v", "keep": "1"}}
    new = {"path": "b", "metadata": {"keep": "2"}}
    assert _replacing(old, new) == {"path": "b", "size": None, "metadata": {"k": None, "keep": "2"}}
    assert _replacing(None, new) == new


@pytest.mark.parametrize("kind", ["GitRepository", "OCIRepository", "Bucket"])
def test_minimal_specs_are_suspended(kind: str) -> None:
    spec = minimal_spec(kind, namespace="ns", name="n")
    assert spec["suspend"] is True and spec["interval"]


def test_minimal_spec_names_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"^HelmChart/ns/n: not a source kind"):
        minimal_spec("HelmChart", namespace="ns", name="n")


async def test_advertised_host_and_ipv6_urls() -> None:
    async with ArtifactServer(advertise_host="artifacts.test") as server:
        fields = await server.publish_files(APP, name="app")
        assert fields["url"].startswith("http://artifacts.test:")
        port = server.url.rsplit(":", 1)[1]
        assert (await download(f"http://127.0.0.1:{port}/{fields['path']}"))[0] == 200
    with pytest.raises(ValueError, match="advertise_host"):
        ArtifactServer(host="0.0.0.0")
    try:
        server6 = ArtifactServer(host="::1")
        await server6.start()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        assert server6.url.startswith("http://[::1]:")
        fields = await server6.publish_files(APP, name="app")
        assert (await download(fields["url"]))[0] == 200
    finally:
        await server6.stop()


async def test_restart_keeps_the_port_but_not_the_artifacts() -> None:
    server = ArtifactServer()
    await server.start()
    try:
        fields = await server.publish_files(APP, name="app")
        url = server.url
        await server.stop()
        await server.start()
        assert server.url == url
        assert (await download(fields["url"]))[0] == 404
    finally:
        await server.stop()
