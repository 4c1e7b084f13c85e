"""Every document encrypted by the real sops decrypts with its key, and fails clearly without."""

from __future__ import annotations

import base64
import re

import pyrage
import pytest
import yaml

from kustomize_controller.kustomize.errors import DecryptionError
from kustomize_controller.kustomize.sops import (
    SopsDecryptor,
    SopsIntegrityError,
    SopsKeyError,
    SopsUnsupportedError,
)
from kustomize_controller.kustomize.sops.document import decrypt_bytes
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing

from .conftest import requires_gpg
from .sopsgen import age_identity_line, fixture, flat

# (fixture, store, keys needed, expected plaintext per key path)
AGE_CASES = [
    ("algorithms/age.yaml", Format.YAML, "age.txt", {("stringData", "key"): "value"}),
    ("global/secret.yaml", Format.YAML, "age-global.txt", {("stringData", "key"): "global-value"}),
    ("patches/merge1.yaml", Format.YAML, "age.txt", {("stringData", "key"): "merge1"}),
    ("patches/merge2.yaml", Format.YAML, "age.txt", {("stringData", "merge2"): "merge2"}),
]
FLAT_CASES = [
    ("envs/env.env", Format.DOTENV, b"key=value\n"),
    ("component/env.env", Format.DOTENV, b"key=value\n"),
    ("remote/env.env", Format.DOTENV, b"key=value\n"),
    ("files/file.txt", Format.BINARY, b"value"),
]
ALL_AGE_FILES = [c[0] for c in AGE_CASES] + [c[0] for c in FLAT_CASES]


def keyring(*names: str) -> KeyRing:
    data = {}
    for name in names:
        ext = ".asc" if name.endswith(".asc") else ".agekey"
        data[name.split(".")[0] + ext] = fixture(f"keys/{name}")
    return KeyRing.from_secret_data(data)


def dig(doc: dict, path: tuple[str, ...]) -> object:
    for part in path:
        doc = doc[part]
    return doc


@pytest.mark.parametrize(("rel", "fmt", "key", "expected"), AGE_CASES)
def test_age_yaml_fixtures_decrypt(rel: str, fmt: Format, key: str, expected: dict) -> None:
    out = yaml.safe_load(decrypt_bytes(fixture(rel), fmt, fmt, keyring=keyring(key)))
    assert "sops" not in out
    for path, value in expected.items():
        assert dig(out, path) == value
    # unencrypted fields are untouched
    assert out["apiVersion"] == "v1" and out["kind"] == "Secret"


@pytest.mark.parametrize(("rel", "fmt", "expected"), FLAT_CASES)
def test_age_flat_fixtures_decrypt(rel: str, fmt: Format, expected: bytes) -> None:
    input_format = Format.JSON if fmt is Format.BINARY else fmt
    assert decrypt_bytes(fixture(rel), input_format, fmt, keyring=keyring("age.txt")) == expected


def test_inside_fixture_is_a_binary_document_in_secret_data() -> None:
    doc = yaml.safe_load(fixture("inside/secret.yaml"))
    raw = base64.b64decode(doc["data"]["key"])
    assert decrypt_bytes(raw, Format.JSON, Format.BINARY, keyring=keyring("age.txt")) == b"value"


@requires_gpg
def test_pgp_fixture_decrypts_and_gnupg_home_is_removed() -> None:
    ring = keyring("pgp.asc")
    try:
        out = yaml.safe_load(decrypt_bytes(fixture("algorithms/pgp.yaml"), Format.YAML, Format.YAML, keyring=ring))
        home = ring.gnupg_home
        assert home is not None
    finally:
        ring.close()
    assert out["stringData"]["key"] == "value"
    assert ring.gnupg_home is None
    import os

    assert not os.path.exists(home)


