"""Safe extraction (tar attacks and limits) and the temp workspace."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kustomize_controller.kustomize.errors import ExtractError
from kustomize_controller.kustomize.extract import Workspace, extract_tarball


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def entry(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for k, v in attrs.items():
        setattr(info, k, v)
    return info


def snapshot(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    dest = tmp_path / "sandbox" / "dest"
    dest.mkdir(parents=True)
    return tmp_path, dest


def test_regular_files_and_dirs_are_extracted(dirs: tuple[Path, Path]) -> None:
    tmp, dest = dirs
    archive = make_tar(
        tmp / "a.tgz",
        [
            (entry("./app", tarfile.DIRTYPE), None),
            (entry("./app/cm.yaml"), b"kind: ConfigMap\n"),
            (entry("deep/nested/run.sh", mode=0o755), b"#!/bin/sh\n"),
        ],
    )
    assert extract_tarball(archive, dest) == 2
    assert (dest / "app" / "cm.yaml").read_bytes() == b"kind: ConfigMap\n"
    assert os.stat(dest / "deep" / "nested" / "run.sh").st_mode & 0o111


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../escape.yaml", "illegal path in archive: '../escape.yaml'"),
        ("app/../../escape.yaml", "illegal path in archive"),
        ("/etc/cron.d/evil", "absolute path in archive: '/etc/cron.d/evil'"),
        ("C:\\evil", "absolute path in archive"),
    ],
)
def test_escaping_names_are_refused(dirs: tuple[Path, Path], name: str, message: str) -> None:
    tmp, dest = dirs
    before = snapshot(tmp)
    archive = make_tar(tmp / "a.tgz", [(entry(name), b"evil")])
    before.add("a.tgz")
    with pytest.raises(ExtractError, match=message.replace("\\", "\\\\")):
        extract_tarball(archive, dest)
    assert snapshot(tmp) == before


def test_symlinks_and_hardlinks_are_skipped(dirs: tuple[Path, Path]) -> None:
    tmp, dest = dirs
    archive = make_tar(
        tmp / "a.tgz",
        [
            (entry("link", tarfile.SYMTYPE, linkname="/etc"), None),
            (entry("hard", tarfile.LNKTYPE, linkname="/etc/passwd"), None),
            (entry("link/passwd"), b"overwrite through the link"),
            (entry("ok.yaml"), b"ok"),
        ],
    )
    extract_tarball(archive, dest)
    assert not (dest / "link").is_symlink()
    assert not (dest / "hard").exists()
    assert (dest / "link" / "passwd").read_bytes() == b"overwrite through the link"  # a plain dir now
    assert (dest / "ok.yaml").exists()


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_devices_and_fifos_are_refused(dirs: tuple[Path, Path], kind: bytes) -> None:
    tmp, dest = dirs
    archive = make_tar(tmp / "a.tgz", [(entry("dev", kind), None)])
    with pytest.raises(ExtractError, match="device or fifo entry in archive: 'dev'"):
        extract_tarball(archive, dest)


def test_gzip_bomb_stops_at_the_byte_limit(dirs: tuple[Path, Path]) -> None:
    # 16 files of 4 MiB, each within the limit: the total is stopped while streaming
    tmp, dest = dirs
    size, count = 4 << 20, 16
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:

        class Zeros:
            left = size

            def read(self, n: int = -1) -> bytes:
                n = self.left if n < 0 else min(n, self.left)
                self.left -= n
                return bytes(n)

        for i in range(count):
            info = entry(f"zeros{i}.bin")
            info.size = size
            tar.addfile(info, Zeros())
    archive = tmp / "bomb.tgz"
    archive.write_bytes(raw.getvalue())
    assert archive.stat().st_size < size * count // 100
    with pytest.raises(ExtractError, match="extracted size exceeds the limit of 8388608 bytes"):
        extract_tarball(archive, dest, max_bytes=8 << 20)
    assert sum(p.stat().st_size for p in dest.iterdir()) <= 8 << 20


def test_entry_count_limit(dirs: tuple[Path, Path]) -> None:
    tmp, dest = dirs
    archive = make_tar(tmp / "a.tgz", [(entry(f"f{i}"), b"x") for i in range(20)])
    with pytest.raises(ExtractError, match="more than 10 entries"):
        extract_tarball(archive, dest, max_entries=10)


@pytest.mark.parametrize(
    "content",
    [b"not a gzip at all", gzip.compress(b"not a tar" * 100, mtime=0),
     b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\x03",  # found by fuzzing: FEXTRA flag, header cut (TypeError)
     gzip.compress(bytes(10240), mtime=0)[:-12]],
    ids=["not-gzip", "gzip-not-tar", "truncated-gzip-header", "truncated-gzip"],
)
def test_corrupt_archives_are_errors(dirs: tuple[Path, Path], content: bytes) -> None:
    tmp, dest = dirs
    (tmp / "bad.tgz").write_bytes(content)
    with pytest.raises(ExtractError, match="failed to extract archive"):
        extract_tarball(tmp / "bad.tgz", dest)


def test_file_over_directory_is_an_error(dirs: tuple[Path, Path]) -> None:
    tmp, dest = dirs
    archive = make_tar(tmp / "a.tgz", [(entry("a"), b"file"), (entry("a/b"), b"under a file")])
    with pytest.raises(ExtractError):
        extract_tarball(archive, dest)


async def test_workspace_tempdir_is_removed_even_on_error(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(RuntimeError):
        async with ws.tempdir() as d:
            (d / "file").write_text("x")
            assert d.name.startswith(f"kustomization-{os.getpid()}-")
            raise RuntimeError("boom")
    assert list((tmp_path / "ws").iterdir()) == []


def test_sweep_removes_only_dirs_of_dead_processes(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    mine = ws.create()
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, check=True, text=True).stdout.strip()
    dead = tmp_path / "ws" / f"kustomization-{dead_pid}-abc"
    dead.mkdir()
    (dead / "leftover").write_text("x")
    alive = tmp_path / "ws" / "kustomization-1-abc"  # pid 1 is always alive
    alive.mkdir()
    unrelated = tmp_path / "ws" / "something-else"
    unrelated.mkdir()
    assert ws.sweep() == [dead]
    assert mine.exists() and alive.exists() and unrelated.exists() and not dead.exists()


def test_sweep_removes_dirs_of_an_earlier_process_with_the_same_pid(tmp_path: Path) -> None:
    """In a container the controller is always pid 1: a crashed run's directories carry its start time."""
    ws = Workspace(tmp_path / "ws")
    mine = ws.create()
    started = mine.name.split("-")[2]
    assert started.isdigit()
    earlier = tmp_path / "ws" / f"kustomization-{os.getpid()}-{int(started) - 1}-abc"
    earlier.mkdir()
    assert ws.sweep() == [earlier]
    assert mine.exists()


