"""``kustomization.yaml`` generation from an artifact's directory tree and the spec's overlays.

Input: ``<flags>`` then entries ``<name>\\x00<content>`` separated by ``\\x01``. An entry writes the file
``<name>`` (parent directories made as needed) below a fresh root; a name starting with ``@`` makes a
symbolic link ``<name without @>`` to ``<content>`` instead (links out of the root included). A name
leaving the root, or one the file system refuses, is skipped: the tree is what an extracted artifact
could hold. The entry ``.spec.json``, if it is a JSON object, is the Kustomization's spec for the
overlays (``Overlay.from_spec``). Bit 0 of the flags builds the subdirectory ``app`` instead of the root.

Contract: ``render_kustomization`` raises only ``GenerateError`` or ``ConfinementError`` (messages show
paths relative to the root, never the temp directory); a success returns YAML that reads back as the
kustomization it returns.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from kustomize_controller.kustomize.errors import ConfinementError, GenerateError
from kustomize_controller.kustomize.generate import Overlay, render_kustomization
from tests.fuzz.harness import Target, text

_BASE = Path(tempfile.mkdtemp(prefix="fuzz-generate-"))
atexit.register(shutil.rmtree, _BASE, ignore_errors=True)


def _inside(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and ".." not in parts and "\x00" not in name


def _spec(raw: bytes) -> dict[str, object]:
    try:
        spec = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return spec if isinstance(spec, dict) else {}


def one_input(data: bytes) -> None:
    if not data:
        return
    root = _BASE / "root"
    root.mkdir()
    try:
        spec: dict[str, object] = {}
        for entry in data[1:].split(b"\x01"):
            raw_name, _, content = entry.partition(b"\x00")
            name = text(raw_name)
            link = name.startswith("@")
            name = name.removeprefix("@")
            if name == ".spec.json":
                spec = _spec(content)
                continue
            if not _inside(name):
                continue
            path = root / name
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if link:
                    os.symlink(text(content).replace("\x00", ""), path)
                else:
                    path.write_bytes(content)
            except (OSError, ValueError):
                continue  # a name the file system refuses (too long, a file in the way): no such artifact
        directory = root / "app" if data[0] & 1 else root
        if not directory.is_dir():
            directory = root
        try:
            overlay = Overlay.from_spec(spec)
        except (TypeError, AttributeError, ValueError):
            return  # not a spec the API server would accept (the CRD schema types every field)
        try:
            _, kus, rendered = render_kustomization(root, directory, overlay)
        except (GenerateError, ConfinementError) as err:
            assert str(_BASE) not in str(err), str(err)
            return
        assert yaml.safe_load(rendered) == kus
    finally:
        shutil.rmtree(root, ignore_errors=True)


TARGET = Target(
    name="generate",
    one_input=one_input,
    contract="render_kustomization: GenerateError / ConfinementError only, no temp paths in messages",
    max_len=4096,
    dictionary=(b"\x01", b"\x00", b"kustomization.yaml\x00", b"Kustomization\x00", b"app/", b".yaml\x00", b".yml\x00",
                b"@", b"../", b"/etc", b"resources:\n- ", b"apiVersion: v1\n", b"kind: ConfigMap\n",
                b"metadata:\n  name: x\n", b"kind: List\nitems: []\n", b"---\n", b".spec.json\x00",
                b'{"targetNamespace":', b'"images":[{"name":"a","newTag":"1"}]', b'"components":["../c"]',
                b'"patches":[{"patch":"x","target":{"kind":"A"}}]', b'"patchesStrategicMerge":[{"a":1}]',
                b'"buildMetadata":["originAnnotations"]', b"sortOptions:\n  order: legacy\n"),
    seeded_runs=200,
)
