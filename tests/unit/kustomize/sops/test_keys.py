from __future__ import annotations

import os
import random

import pyrage
import pytest
import yaml

from kustomize_controller.kustomize.sops import SopsKeyError
from kustomize_controller.kustomize.sops.document import decrypt_bytes
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys import age, shamir
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.tree import EncryptionRules

from .sopsgen import AgeKey, Recipe, armor, encrypt_document, fixture


def _gf_mult(a: int, b: int) -> int:
    # independent of the package: carry-less multiply, then reduce by 0x11B
    product = 0
    for i in range(8):
        if b >> i & 1:
            product ^= a << i
    for bit in range(14, 7, -1):
        if product >> bit & 1:
            product ^= 0x11B << (bit - 8)
    return product


def split(secret: bytes, parts: int, threshold: int, rng: random.Random) -> list[bytes]:
    out = [bytearray() for _ in range(parts)]
    for byte in secret:
        coefficients = [byte] + [rng.randrange(256) for _ in range(threshold - 1)]
        for index in range(parts):
            x, y, power = index + 1, 0, 1
            for c in coefficients:
                y ^= _gf_mult(c, power)
                power = _gf_mult(power, x)
            out[index].append(y)
    return [bytes(p) + bytes([i + 1]) for i, p in enumerate(out)]


@pytest.mark.parametrize(("parts", "threshold"), [(2, 2), (3, 2), (5, 3)])
def test_shamir_combine(parts: int, threshold: int) -> None:
    rng = random.Random(parts * 31 + threshold)
    secret = bytes(rng.randrange(256) for _ in range(32))
    shares = split(secret, parts, threshold, rng)
    assert shamir.combine(shares[:threshold]) == secret
    assert shamir.combine(shares[-threshold:]) == secret


def test_shamir_rejects_bad_parts() -> None:
    with pytest.raises(SopsKeyError, match="less than two parts"):
        shamir.combine([b"ab"])
    with pytest.raises(SopsKeyError, match="duplicate part"):
        shamir.combine([b"a\x01", b"b\x01"])
    with pytest.raises(SopsKeyError, match="same length"):
        shamir.combine([b"a\x01", b"bb\x02"])


def _group_doc(keys: list[AgeKey], threshold: int) -> tuple[bytes, bytes]:
    data_key = os.urandom(32)
    shares = split(data_key, len(keys), threshold, random.Random(7))
    groups = [
        {
            "age": [
                {
                    "recipient": k.recipient,
                    "enc": armor(pyrage.encrypt(s, [pyrage.x25519.Recipient.from_str(k.recipient)])),
                }
            ]
        }
        for k, s in zip(keys, shares, strict=True)
    ]
    recipe = Recipe(
        rules=EncryptionRules(encrypted_regex="^stringData$"), key_groups=groups, shamir_threshold=threshold
    )
    doc = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "g"}, "stringData": {"k": "shared"}}
    return encrypt_document(doc, "yaml", recipe, key=data_key), data_key


def test_key_groups_with_shamir_threshold() -> None:
    keys = [AgeKey.generate() for _ in range(3)]
    doc, _ = _group_doc(keys, threshold=2)
    two = {"a.agekey": keys[0].identity.encode(), "c.agekey": keys[2].identity.encode()}
    out = yaml.safe_load(decrypt_bytes(doc, Format.YAML, Format.YAML, keyring=KeyRing.from_secret_data(two)))
    assert out["stringData"] == {"k": "shared"}
    one = {"a.agekey": keys[0].identity.encode()}
    with pytest.raises(SopsKeyError) as info:
        decrypt_bytes(doc, Format.YAML, Format.YAML, keyring=KeyRing.from_secret_data(one))
    message = str(info.value)
    assert "\n\nGroup 0: SUCCESS\n\nGroup 1: FAILED\n" in message  # every group attempted
    assert "Group 2: FAILED" in message
    assert "encrypted with a Shamir threshold of\n2, but only 1 part(s) were successfully recovered" in message


def test_several_identities_in_one_file_and_comments() -> None:
    wanted, other = AgeKey.generate(), AgeKey.generate()
    text = f"# created: now\n# public key: {other.recipient}\n{other.identity}\n\n{wanted.identity}\n"
    parsed = age.parse_identities(text)
    assert len(parsed.usable) == 2
    doc = encrypt_document({"a": "b"}, "json", Recipe(age_recipients=[wanted.recipient]))
    ring = KeyRing.from_secret_data({"keys.agekey": text.encode()})
    assert b'"a": "b"' in decrypt_bytes(doc, Format.JSON, Format.JSON, keyring=ring)


def test_identity_kinds_recorded() -> None:
    parsed = age.parse_identities(fixture("keys/age-pq.txt").decode() + "AGE-PLUGIN-YUBIKEY-1QQQQQQ\n")
    assert parsed.usable == [] and parsed.post_quantum == 1 and parsed.plugins == ["yubikey"]


def test_plugin_recipient_is_not_supported() -> None:
    assert age.plugin_name("age1yubikey1qwerty") == "yubikey"
    assert age.plugin_name("age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29") is None


def test_ssh_identity(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil
    import subprocess

    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        pytest.skip("ssh-keygen is not on PATH")
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "id")], check=True, timeout=30)
    public = (tmp_path / "id.pub").read_text().strip()
    recipient = pyrage.ssh.Recipient.from_str(public)
    data_key = os.urandom(32)
    enc = armor(pyrage.encrypt(data_key, [recipient]))
    identities = age.parse_identities((tmp_path / "id").read_text())
    assert age.decrypt_data_key(enc, identities.usable) == data_key


def test_global_keys_do_not_accept_pgp_or_credentials() -> None:
    ring = KeyRing.from_secret_data({}, global_age_keys={"x.asc": b"junk", "sops.vault-token": b"t"})
    with pytest.raises(SopsKeyError) as info:
        decrypt_bytes(fixture("algorithms/age.yaml"), Format.YAML, Format.YAML, keyring=ring)
    assert "keys given but not supported" not in str(info.value)
