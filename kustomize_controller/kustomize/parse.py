"""Decoding the builder's output into objects, keeping each object's own YAML text.

Contract:

- The output is split into documents on ``---`` lines (kustomize's separator; block scalars of a
  document are indented so they never contain one) and each document is decoded with PyYAML's C
  loader (libyaml). Empty documents are dropped; order is kept.
- Every object must be a mapping with non-empty string ``apiVersion``, ``kind`` and
  ``metadata.name``, else :class:`ManifestParseError` "failed to decode Kubernetes apiVersion,
  kind and name from: <document>" (upstream's message). Undecodable YAML is a
  :class:`ManifestParseError` too.
- Each :class:`Document` keeps its text — the builder's serialisation — because post-build
  substitution runs over exactly that text, as upstream does over kyaml's output (quoting in the
  source therefore decides the substituted value's type).
- :func:`render` joins documents back; :func:`digest` is ``sha256:<hex>`` of that rendering.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from kustomize_controller.kustomize.errors import ManifestParseError

_SEPARATOR = re.compile(r"^---[ \t]*$", re.MULTILINE)


@dataclass(slots=True)
class Document:
    text: str
    obj: dict[str, Any]


def dump_object(obj: dict[str, Any]) -> str:
    """YAML for an object we changed (block style, key order kept, no line folding)."""
    return yaml.dump(
        obj,
        Dumper=yaml.CSafeDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )


def _validate(obj: Any, text: str) -> dict[str, Any]:
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if all(isinstance(v, str) and v for v in (obj.get("apiVersion"), obj.get("kind"), name)):
            return obj
    raise ManifestParseError(f"failed to decode Kubernetes apiVersion, kind and name from: {text.strip()}")


def parse_documents(output: bytes | str) -> list[Document]:
    text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
    documents: list[Document] = []
    for chunk in _SEPARATOR.split(text):
        if not chunk.strip():
            continue
        try:
            obj = yaml.load(chunk, Loader=yaml.CSafeLoader)
        except yaml.YAMLError as err:
            raise ManifestParseError(f"failed to decode the build output: {err}") from err
        if obj is None:
            continue
        body = chunk.lstrip("\n")
        documents.append(Document(text=body if body.endswith("\n") else body + "\n", obj=_validate(obj, chunk)))
    return documents


def render(documents: Iterable[Document]) -> str:
    return "---\n".join(d.text for d in documents)


def digest(rendered: str) -> str:
    return "sha256:" + hashlib.sha256(rendered.encode()).hexdigest()
