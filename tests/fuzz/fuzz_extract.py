"""Artifact extraction and verification: a downloaded tarball, its digest, the server's ``Retry-After``.

Input: the first byte picks the mode, the rest is the payload.

- ``mode % 4 == 0``: the payload is an *uncompressed* tar stream, gzipped here (mutating a gzip stream
  directly mostly breaks its CRC, so the fuzzer works on the tar layer) and handed to
  ``extract_tarball``;
- ``1``: the payload is handed as is (the gzip layer itself);
- ``2``: the payload is a digest string for ``Digest.parse``;
- ``3``: the payload is a ``Retry-After`` header value for ``retry_after_seconds``.

Contract: ``extract_tarball`` raises only ``ExtractError``; after a success every entry under the
destination is a regular file or a directory, nothing was written beside it, and the bytes written
are within ``max_bytes``. ``Digest.parse`` raises only ``DigestError``; ``retry_after_seconds`` never
raises.
"""

from __future__ import annotations

import atexit
import gzip
import io
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path

from kustomize_controller.kustomize.errors import DigestError, ExtractError
from kustomize_controller.kustomize.extract import extract_tarball
from kustomize_controller.kustomize.fetch import Digest, retry_after_seconds
from tests.fuzz.harness import Target, text

MAX_BYTES = 1 << 20
MAX_ENTRIES = 1000
_BASE = Path(tempfile.mkdtemp(prefix="fuzz-extract-"))
atexit.register(shutil.rmtree, _BASE, ignore_errors=True)


def _check_tree(dest: Path) -> None:
    total = 0
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in [*dirnames, *filenames]:
            mode = os.lstat(os.path.join(dirpath, name)).st_mode
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode), f"{name!r} is neither a file nor a directory"
            if stat.S_ISREG(mode):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    assert total <= MAX_BYTES, f"{total} bytes extracted, limit {MAX_BYTES}"
    assert sorted(os.listdir(_BASE)) == ["a.tgz", "d"], f"written beside the destination: {os.listdir(_BASE)}"


def _extract(payload: bytes) -> None:
    archive, dest = _BASE / "a.tgz", _BASE / "d"
    archive.write_bytes(payload)
    dest.mkdir()
    try:
        try:
            extract_tarball(archive, dest, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES)
        except ExtractError as err:
            assert str(err).startswith("failed to extract archive: "), str(err)
            return
        _check_tree(dest)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
        for entry in os.listdir(_BASE):  # an escape would leave something here: remove it for the next input
            if entry not in ("a.tgz", "d"):
                path = _BASE / entry
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, payload = data[0] % 4, data[1:]
    if mode == 0:
        _extract(gzip.compress(payload, compresslevel=1, mtime=0))
    elif mode == 1:
        _extract(payload)
    elif mode == 2:
        try:
            digest = Digest.parse(text(payload))
        except DigestError:
            return
        assert digest.algorithm in ("sha256", "sha512")
    else:
        seconds = retry_after_seconds(text(payload))
        assert seconds is None or seconds >= 0


def _tar(members: list[tuple[tarfile.TarInfo, bytes]], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for info, content in members:
            info.size = len(content) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(content) if info.isreg() else None)
    return buf.getvalue()


def _info(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def _seeds() -> list[bytes]:
    # built here rather than committed: a tar stream is mostly zero padding
    long = "deep/" * 30 + "name.yaml"
    yaml_doc = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
    return [
        b"\x00" + _tar([(_info("k/"), b""), (_info("k/kustomization.yaml"), b"resources: []\n")]),
        b"\x00" + _tar([(_info(long), yaml_doc), (_info("l", tarfile.SYMTYPE, linkname="../../etc"), b"")]),
        b"\x00" + _tar([(_info("a.yaml"), yaml_doc), (_info("h", tarfile.LNKTYPE, linkname="a.yaml"), b"")],
                       fmt=tarfile.GNU_FORMAT),
        b"\x00" + _tar([(_info("x", pax_headers={"path": "p/q", "comment": "c" * 40}), b"data")]),
        b"\x00" + _tar([(_info("f", tarfile.FIFOTYPE), b""), (_info("../up"), b"x")], fmt=tarfile.USTAR_FORMAT),
        b"\x01" + gzip.compress(_tar([(_info("z"), b"z" * 2000)]), mtime=0),
        b"\x02sha256:" + b"0" * 64,
        b"\x02sha512:" + b"f" * 128,
        b"\x0330",
    ]


TARGET = Target(
    name="extract",
    one_input=one_input,
    contract="extract_tarball: ExtractError only; Digest.parse: DigestError only; retry_after_seconds: nothing",
    max_len=16384,
    seeds=_seeds,
    dictionary=(b"ustar\x00", b"ustar  \x00", b"././@LongLink", b"././@PaxHeader", b"GNU.sparse.",
                b"GNU.sparse.major=1", b"GNU.sparse.map=", b"hdrcharset=BINARY", b" path=", b" size=",
                b" linkpath=", b"../", b"/", b"\x1f\x8b\x08\x00", b"sha256:", b"sha512:"),
    seeded_runs=400,
)
