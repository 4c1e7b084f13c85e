"""AES-256-GCM values of a SOPS document: ``ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]``.

Contract:
- ``decrypt_value(text, key, aad)`` authenticates and decrypts one value with the 32-byte data
  key and the additional data (the value's key path ``a:b:c:`` or, for the MAC, the
  ``lastmodified`` timestamp), then restores its type the way sops does: ``str``, ``int``,
  ``float``, ``bool``, ``bytes``, ``time`` (kept as its RFC 3339 text) and ``comment``.
- An empty string is the encrypted form of an empty value and decrypts to ``""`` (sops never
  encrypts empty values).
- ``to_mac_bytes(value)`` is the byte form sops hashes into the MAC (Go's ``strconv`` spelling:
  ``True``/``False``, shortest ``'f'`` float form).
- Error messages never contain the value, the plaintext or the key; a value that does not look
  encrypted is reported as ``<redacted>`` like upstream does.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import math
import re
from dataclasses import dataclass
from decimal import Decimal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsIntegrityError

_ENC_RE = re.compile(r"^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]")
_GO_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment line of a document (YAML, dotenv, INI); sops can encrypt comments too."""

    value: str
    inline: bool = False


Scalar = str | int | float | bool | bytes | Comment | datetime.date | None


@dataclass(frozen=True, slots=True)
class EncryptedValue:
    data: bytes
    iv: bytes
    tag: bytes
    datatype: str


def looks_encrypted(text: str) -> bool:
    return _ENC_RE.match(text) is not None


def parse_value(text: str) -> EncryptedValue:
    match = _ENC_RE.match(text)
    if match is None:
        raise SopsFormatError("Input string <redacted> does not match sops' data format")
    parts: list[bytes] = []
    for name, group in zip(("data", "iv", "tag"), match.groups()[:3], strict=True):
        try:
            parts.append(base64.b64decode(group, validate=True))
        except (binascii.Error, ValueError) as err:
            raise SopsFormatError(f"Error base64-decoding {name}") from err
    return EncryptedValue(data=parts[0], iv=parts[1], tag=parts[2], datatype=match.group(4))


def decrypt_value(text: str, key: bytes, aad: str) -> Scalar:
    """Decrypt one ``ENC[…]`` value; raises ``SopsIntegrityError`` when authentication fails."""
    if text == "":
        return ""
    value = parse_value(text)
    if not value.iv:
        raise SopsFormatError("Could not decrypt with AES_GCM: empty nonce")
    if len(value.tag) != 16:
        raise SopsIntegrityError("Could not decrypt with AES_GCM: cipher: message authentication failed")
    try:
        plain = AESGCM(key).decrypt(value.iv, value.data + value.tag, aad.encode())
    except InvalidTag as err:
        raise SopsIntegrityError("Could not decrypt with AES_GCM: cipher: message authentication failed") from err
    except ValueError as err:  # wrong key length
        raise SopsFormatError("Could not decrypt with AES_GCM: invalid data key") from err
    return _restore(plain, value.datatype)


def _restore(plain: bytes, datatype: str) -> Scalar:
    # Errors are raised outside ``except`` blocks on purpose: a caught ValueError quotes the
    # plaintext, and would stay reachable as ``__context__`` even with ``from None``.
    if datatype == "bytes":
        return plain
    text = _utf8(plain)
    if text is None:
        raise SopsFormatError(f"decrypted value of type {datatype} is not valid UTF-8")
    if datatype in ("str", "time"):
        return text
    if datatype == "comment":
        return Comment(text)
    if datatype == "int":
        if _GO_INT_RE.match(text) is None or not _INT64_MIN <= int(text) <= _INT64_MAX:
            raise SopsFormatError("decrypted value of type int is not a valid integer")
        return int(text)
    if datatype == "float":
        number = _go_float(text)
        if number is None:
            raise SopsFormatError("decrypted value of type float is not a valid float")
        return number
    if datatype == "bool":
        if text in _GO_TRUE:
            return True
        if text in _GO_FALSE:
            return False
        raise SopsFormatError("decrypted value of type bool is not a valid boolean")
    raise SopsFormatError(f"Unknown datatype: {datatype}")


def _utf8(plain: bytes) -> str | None:
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _go_float(text: str) -> float | None:
    if "_" in text or text != text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def go_format_float(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'f', -1, 64)``: shortest round-trip digits, no exponent."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def to_mac_bytes(value: Scalar) -> bytes:
    """The bytes sops feeds into the MAC for one leaf value."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):
        return b"True" if value else b"False"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return go_format_float(value).encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, Comment):
        return value.value.encode("utf-8")
    if isinstance(value, datetime.datetime):
        text = value.isoformat()
        return (text[:-6] + "Z" if text.endswith("+00:00") else text).encode()
    if isinstance(value, datetime.date):
        return f"{value.isoformat()}T00:00:00Z".encode()
    raise SopsFormatError(f"Could not convert unknown type {type(value).__name__} to bytes")
