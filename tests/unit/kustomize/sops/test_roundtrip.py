"""Property: any tree encrypted the sops way decrypts back to itself, with a matching MAC, in
every store that can hold it."""

from __future__ import annotations

import json
import os

import pyrage
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kustomize_controller.kustomize.sops.document import decrypt_bytes
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.tree import Branch, EncryptionRules

from .sopsgen import Recipe, encrypt_document

_IDENTITY = pyrage.x25519.Identity.generate()
_RECIPIENT = str(_IDENTITY.to_public())
_RING = KeyRing.from_secret_data({"k.agekey": str(_IDENTITY).encode()})

keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_ABC0123456789-", min_size=1, max_size=12).filter(
    lambda k: k != "sops" and not k.startswith("sops_")
)
scalars = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=12,
)
rules = st.sampled_from(
    [
        EncryptionRules(unencrypted_suffix="_unencrypted"),
        EncryptionRules(encrypted_regex="^(data|a.*)$"),
        EncryptionRules(unencrypted_regex="^b"),
        EncryptionRules(encrypted_suffix="_enc"),
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, values, min_size=1, max_size=6), rules, st.booleans(), st.sampled_from(["yaml", "json"]))
def test_structured_round_trip(doc: dict, rule: EncryptionRules, mac_only: bool, fmt: str) -> None:
    recipe = Recipe(rules=rule, mac_only_encrypted=mac_only, age_recipients=[_RECIPIENT])
    data = encrypt_document(doc, fmt, recipe, key=os.urandom(32))
    store = Format.YAML if fmt == "yaml" else Format.JSON
    out = decrypt_bytes(data, store, Format.JSON, keyring=_RING)
    assert json.loads(out) == json.loads(json.dumps(doc))


flat_keys = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789", min_size=1, max_size=10).filter(
    lambda k: not k.lower().startswith("sops")
)
flat_values = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters="\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\\"
    ),
    max_size=30,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(flat_keys, flat_values, min_size=1, max_size=6))
def test_dotenv_round_trip(doc: dict) -> None:
    data = encrypt_document(Branch(doc.items()), "dotenv", Recipe(age_recipients=[_RECIPIENT]))
    out = decrypt_bytes(data, Format.DOTENV, Format.DOTENV, keyring=_RING).decode()
    expected = "".join(f"{k}={v}".replace("\n", "\\n") + "\n" for k, v in doc.items())
    assert out == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_binary_round_trip(text: str) -> None:
    data = encrypt_document({"data": text}, "binary", Recipe(age_recipients=[_RECIPIENT]))
    assert decrypt_bytes(data, Format.JSON, Format.BINARY, keyring=_RING) == text.encode()


def test_yaml_output_reads_back() -> None:
    doc = {"a": "yes", "b": "010", "c": [1, "2", None], "d": {"e": 1.5}}
    data = encrypt_document(doc, "yaml", Recipe(age_recipients=[_RECIPIENT]))
    assert yaml.safe_load(decrypt_bytes(data, Format.YAML, Format.YAML, keyring=_RING)) == doc
