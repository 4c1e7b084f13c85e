"""YAML documents whose sops rules select values by comment (encrypted_comment_regex,
unencrypted_comment_regex) are read with their comments."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import yaml

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsError, SopsUnsupportedError
from kustomize_controller.kustomize.sops.cipher import Comment
from kustomize_controller.kustomize.sops.document import decrypt_bytes
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.stores import yaml_comments
from kustomize_controller.kustomize.sops.tree import Branch, EncryptionRules

from .sopsgen import AgeKey, Recipe, build_metadata, encrypt_branch


def emit(branch: Branch, indent: int = 0) -> list[str]:
    """A tiny YAML writer that keeps comments where sops' store reads them back."""
    pad = " " * indent
    lines: list[str] = []
    inline: list[str] = []
    for key, value in branch:
        if isinstance(key, Comment):
            if key.inline:
                inline.append(key.value)
            else:
                lines.append(f"{pad}#{key.value}")
            continue
        suffix = "".join(f" #{c}" for c in inline)
        inline = []
        if isinstance(value, Branch):
            lines.append(f"{pad}{key}:{suffix}")
            lines.extend(emit(value, indent + 2))
        else:
            lines.append(f"{pad}{key}: {json.dumps(value)}{suffix}")
    return lines


def document(plain: Branch, rules: EncryptionRules, key: AgeKey) -> tuple[bytes, Branch]:
    data_key = os.urandom(32)
    recipe = Recipe(rules=rules, age_recipients=[key.recipient])
    encrypted, mac = encrypt_branch(plain, data_key, recipe)
    meta = build_metadata(data_key, mac, recipe)
    text = "\n".join(emit(encrypted)) + "\n" + yaml.safe_dump({"sops": meta}, sort_keys=False)
    return text.encode(), encrypted


PLAIN = Branch(
    [
        ("apiVersion", "v1"),
        ("kind", "Secret"),
        (
            "stringData",
            Branch(
                [
                    (Comment(" sops:enc"), None),
                    ("password", "hunter2"),
                    ("user", "admin"),
                    (Comment(" sops:enc", inline=True), None),
                    ("token", "t0k3n"),
                ]
            ),
        ),
        (Comment(" sops:enc"), None),
        ("top", "also-secret"),
        ("plain", "visible"),
    ]
)
EXPECTED = {
    "apiVersion": "v1",
    "kind": "Secret",
    "stringData": {"password": "hunter2", "user": "admin", "token": "t0k3n"},
    "top": "also-secret",
    "plain": "visible",
}


def test_encrypted_comment_regex() -> None:
    key = AgeKey.generate()
    data, _ = document(PLAIN, EncryptionRules(encrypted_comment_regex="sops:enc"), key)
    text = data.decode()
    assert "hunter2" not in text and "also-secret" not in text and "t0k3n" not in text
    assert 'user: "admin"' in text and 'plain: "visible"' in text
    ring = KeyRing.from_secret_data(key.secret_data)
    assert yaml.safe_load(decrypt_bytes(data, Format.YAML, Format.YAML, keyring=ring)) == EXPECTED


def test_unencrypted_comment_regex() -> None:
    key = AgeKey.generate()
    plain = Branch([("a", "secret"), (Comment(" clear"), None), ("b", "shown"), ("c", "secret2")])
    data, _ = document(plain, EncryptionRules(unencrypted_comment_regex="clear"), key)
    assert b'b: "shown"' in data and b"secret2" not in data
    ring = KeyRing.from_secret_data(key.secret_data)
    assert yaml.safe_load(decrypt_bytes(data, Format.YAML, Format.YAML, keyring=ring)) == {
        "a": "secret",
        "b": "shown",
        "c": "secret2",
    }


def test_encrypted_comments_are_decrypted_after_a_marker() -> None:
    key = AgeKey.generate()
    plain = Branch([(Comment(" sops:enc"), None), (Comment(" a secret note"), None), ("k", "v")])
    data, _ = document(plain, EncryptionRules(encrypted_comment_regex="sops:enc"), key)
    assert b"a secret note" not in data and b"#ENC[AES256_GCM" in data
    first = yaml_comments.load(data)[0]
    assert first[0] == (Comment(" sops:enc"), None)
    assert isinstance(first[1][0], Comment) and first[1][0].value.startswith("ENC[AES256_GCM")
    ring = KeyRing.from_secret_data(key.secret_data)
    assert yaml.safe_load(decrypt_bytes(data, Format.YAML, Format.YAML, keyring=ring)) == {"k": "v"}