@requires_gpg
def test_pgp_fixture_with_only_age_keys_names_the_pgp_key() -> None:
    with pytest.raises(SopsKeyError) as info:
        decrypt_bytes(fixture("algorithms/pgp.yaml"), Format.YAML, Format.YAML, keyring=keyring("age.txt"))
    message = str(info.value)
    assert message.startswith("cannot get sops data key: Failed to get the data key required to decrypt")
    assert "\n  35C1A64CD7FC0AB6EB66756B2445463C3234ECE1: FAILED\n" in message
    assert "no PGP private key was provided" in flat(message)


@pytest.mark.parametrize("rel", ALL_AGE_FILES)
def test_wrong_age_key_fails_clearly(rel: str) -> None:
    fmt = {"env": Format.DOTENV, "txt": Format.JSON}.get(rel.rsplit(".", 1)[1], Format.YAML)
    wrong = "age-global.txt" if "global" not in rel else "age.txt"
    with pytest.raises(SopsKeyError) as info:
        decrypt_bytes(fixture(rel), fmt, fmt, keyring=keyring(wrong))
    message = str(info.value)
    assert message.startswith("cannot get sops data key: Failed to get the data key required")
    # Go age's NoIdentityMatchError with the one identity's error, as upstream reports it (sops wraps it)
    assert "identity did not match any of the recipients: incorrect identity for recipient block" in flat(message)
    assert re.search(r"\n  age1[0-9a-z]+: FAILED\n", message)


@pytest.mark.parametrize("rel", ALL_AGE_FILES)
def test_missing_key_fails_clearly(rel: str) -> None:
    fmt = {"env": Format.DOTENV, "txt": Format.JSON}.get(rel.rsplit(".", 1)[1], Format.YAML)
    with pytest.raises(SopsKeyError, match="no age identity was provided"):
        decrypt_bytes(fixture(rel), fmt, fmt, keyring=KeyRing.from_secret_data({}))


def _tamper_plain_field(rel: str) -> bytes:
    data = fixture(rel)
    if rel.endswith(".yaml"):
        return data.replace(b"kind: Secret", b"kind: Secrets", 1)
    if rel.endswith(".env"):
        # sops_unencrypted_suffix: add an unencrypted (MAC-covered) value
        return data.replace(b"sops_lastmodified", b"extra_unencrypted=1\nsops_lastmodified", 1)
    return data.replace(b'"data":', b'"extra_unencrypted": "x",\n\t"data":', 1)


@pytest.mark.parametrize("rel", ALL_AGE_FILES)
def test_tampered_unencrypted_value_is_a_mac_mismatch(rel: str) -> None:
    fmt = {"env": Format.DOTENV, "txt": Format.JSON}.get(rel.rsplit(".", 1)[1], Format.YAML)
    key = "age-global.txt" if "global" in rel else "age.txt"
    tampered = _tamper_plain_field(rel)
    assert tampered != fixture(rel)
    with pytest.raises(SopsIntegrityError, match="failed to verify sops data integrity: MAC mismatch"):
        decrypt_bytes(tampered, fmt, fmt, keyring=keyring(key))


@pytest.mark.parametrize("rel", ["algorithms/age.yaml", "envs/env.env", "files/file.txt"])
def test_swapped_ciphertext_fails_authentication(rel: str) -> None:
    fmt = {"env": Format.DOTENV, "txt": Format.JSON}.get(rel.rsplit(".", 1)[1], Format.YAML)
    data = fixture(rel)
    # replace the first data: payload by another valid-base64 payload of the same length
    match = re.search(rb"data:([A-Za-z0-9+/=]+),iv:", data)
    assert match
    payload = match.group(1)
    flipped = base64.b64encode(bytes(b ^ 1 for b in base64.b64decode(payload)))
    with pytest.raises(SopsIntegrityError, match="message authentication failed"):
        decrypt_bytes(data.replace(payload, flipped, 1), fmt, fmt, keyring=keyring("age.txt"))


def test_post_quantum_age_is_not_supported_and_says_so() -> None:
    ring = KeyRing.from_secret_data({"pq.agekey": fixture("keys/age-pq.txt")})
    with pytest.raises(SopsUnsupportedError) as info:
        decrypt_bytes(fixture("algorithms/age-pq.yaml"), Format.YAML, Format.YAML, keyring=ring)
    message = str(info.value)
    assert "not supported: post-quantum age (ML-KEM-768 + X25519)" in message
    assert "1 post-quantum identity" in message
    assert age_identity_line("age-pq.txt") not in message


