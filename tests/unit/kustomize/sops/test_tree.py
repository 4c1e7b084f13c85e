from __future__ import annotations

import hashlib
import os

import pytest

from kustomize_controller.kustomize.sops.cipher import Comment
from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.tree import (
    MAC_ONLY_ENCRYPTED_INIT,
    Branch,
    EncryptionRules,
    decrypt_branches,
)

from .sopsgen import Recipe, encrypt_branch

KEY = os.urandom(32)


def test_mac_only_encrypted_prefix_is_sha256_of_sops() -> None:
    assert hashlib.sha256(b"sops").digest() == MAC_ONLY_ENCRYPTED_INIT


@pytest.mark.parametrize(
    ("rules", "path", "expected"),
    [
        (EncryptionRules(unencrypted_suffix="_unencrypted"), ["a", "b"], True),
        (EncryptionRules(unencrypted_suffix="_unencrypted"), ["a_unencrypted", "b"], False),
        (EncryptionRules(encrypted_suffix="_enc"), ["a", "b"], False),
        (EncryptionRules(encrypted_suffix="_enc"), ["a_enc", "b"], True),
        (EncryptionRules(encrypted_regex="^(data|stringData)$"), ["stringData", "k"], True),
        (EncryptionRules(encrypted_regex="^(data|stringData)$"), ["metadata", "name"], False),
        (EncryptionRules(encrypted_regex="pass"), ["x", "mypassword"], True),  # unanchored search
        (EncryptionRules(unencrypted_regex="^meta"), ["metadata", "name"], False),
        (EncryptionRules(unencrypted_regex="^meta"), ["spec", "x"], True),
    ],
)
def test_path_rules(rules: EncryptionRules, path: list[str], expected: bool) -> None:
    assert rules.compiled().should_encrypt(path, [[]], False) is expected


def test_comment_rules() -> None:
    enc = EncryptionRules(encrypted_comment_regex="sops:enc").compiled()
    assert enc.should_encrypt(["a"], [["sops:enc"]], False)
    assert not enc.should_encrypt(["a"], [[]], False)
    # the marker comment itself stays in clear, a comment after it is encrypted
    assert not enc.should_encrypt([], [["sops:enc"]], True)
    assert enc.should_encrypt([], [["sops:enc", "next"]], True)
    unenc = EncryptionRules(unencrypted_comment_regex="plain").compiled()
    assert not unenc.should_encrypt(["a"], [["plain"]], False)
    assert unenc.should_encrypt(["a"], [["other"]], False)


def test_invalid_regex_is_a_format_error() -> None:
    with pytest.raises(SopsFormatError, match="invalid encrypted_regex"):
        EncryptionRules(encrypted_regex="(").compiled()


def _round_trip(plain: Branch, recipe: Recipe) -> tuple[Branch, str, str]:
    encrypted, mac = encrypt_branch(plain, KEY, recipe)
    out, computed = decrypt_branches(
        [encrypted], key=KEY, rules=recipe.rules, mac_only_encrypted=recipe.mac_only_encrypted
    )
    return out[0], mac, computed


NESTED = Branch(
    [
        ("name", "x"),
        ("list", ["a", 1, 2.5, True, Branch([("deep", "v")])]),
        ("map", Branch([("k_unencrypted", "clear"), ("n", None), ("empty", "")])),
    ]
)


@pytest.mark.parametrize("mac_only", [False, True])
def test_nested_round_trip_and_mac(mac_only: bool) -> None:
    recipe = Recipe(mac_only_encrypted=mac_only)
    out, mac, computed = _round_trip(NESTED, recipe)
    assert out == NESTED
    assert mac == computed


def test_mac_only_encrypted_ignores_clear_values() -> None:
    recipe = Recipe(rules=EncryptionRules(encrypted_regex="^secret$"), mac_only_encrypted=True)
    plain = Branch([("public", "a"), ("secret", "b")])
    encrypted, mac = encrypt_branch(plain, KEY, recipe)
    changed = Branch([("public", "CHANGED"), encrypted[1]])
    _, computed = decrypt_branches([changed], key=KEY, rules=recipe.rules, mac_only_encrypted=True)
    assert computed == mac
    _, full = decrypt_branches([changed], key=KEY, rules=recipe.rules, mac_only_encrypted=False)
    assert full != mac


def test_comments_are_decrypted_and_not_in_mac() -> None:
    recipe = Recipe(rules=EncryptionRules(encrypted_comment_regex="sops:enc"))
    plain = Branch([(Comment("sops:enc"), None), ("a", "secret"), ("b", "clear")])
    out, mac, computed = _round_trip(plain, recipe)
    assert out == plain and mac == computed


def test_clear_comment_where_encryption_expected_is_kept() -> None:
    plain = Branch([(Comment("an old clear comment"), None), ("a", "v")])
    encrypted, _ = encrypt_branch(Branch([("a", "v")]), KEY, Recipe())
    out, _ = decrypt_branches(
        [Branch([plain[0], *encrypted])], key=KEY, rules=EncryptionRules(), mac_only_encrypted=False
    )
    assert out[0] == plain


def test_non_string_key_is_refused() -> None:
    with pytest.raises(SopsFormatError, match="non-string key"):
        decrypt_branches([Branch([(1, "x")])], key=KEY, rules=EncryptionRules(), mac_only_encrypted=False)


def test_non_string_where_ciphertext_expected() -> None:
    with pytest.raises(SopsFormatError, match="Expected encrypted value as string, but got int"):
        decrypt_branches([Branch([("a", 5)])], key=KEY, rules=EncryptionRules(), mac_only_encrypted=False)


def test_encrypted_value_where_rules_say_clear_is_refused() -> None:
    recipe = Recipe(rules=EncryptionRules(encrypted_regex="^secret$"))
    encrypted, _ = encrypt_branch(Branch([("secret", "v")]), KEY, recipe)
    moved = Branch([("public", encrypted[0][1])])
    with pytest.raises(SopsFormatError, match="the value at 'public:' is encrypted but the document's rules say"):
        decrypt_branches([moved], key=KEY, rules=recipe.rules, mac_only_encrypted=False)
