from __future__ import annotations

import math
import os

import pytest

from kustomize_controller.kustomize.sops.cipher import (
    Comment,
    decrypt_value,
    go_format_float,
    looks_encrypted,
    parse_value,
    to_mac_bytes,
)
from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsIntegrityError

from .sopsgen import encrypt_scalar

KEY = bytes(range(32))


@pytest.mark.parametrize(
    "value",
    ["text", "ünïcødé", 0, -42, 2**63 - 1, 1.5, -0.001, 1e21, True, False, b"\x00\xffbytes", Comment(" a comment")],
)
def test_types_round_trip(value: object) -> None:
    enc = encrypt_scalar(value, KEY, "a:b:")
    assert looks_encrypted(enc)
    out = decrypt_value(enc, KEY, "a:b:")
    assert out == value and type(out) is type(value)


def test_empty_value_is_empty() -> None:
    assert decrypt_value("", KEY, "x:") == ""


def test_wrong_aad_or_key_fails_authentication() -> None:
    enc = encrypt_scalar("v", KEY, "a:")
    with pytest.raises(SopsIntegrityError, match="message authentication failed"):
        decrypt_value(enc, KEY, "b:")
    with pytest.raises(SopsIntegrityError):
        decrypt_value(enc, os.urandom(32), "a:")


def test_not_encrypted_value_is_redacted() -> None:
    with pytest.raises(SopsFormatError) as info:
        decrypt_value("my-plaintext", KEY, "a:")
    assert "my-plaintext" not in str(info.value)
    assert "<redacted>" in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ENC[AES256_GCM,data:!!!,iv:AAAA,tag:AAAA,type:str]", "Error base64-decoding data"),
        ("ENC[AES256_GCM,data:AAAA,iv:AAAA,tag:AAAA,type:str]", "message authentication failed"),
    ],
)
def test_malformed_values(text: str, message: str) -> None:
    with pytest.raises((SopsFormatError, SopsIntegrityError), match=message):
        decrypt_value(text, KEY, "a:")


def test_unknown_type_after_authentication() -> None:
    enc = encrypt_scalar("v", KEY, "a:").replace("type:str", "type:weird")
    # the type is outside the authenticated data, so decryption succeeds and the type is refused
    with pytest.raises(SopsFormatError, match="Unknown datatype: weird"):
        decrypt_value(enc, KEY, "a:")


@pytest.mark.parametrize(
    ("kind", "plain"), [("int", "1.5-secret"), ("int", " 1"), ("float", "secret-x"), ("bool", "secret-yes")]
)
def test_bad_typed_plaintext_is_refused_without_echo(kind: str, plain: str) -> None:
    enc = encrypt_scalar(plain, KEY, "a:").replace("type:str", f"type:{kind}")
    with pytest.raises(SopsFormatError) as info:
        decrypt_value(enc, KEY, "a:")
    assert str(info.value).startswith(f"decrypted value of type {kind} is not a valid")
    assert "secret" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize(("plain", "value"), [("t", True), ("TRUE", True), ("0", False), ("False", False)])
def test_go_parse_bool_spellings(plain: str, value: bool) -> None:
    enc = encrypt_scalar(plain, KEY, "a:").replace("type:str", "type:bool")
    assert decrypt_value(enc, KEY, "a:") is value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.1, "0.1"),
        (-0.0, "-0"),
        (1e21, "1000000000000000000000"),
        (1e-7, "0.0000001"),
        (123.456, "123.456"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_go_format_float(value: float, text: str) -> None:
    assert go_format_float(value) == text


def test_mac_bytes() -> None:
    assert to_mac_bytes(True) == b"True"
    assert to_mac_bytes(False) == b"False"
    assert to_mac_bytes(7) == b"7"
    assert to_mac_bytes("é") == "é".encode()
    assert to_mac_bytes(b"\x01") == b"\x01"


def test_parse_value_fields() -> None:
    value = parse_value(encrypt_scalar("abc", KEY, "a:"))
    assert len(value.iv) == 32 and len(value.tag) == 16 and len(value.data) == 3 and value.datatype == "str"