async def test_workspace_recreates_its_base_when_a_cleaner_removed_it(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    async with ws.tempdir() as first:
        assert first.parent == (tmp_path / "ws").resolve()
    shutil.rmtree(tmp_path / "ws")
    async with ws.tempdir() as second:
        assert second.is_dir() and second.parent == (tmp_path / "ws").resolve()
    assert list((tmp_path / "ws").iterdir()) == []


# --- what fuzzing found (docs/testing.md, "Fuzzing"): hostile headers get an ExtractError, in bounded time


def raw_tar(path: Path, blocks: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """Headers written as given (GNU format: base-256 sizes), each followed by its data padded to 512 bytes;
    ``info.size`` is left as set, so it may promise more data than follows."""
    raw = io.BytesIO()
    for info, data in blocks:
        raw.write(info.tobuf(format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape"))
        raw.write(data + bytes(-len(data) % 512))
    raw.write(bytes(1024))
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=1, mtime=0))
    return path


def special(kind: bytes, data: bytes, name: str = "././@PaxHeader") -> tuple[tarfile.TarInfo, bytes]:
    return entry(name, kind, size=len(data)), data


def test_nul_in_a_name_is_refused(dirs: tuple[Path, Path]) -> None:
    tmp, dest = dirs
    archive = raw_tar(tmp / "a.tgz", [special(tarfile.XHDTYPE, b"14 path=a\x00b/c\n"), (entry("x", size=1), b"x")])
    with pytest.raises(ExtractError, match="illegal path in archive"):
        extract_tarball(archive, dest)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE, tarfile.XGLTYPE])
def test_an_oversized_extended_header_is_refused_before_it_is_read(dirs: tuple[Path, Path], kind: bytes) -> None:
    tmp, dest = dirs
    archive = raw_tar(tmp / "a.tgz", [special(kind, b"a" * (2 << 20)), (entry("x", size=1), b"x")])
    with pytest.raises(ExtractError, match=r"extended header of 2097152 bytes exceeds the limit of 1048576 bytes"):
        extract_tarball(archive, dest)