def test_post_quantum_recipient_fails_even_with_classic_keys() -> None:
    with pytest.raises(SopsUnsupportedError, match="post-quantum age"):
        decrypt_bytes(fixture("algorithms/age-pq.yaml"), Format.YAML, Format.YAML, keyring=keyring("age.txt"))


def _with_key_entries(entries: dict) -> bytes:
    doc = yaml.safe_load(fixture("algorithms/age.yaml"))
    for kind in ("kms", "gcp_kms", "azure_kv", "hc_vault", "age", "pgp"):
        doc["sops"].pop(kind, None)
    doc["sops"].update(entries)
    return yaml.safe_dump(doc, sort_keys=False).encode()


@pytest.mark.parametrize(
    ("entries", "kind"),
    [
        ({"hckms": [{"key_id": "tr-west-1:0000-1111", "enc": "AQID", "created_at": "x"}]}, "HuaweiCloud KMS"),
    ],
)
def test_key_service_kinds_not_implemented_are_named(entries: dict, kind: str) -> None:
    with pytest.raises(SopsUnsupportedError) as info:
        decrypt_bytes(_with_key_entries(entries), Format.YAML, Format.YAML, keyring=keyring("age.txt"))
    assert f"not supported: {kind}" in str(info.value)


def test_kms_context_map_does_not_stop_the_age_key() -> None:
    """The issue's regression: ``context`` is a string map, read before age is even tried."""
    doc = yaml.safe_load(fixture("algorithms/age.yaml"))
    doc["sops"]["kms"] = [
        {
            "arn": "arn:aws:kms:eu-west-1:111122223333:key/x",
            "context": {"app": "flux", "env": "prod"},
            "enc": "AQID",
            "created_at": "2024-11-12T13:33:42Z",
            "aws_profile": "",
        }
    ]
    data = yaml.safe_dump(doc, sort_keys=False).encode()
    out = yaml.safe_load(decrypt_bytes(data, Format.YAML, Format.YAML, keyring=keyring("age.txt")))
    assert out["stringData"]["key"] == "value"


def test_unsupported_kind_next_to_a_usable_one_is_not_an_error() -> None:
    doc = yaml.safe_load(fixture("algorithms/age.yaml"))
    doc["sops"]["kms"] = [{"arn": "arn:aws:kms:eu-west-1:1:key/x", "enc": "AQID", "created_at": "x"}]
    data = yaml.safe_dump(doc, sort_keys=False).encode()
    out = yaml.safe_load(decrypt_bytes(data, Format.YAML, Format.YAML, keyring=keyring("age.txt")))
    assert out["stringData"]["key"] == "value"


def test_malformed_age_key_fails_at_construction_without_echoing_it() -> None:
    bad = b"AGE-SECRET-KEY-1NOTAREALKEYATALL"
    with pytest.raises(DecryptionError) as info:
        SopsDecryptor.from_secret_data({"bad.agekey": bad})
    assert "failed to import 'bad.agekey' data from decryption Secret" in str(info.value)
    assert "NOTAREALKEY" not in str(info.value)
    with pytest.raises(DecryptionError, match="unknown identity type"):
        SopsDecryptor.from_secret_data({"bad.agekey": b"hello"})


def test_two_wrong_age_identities_are_named_as_go_age_names_them() -> None:
    # with more than one identity tried, Go age's NoIdentityMatchError says so without naming an error
    other = pyrage.x25519.Identity.generate()
    ring = KeyRing.from_secret_data({"a.agekey": fixture("keys/age-global.txt"),
                                     "b.agekey": str(other).encode()})
    with pytest.raises(SopsKeyError) as info:
        decrypt_bytes(fixture("algorithms/age.yaml"), Format.YAML, Format.YAML, keyring=ring)
    assert "age: no identity matched any of the recipients" in flat(str(info.value))
