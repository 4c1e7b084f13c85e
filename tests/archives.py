"""Gzip tarballs for tests, hostile ones included (``kustomize_controller.testing.artifacts.pack_files``
refuses what these tests need: ``..`` paths, links, devices)."""

from __future__ import annotations

import io
import tarfile


def targz(files: dict[str, bytes | tuple[bytes, str]]) -> bytes:
    """Members in order, no parent directories: bytes = a regular file; (type, linkname) = a special entry."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, spec in files.items():
            info = tarfile.TarInfo(name)
            if isinstance(spec, tuple):
                info.type, info.linkname = spec
                tar.addfile(info)
            else:
                info.size = len(spec)
                tar.addfile(info, io.BytesIO(spec))
    return buf.getvalue()
