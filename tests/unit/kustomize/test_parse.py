"""Decoding builder output: document split, validation, digest."""

from __future__ import annotations

import pytest

from kustomize_controller.kustomize.errors import ManifestParseError
from kustomize_controller.kustomize.parse import digest, dump_object, parse_documents, render

TWO = """apiVersion: v1
kind: ConfigMap
metadata:
  name: a
data:
  script: |
    echo one
    --- not a separator, indented
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
"""


def test_split_keeps_order_text_and_block_scalars() -> None:
    docs = parse_documents(TWO.encode())
    assert [d.obj["metadata"]["name"] for d in docs] == ["a", "b"]
    assert docs[0].obj["data"]["script"] == "echo one\n--- not a separator, indented\n"
    assert render(docs) == TWO


def test_empty_documents_are_dropped() -> None:
    assert parse_documents("---\n\n---\n") == []
    assert len(parse_documents("---\n" + TWO + "---\n")) == 2


@pytest.mark.parametrize(
    "doc",
    [
        "kind: ConfigMap\nmetadata: {name: a}\n",
        "apiVersion: v1\nmetadata: {name: a}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 5}\n",
        "- just\n- a list\n",
    ],
)
def test_objects_need_api_version_kind_and_name(doc: str) -> None:
    with pytest.raises(ManifestParseError) as err:
        parse_documents(doc)
    assert str(err.value) == f"failed to decode Kubernetes apiVersion, kind and name from: {doc.strip()}"


def test_invalid_yaml() -> None:
    with pytest.raises(ManifestParseError, match="failed to decode the build output"):
        parse_documents("a: [unclosed\n")


def test_digest_is_sha256_of_rendering() -> None:
    assert digest("") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_dump_object_round_trips_and_keeps_key_order() -> None:
    obj = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "ü"}, "data": {"long": "x" * 300}}
    text = dump_object(obj)
    assert text.startswith("kind: ConfigMap\napiVersion: v1\n")
    assert parse_documents(text)[0].obj == obj