def test_comment_placement() -> None:
    text = b"""# top
a: 1 # inline a
b:
  # before c
  c: "x # not a comment"
  d: |
    block # not
e:
  - 1 # inline item
  # before item 2
  - 2
# end
"""
    (branch,) = yaml_comments.load(text)
    assert list(branch) == [
        (Comment(" top"), None),
        (Comment(" inline a", inline=True), None),
        ("a", 1),
        ("b", Branch([(Comment(" before c"), None), ("c", "x # not a comment"), ("d", "block # not\n")])),
        ("e", [Comment(" inline item", inline=True), 1, Comment(" before item 2"), 2]),
        (Comment(" end"), None),
    ]


def test_wrongly_attributed_comment_fails_loudly() -> None:
    # The marker sits where our reader attaches it to 'other' while the value it was meant for
    # ('secret') was encrypted: the walk refuses the leftover ENC value instead of passing it on.
    key = AgeKey.generate()
    data, _ = document(
        Branch([(Comment(" sops:enc"), None), ("secret", "s"), ("other", "o")]),
        EncryptionRules(encrypted_comment_regex="sops:enc"),
        key,
    )
    moved = data.replace(b"# sops:enc\n", b"", 1).replace(b'other: "o"', b'# sops:enc\nother: "o"', 1)
    ring = KeyRing.from_secret_data(key.secret_data)
    with pytest.raises(SopsError, match="the value at 'secret:' is encrypted but the document's rules say"):
        decrypt_bytes(moved, Format.YAML, Format.YAML, keyring=ring, verify_mac=False)


def test_built_objects_with_comment_rules_are_refused() -> None:
    key = AgeKey.generate()
    data, _ = document(PLAIN, EncryptionRules(encrypted_comment_regex="sops:enc"), key)
    obj: dict[str, Any] = yaml.safe_load(data)
    with SopsDecryptor.from_secret_data(key.secret_data) as dec, pytest.raises(SopsUnsupportedError) as info:
        dec.decrypt_object(obj)
    assert "not supported: encrypted_comment_regex/unencrypted_comment_regex in an already built object" in str(
        info.value
    )


# Inputs and expected trees from sops' own YAML store tests (stores/yaml/store_test.go).
SOPS_CASES = [
    (
        b"---\n# comment 0\nkey1: value\nkey1_a: value\n# ^ comment 1\n---\nkey2: value2",
        [
            Branch(
                [
                    (Comment(" comment 0"), None),
                    ("key1", "value"),
                    ("key1_a", "value"),
                    (Comment(" ^ comment 1"), None),
                ]
            ),
            Branch([("key2", "value2")]),
        ],
    ),
    (
        b"a:\n    - a\n    # I no longer get duplicated\n    - {}\n",
        [Branch([("a", ["a", Comment(" I no longer get duplicated"), Branch()])])],
    ),
    (
        b"a:\n    b:\n        c: d\n    # comment\n\ne:\n    - f\n",
        [
            Branch(
                [
                    ("a", Branch([("b", Branch([("c", "d")])), (Comment(" comment"), None)])),
                    ("e", ["f"]),
                ]
            )
        ],
    ),
    (b"a:\n    # foo\n    b: null\n", [Branch([("a", Branch([(Comment(" foo"), None), ("b", None)]))])]),
    (
        b"# test\na:\n    b: null\n    # foo\n",
        [Branch([(Comment(" test"), None), ("a", Branch([("b", None), (Comment(" foo"), None)]))])],
    ),
]


@pytest.mark.parametrize(("text", "expected"), SOPS_CASES)
def test_placement_matches_sops_store_tests(text: bytes, expected: list[Branch]) -> None:
    assert yaml_comments.load(text) == expected


def test_hashes_that_are_not_comments() -> None:
    (branch,) = yaml_comments.load(b"a: 'x # y'\nb: c#d # real # still the same comment\nc: [1, 2] # flow\n")
    assert list(branch) == [
        ("a", "x # y"),
        (Comment(" real # still the same comment", inline=True), None),
        ("b", "c#d"),
        (Comment(" flow", inline=True), None),
        ("c", [1, 2]),
    ]


def test_inline_comment_in_a_list_of_mappings_goes_before_the_key() -> None:
    (branch,) = yaml_comments.load(b"items:\n  - name: x # c\n    value: y\n")
    assert list(branch) == [
        ("items", [Branch([(Comment(" c", inline=True), None), ("name", "x"), ("value", "y")])]),
    ]
