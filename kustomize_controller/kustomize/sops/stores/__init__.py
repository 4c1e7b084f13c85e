"""The five SOPS stores behind one interface: load an encrypted file, emit a plain one.

``load_encrypted(data, fmt)`` returns ``(branches, metadata_mapping)`` with the ``sops`` block
removed from every branch (it is read from the first one only; a second one there is an
error). dotenv keeps its metadata as ``sops_*`` keys, INI in a ``[sops]`` section, both
flattened; they are un-flattened here. ``emit_plain(branches, fmt)`` writes the decrypted
branches back in ``fmt``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kustomize_controller.kustomize.sops.cipher import Comment
from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.stores import dotenv, ini, json, yaml
from kustomize_controller.kustomize.sops.stores import yaml_comments as yaml_comments_store
from kustomize_controller.kustomize.sops.stores.flatten import unflatten
from kustomize_controller.kustomize.sops.tree import Branch, branch_to_mapping

SOPS_KEY = "sops"
_SOPS_PREFIX = "sops_"

_LOADERS: dict[Format, Callable[[bytes], list[Branch]]] = {
    Format.BINARY: json.load,
    Format.JSON: json.load,
    Format.YAML: yaml.load,
    Format.DOTENV: dotenv.load,
    Format.INI: ini.load,
}

_EMITTERS: dict[Format, Callable[[list[Branch]], bytes]] = {
    Format.BINARY: json.emit_binary,
    Format.JSON: json.emit,
    Format.YAML: yaml.emit,
    Format.DOTENV: dotenv.emit,
    Format.INI: ini.emit,
}


def extract_nested_metadata(branches: list[Branch]) -> tuple[list[Branch], dict[str, Any]]:
    """Take the ``sops`` mapping out of the first branch (and drop it from the others)."""
    metadata: Branch | None = None
    out: list[Branch] = []
    for index, branch in enumerate(branches):
        kept = Branch()
        for key, value in branch:
            if key != SOPS_KEY:
                kept.append((key, value))
                continue
            if index == 0:
                if metadata is not None:
                    raise SopsFormatError("Found duplicate sops entry")
                if not isinstance(value, Branch):
                    raise SopsFormatError("Found sops entry that is not a mapping")
                metadata = value
        out.append(kept)
    if metadata is None:
        raise SopsFormatError("sops metadata not found")
    return out, branch_to_mapping(metadata)


def _extract_dotenv(branches: list[Branch]) -> tuple[list[Branch], dict[str, Any]]:
    first = branches[0] if branches else Branch()
    kept, flat = Branch(), []
    for key, value in first:
        if isinstance(key, str) and key.startswith(_SOPS_PREFIX):
            flat.append((key[len(_SOPS_PREFIX) :], value))
        else:
            kept.append((key, value))
    if not flat:
        raise SopsFormatError("sops metadata not found")
    return [kept, *branches[1:]], unflatten(flat)


def _extract_ini(branches: list[Branch]) -> tuple[list[Branch], dict[str, Any]]:
    out, section = extract_nested_metadata(branches)
    flat = [(k, v.replace("\\n", "\n") if isinstance(v, str) else v) for k, v in section.items()]
    return out, unflatten(flat)


def load_encrypted(data: bytes, fmt: Format, *, yaml_comments: bool = False) -> tuple[list[Branch], dict[str, Any]]:
    """``yaml_comments``: read YAML comments too (slower; only comment-regex rules need them)."""
    branches = yaml_comments_store.load(data) if yaml_comments and fmt is Format.YAML else _LOADERS[fmt](data)
    if fmt is Format.DOTENV:
        return _extract_dotenv(branches)
    if fmt is Format.INI:
        return _extract_ini(branches)
    return extract_nested_metadata(branches)


def emit_plain(branches: list[Branch], fmt: Format) -> bytes:
    return _EMITTERS[fmt](branches)


__all__ = ["SOPS_KEY", "Comment", "emit_plain", "extract_nested_metadata", "load_encrypted"]