@pytest.mark.timeout(30)
def test_a_pax_header_of_digits_is_refused_in_linear_time(dirs: tuple[Path, Path]) -> None:
    # Python < 3.11.10 searches it for "hdrcharset" with a quadratic regular expression (CVE-2024-6232):
    # 64 KiB took 6 s, 1 MiB hours
    tmp, dest = dirs
    archive = raw_tar(tmp / "a.tgz", [special(tarfile.XHDTYPE, b"1" * (1 << 20)), (entry("x", size=1), b"x")])
    with pytest.raises(ExtractError, match="invalid pax header"):
        extract_tarball(archive, dest)


def test_a_chain_of_extended_headers_is_refused(dirs: tuple[Path, Path]) -> None:
    tmp, dest = dirs
    chain = [special(tarfile.XHDTYPE, b"12 path=a/b\n") for _ in range(2000)]
    archive = raw_tar(tmp / "a.tgz", [*chain, (entry("x", size=1), b"x")])
    with pytest.raises(ExtractError, match="more than 16 extended headers before one entry"):
        extract_tarball(archive, dest)


@pytest.mark.parametrize(
    "blocks",
    [
        [special(tarfile.XHDTYPE, b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n"), (entry("s", size=512), b"x\n")],
        [special(tarfile.XHDTYPE, b"24 GNU.sparse.map=a,b,c\n"), (entry("s", size=1), b"x")],
        [special(tarfile.XHDTYPE, b"21 GNU.sparse.size=z\n"), (entry("s", size=1), b"x")],
        [(entry("s", tarfile.GNUTYPE_SPARSE, size=1), b"x")],
    ],
    ids=["pax-1.0", "pax-0.1", "pax-0.0", "gnu"],
)
def test_sparse_entries_are_refused(dirs: tuple[Path, Path], blocks: list[tuple[tarfile.TarInfo, bytes]]) -> None:
    tmp, dest = dirs
    with pytest.raises(ExtractError, match="sparse file in archive"):
        extract_tarball(raw_tar(tmp / "a.tgz", blocks), dest)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", [b"Z", tarfile.REGTYPE])
def test_a_huge_declared_size_is_refused_without_reading(dirs: tuple[Path, Path], kind: bytes) -> None:
    # an unknown type's data is skipped by reading it: 2**70 bytes promised by a 100-byte archive was a hang
    tmp, dest = dirs
    archive = raw_tar(tmp / "a.tgz", [(entry("big", kind, size=1 << 70), b"")])
    with pytest.raises(ExtractError, match=r"exceeds the limit of \d+ bytes \(entry 'big' declares 1180591620717"):
        extract_tarball(archive, dest)


def test_skipped_data_counts_towards_the_byte_limit(dirs: tuple[Path, Path]) -> None:
    # data nobody writes still has to be inflated: a gzip bomb of skipped entries is bounded too
    tmp, dest = dirs
    blocks = [(entry(f"u{i}", b"Z", size=600 << 10), bytes(600 << 10)) for i in range(4)]
    with pytest.raises(ExtractError, match="extracted size exceeds the limit of 2097152 bytes"):
        extract_tarball(raw_tar(tmp / "a.tgz", blocks), dest, max_bytes=2 << 20)


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu"])
def test_long_and_non_ascii_names_are_extracted(dirs: tuple[Path, Path], fmt: int) -> None:
    # what our own pax parser and the header bounds must keep working: Go's writer uses pax for these
    tmp, dest = dirs
    long_name = "d" * 120 + "/ünïcode-" + "n" * 150 + ".yaml"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", format=fmt) as tar:
        for name, data in ((long_name, b"a: 1\n"), ("plain.yaml", b"b: 2\n")):
            info = entry(name, size=len(data), mtime=1700000000.5, pax_headers={"comment": "x" * 600})
            tar.addfile(info, io.BytesIO(data))
    (tmp / "a.tgz").write_bytes(raw.getvalue())
    assert extract_tarball(tmp / "a.tgz", dest) == 2
    assert (dest / long_name).read_bytes() == b"a: 1\n"
    assert (dest / "plain.yaml").read_bytes() == b"b: 2\n"
