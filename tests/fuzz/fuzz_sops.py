"""SOPS documents in every store: the encrypted document, its metadata, the MAC, the ``ENC[...]`` grammar.

Input: ``<flags><document>``. ``flags % 5`` picks the store (YAML, JSON, dotenv, INI, binary) the
document is read in and written back to; with bit 3 set the document is read as YAML/JSON instead and,
when that is an object, decrypted whole as a built object is (``decrypt_mapping``). The keyring holds
the shared test age identity (``../shared/reference/testdata/sops/keys/age.txt``; the corpus is
encrypted to it, so mutations reach the values and the MAC) and no PGP key; remote key services are
replaced by one that refuses, so no input can make a network call.

Contract: ``decrypt_bytes`` and ``decrypt_mapping`` raise only ``SopsError`` (``DecryptionError``), and
no message holds the document's plaintext values (checked for the corpus' own marker value).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kustomize_controller.kustomize.sops.document import decrypt_bytes, decrypt_mapping
from kustomize_controller.kustomize.sops.errors import SopsError, SopsKeyError
from kustomize_controller.kustomize.sops.formats import Format, detect_format
from kustomize_controller.kustomize.sops.keys import age
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.keys.services import KeyServiceContext, KeyServices
from tests.fuzz.harness import SHARED, Target

TESTDATA = SHARED / "reference" / "testdata" / "sops"
#: the plaintext the corpus documents hold: it must never reach a message
MARKER = "fuzz-plaintext-7f3a"
_FORMATS = (Format.YAML, Format.JSON, Format.DOTENV, Format.INI, Format.BINARY)


class _NoServices(KeyServices):
    def decrypt(self, key: Any) -> bytes:
        raise SopsKeyError(f"failed to decrypt sops data key with {key.kind}: no key service while fuzzing")


def _keyring() -> KeyRing:
    identities = age.AgeIdentities()
    key_file = TESTDATA / "keys" / "age.txt"
    if key_file.is_file():
        identities.extend(age.parse_identities(key_file.read_text()))
    return KeyRing(age_identities=identities, pgp_keys={}, services=_NoServices(KeyServiceContext(environ={})))


_KEYRING = _keyring()


def _check(err: SopsError) -> None:
    assert MARKER not in str(err), str(err)


def one_input(data: bytes) -> None:
    if not data:
        return
    flags, document = data[0], data[1:]
    detect_format(document)
    if flags & 8:
        try:
            obj = yaml.load(document, Loader=yaml.CSafeLoader)
        except (yaml.YAMLError, RecursionError, ValueError):
            return
        if not isinstance(obj, dict):
            return
        try:
            plain = decrypt_mapping(obj, keyring=_KEYRING, verify_mac=False)
        except SopsError as err:
            _check(err)
            return
        assert isinstance(plain, dict) and "sops" not in plain
        return
    fmt = _FORMATS[flags % 5]
    try:
        out = decrypt_bytes(document, fmt, fmt, keyring=_KEYRING)
    except SopsError as err:
        _check(err)
        return
    assert isinstance(out, bytes)


def _seeds() -> list[bytes]:
    """The real-sops documents of the shared test data (not copied into the repository)."""
    seeds = []
    for path in sorted(TESTDATA.rglob("*")) if TESTDATA.is_dir() else []:
        if path.is_file() and "keys" not in path.parts and path.stat().st_size <= 16384:
            content = path.read_bytes()
            fmt = {".yaml": 0, ".yml": 0, ".json": 1, ".env": 2, ".ini": 3}.get(path.suffix, 4)
            if b"sops" in content:
                seeds.append(bytes([fmt]) + content)
    return seeds


TARGET = Target(
    name="sops",
    one_input=one_input,
    contract="decrypt_bytes / decrypt_mapping: SopsError only, no plaintext in messages",
    max_len=16384,
    seeds=_seeds,
    dictionary=(b"ENC[AES256_GCM,data:", b",iv:", b",tag:", b",type:str]", b",type:int]", b",type:float]",
                b",type:bool]", b",type:bytes]", b",type:comment]", b"sops:", b'"sops":', b"sops_", b"[sops]",
                b"mac", b"lastmodified", b"2024-11-12T13:33:42Z", b"version", b"3.9.0", b"age", b"recipient",
                b"enc", b"-----BEGIN AGE ENCRYPTED FILE-----", b"-----END AGE ENCRYPTED FILE-----", b"pgp", b"fp",
                b"kms", b"arn", b"gcp_kms", b"resource_id", b"azure_kv", b"hc_vault", b"key_groups",
                b"shamir_threshold", b"unencrypted_suffix", b"encrypted_regex", b"unencrypted_comment_regex",
                b"mac_only_encrypted", b"__map_", b"__list_", b"_unencrypted", b"\\n", b"#ENC["),
    seeded_runs=300,
)


def write_corpus(directory: Path) -> None:
    """(Re)generate ``corpus/sops``: one small document per store, encrypted to the shared test key."""
    from tests.unit.kustomize.sops.sopsgen import Recipe, encrypt_document

    recipient = next(line.split(": ", 1)[1] for line in (TESTDATA / "keys" / "age.txt").read_text().splitlines()
                     if line.startswith("# public key: "))
    recipe = Recipe(age_recipients=[recipient])
    plain = {"name": MARKER, "port": 8080, "ratio": 0.5, "on": True, "list": [MARKER, 1],
             "nested": {"a": MARKER}, "note_unencrypted": "visible"}
    directory.mkdir(parents=True, exist_ok=True)
    for fmt, flag in (("yaml", 0), ("json", 1)):
        (directory / fmt).write_bytes(bytes([flag]) + encrypt_document(plain, fmt, recipe))
    (directory / "binary").write_bytes(bytes([4]) + encrypt_document({"data": MARKER}, "binary", recipe))
    (directory / "yaml-object").write_bytes(bytes([8]) + encrypt_document(plain, "yaml", recipe))
    (directory / "dotenv").write_bytes(bytes([2]) + encrypt_document({"NAME": MARKER, "PORT": "1"}, "dotenv", recipe))
    (directory / "ini").write_bytes(bytes([3]) + encrypt_document({"section": {"name": MARKER}}, "ini", recipe))


if __name__ == "__main__":
    write_corpus(Path(__file__).parent / "corpus" / "sops")
