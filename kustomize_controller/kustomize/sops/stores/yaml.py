"""YAML store: one branch per document, the ``sops`` block in the first document.

Scalars are resolved the way sops sees them (go-yaml v3 decoding into ``interface{}``), not the
YAML 1.1 way: only ``true``/``false`` (three spellings) are booleans (``yes``/``on`` stay
strings), integers follow Go's ``strconv.ParseInt(s, 0, 64)`` (``0x1F``, ``0o17``, ``0b101``,
and a leading ``0`` means octal), ``08`` falls through to a float as in Go, timestamps stay
strings. This matters for the MAC, which hashes unencrypted values in their decoded form.

Comments are not read here; documents whose metadata selects leaves by comment are re-read by
``yaml_comments.py``. Output is block-style YAML in the input's key order; strings that
YAML 1.1 readers (kustomize) would take for another type are quoted.

Parsing uses libyaml through PyYAML's C loader when available (20-60x faster than pure Python
on multi-megabyte documents).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.tree import Branch, branch_to_mapping, from_plain

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_INT_RE = re.compile(r"^[-+]?(?:0[bB][01]+|0[oO][0-7]+|0[xX][0-9a-fA-F]+|0[0-7]+|[1-9][0-9]*|0)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")


class _GoLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """A safe loader whose implicit types are go-yaml v3's."""


_GoLoader.yaml_implicit_resolvers = {}
_GoLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL_RE, list("tTfF"))
_GoLoader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL_RE, ["~", "n", "N", ""])
_GoLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT_RE, list("-+0123456789"))
_GoLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))


def _go_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    prefix = digits[:2].lower()
    if prefix in ("0x", "0b", "0o"):
        return sign * int(digits[2:], {"0x": 16, "0b": 2, "0o": 8}[prefix])
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits[1:], 8)
    return sign * int(digits)


def _go_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    if text.endswith(".inf"):
        return float("-inf") if text.startswith("-") else float("inf")
    if text == ".nan":
        return float("nan")
    return float(text)


def _plain_string(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_GoLoader.add_constructor("tag:yaml.org,2002:int", _go_int)
_GoLoader.add_constructor("tag:yaml.org,2002:float", _go_float)
_GoLoader.add_constructor("tag:yaml.org,2002:timestamp", _plain_string)


def load(data: bytes) -> list[Branch]:
    try:
        documents = list(yaml.load_all(data, Loader=_GoLoader))
    except (yaml.YAMLError, UnicodeDecodeError, ValueError):
        # The parser error quotes the offending line, which may hold a plaintext.
        raise SopsFormatError("Error unmarshaling input YAML: the document is not valid YAML") from None
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
    docs: list[Any] = [branch_to_mapping(b) for b in branches]
    text = yaml.dump_all(docs, Dumper=_BaseDumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return text.encode("utf-8")
