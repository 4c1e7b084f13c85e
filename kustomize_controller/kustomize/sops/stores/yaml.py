"""YAML store: one branch per document, the ``sops`` block in the first document.

Values are read as sops reads them with go-yaml v3 into ``interface{}``: YAML 1.2 core schema
(``yes``/``no`` stay strings) and timestamps stay strings. Comments are not read, so a document
whose metadata selects leaves by comment (``encrypted_comment_regex``,
``unencrypted_comment_regex``) is refused by ``document.py`` rather than half-decrypted.
Output is block-style YAML in the input's key order.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import YAMLError

from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.tree import Branch, branch_to_mapping, from_plain


class _Constructor(SafeConstructor):
    pass


_Constructor.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_str)


def _loader() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.Constructor = _Constructor
    return yaml


def load(data: bytes) -> list[Branch]:
    try:
        documents = list(_loader().load_all(data.decode("utf-8")))
    except (YAMLError, UnicodeDecodeError) as err:
        # The parser error quotes the offending line, which may hold a plaintext.
        raise SopsFormatError(f"Error unmarshaling input YAML: {type(err).__name__}") from None
    branches: list[Branch] = []
    for doc in documents:
        if doc is None:
            branches.append(Branch())
        elif isinstance(doc, dict):
            branches.append(from_plain(doc))
        elif isinstance(doc, list):
            raise SopsFormatError("Error unmarshaling input YAML: YAML documents that are sequences are not supported")
        else:
            raise SopsFormatError("Error unmarshaling input YAML: YAML documents that are values are not supported")
    return branches


def emit(branches: list[Branch]) -> bytes:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    docs: list[Any] = [branch_to_mapping(b) for b in branches]
    yaml.dump_all(docs, out)
    return out.getvalue().encode("utf-8")
