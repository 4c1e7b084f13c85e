"""Un-flattening of the ``sops`` metadata that dotenv and INI files store as flat keys.

``age__list_0__map_enc`` means ``{"age": [{"enc": …}]}``: ``__map_<key>`` descends into a
mapping, ``__list_<n>`` into a list. List entries are placed by index; gaps are an error.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from kustomize_controller.kustomize.sops.errors import SopsFormatError

_TOKEN_RE = re.compile(r"__(map|list)_")


def _tokens(path: str) -> list[str | int]:
    tokens: list[str | int] = []
    parts = _TOKEN_RE.split(path)
    tokens.append(parts[0])
    for kind, value in zip(parts[1::2], parts[2::2], strict=True):
        if kind == "map":
            tokens.append(value)
        else:
            try:
                tokens.append(int(value))
            except ValueError:
                raise SopsFormatError(f"invalid list index in sops metadata key '{path}'") from None
    return tokens


def _finish(node: Any) -> Any:
    if isinstance(node, dict) and node.get(_LIST_MARK):
        del node[_LIST_MARK]
        indexes = sorted(node)
        if indexes != list(range(len(indexes))):
            raise SopsFormatError("sops metadata list has missing entries")
        return [_finish(node[i]) for i in indexes]
    if isinstance(node, dict):
        return {k: _finish(v) for k, v in node.items()}
    return node


_LIST_MARK = object()


def unflatten(items: list[tuple[str, Any]]) -> dict[str, Any]:
    root: dict[Any, Any] = {}
    for path, value in items:
        tokens = _tokens(path)
        node = root
        for token, following in itertools.pairwise(tokens):
            child = node.get(token)
            if child is None:
                child = {_LIST_MARK: True} if isinstance(following, int) else {}
                node[token] = child
            if not isinstance(child, dict):
                raise SopsFormatError(f"conflicting sops metadata key '{path}'")
            node = child
        node[tokens[-1]] = value
    result = _finish(root)
    assert isinstance(result, dict)
    return result
