"""Test-only SOPS *encryptor*: builds documents the shared fixtures do not cover (INI, YAML in
Secret data, every value type, rules, key groups). It follows sops' ``Tree.Encrypt`` and the
stores' layouts; the real-sops fixtures anchor the decryptor, this only widens coverage.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyrage
import yaml
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kustomize_controller.kustomize.sops.cipher import Comment, to_mac_bytes
from kustomize_controller.kustomize.sops.stores.yaml import _GoLoader
from kustomize_controller.kustomize.sops.tree import MAC_ONLY_ENCRYPTED_INIT, Branch, EncryptionRules

REPO = Path(__file__).resolve().parents[4]
TESTDATA = REPO.parent / "shared" / "reference" / "testdata" / "sops"
LAST_MODIFIED = "2024-11-12T13:33:42Z"


def flat(message: str) -> str:
    """An error message with sops' ``UserError()`` layout undone: one line, single spaces, no
    ``|`` gutters, so that wrapped phrases can be searched for."""
    return " ".join(w for w in message.split() if w not in ("|", "-"))


def fixture(rel: str) -> bytes:
    return (TESTDATA / rel).read_bytes()


def age_identity_line(name: str) -> str:
    text = (TESTDATA / "keys" / name).read_text()
    return next(line for line in text.splitlines() if line.startswith("AGE-SECRET-KEY"))


def armor(data: bytes) -> str:
    body = "\n".join(textwrap.wrap(base64.b64encode(data).decode(), 64))
    return f"-----BEGIN AGE ENCRYPTED FILE-----\n{body}\n-----END AGE ENCRYPTED FILE-----\n"


def encrypt_scalar(value: Any, key: bytes, aad: str, iv: bytes | None = None) -> str:
    if isinstance(value, Comment):
        kind, plain = "comment", value.value.encode()
    elif isinstance(value, bool):
        kind, plain = "bool", b"True" if value else b"False"
    elif isinstance(value, int):
        kind, plain = "int", str(value).encode()
    elif isinstance(value, float):
        kind, plain = "float", to_mac_bytes(value)
    elif isinstance(value, bytes):
        kind, plain = "bytes", value
    else:
        kind, plain = "str", str(value).encode()
    if not plain:
        return ""
    iv = iv or os.urandom(32)
    sealed = AESGCM(key).encrypt(iv, plain, aad.encode())
    b64 = base64.b64encode
    return (
        f"ENC[AES256_GCM,data:{b64(sealed[:-16]).decode()},iv:{b64(iv).decode()},"
        f"tag:{b64(sealed[-16:]).decode()},type:{kind}]"
    )


@dataclass
class Recipe:
    """What to encrypt and how."""

    rules: EncryptionRules = field(default_factory=lambda: EncryptionRules(unencrypted_suffix="_unencrypted"))
    mac_only_encrypted: bool = False
    age_recipients: list[str] = field(default_factory=list)
    extra_key_entries: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    key_groups: list[dict[str, list[dict[str, str]]]] | None = None
    shamir_threshold: int | None = None


def encrypt_branch(branch: Branch, key: bytes, recipe: Recipe) -> tuple[Branch, str]:
    """Encrypt the leaves sops would encrypt; return the branch and the plaintext MAC."""
    compiled = recipe.rules.compiled()
    digest = hashlib.sha512()
    if recipe.mac_only_encrypted:
        digest.update(MAC_ONLY_ENCRYPTED_INIT)

    def leaf(value: Any, path: list[str], stack: list[list[str]]) -> Any:
        is_comment = isinstance(value, Comment)
        encrypted = compiled.should_encrypt(path, stack, is_comment)
        if (not recipe.mac_only_encrypted or encrypted) and not is_comment:
            digest.update(to_mac_bytes(value))
        if not encrypted:
            return value
        out = encrypt_scalar(value, key, ":".join(path) + ":")
        return Comment(out, value.inline) if is_comment else out

    from kustomize_controller.kustomize.sops.tree import _walk_branch

    result = _walk_branch(branch, [], [], leaf)
    return result, digest.hexdigest().upper()


def build_metadata(key: bytes, mac: str, recipe: Recipe) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if recipe.key_groups is not None:
        meta["key_groups"] = recipe.key_groups
        if recipe.shamir_threshold is not None:
            meta["shamir_threshold"] = recipe.shamir_threshold
    else:
        meta["age"] = [
            {"recipient": r, "enc": armor(pyrage.encrypt(key, [pyrage.x25519.Recipient.from_str(r)]))}
            for r in recipe.age_recipients
        ]
        meta.update(recipe.extra_key_entries)
    meta["lastmodified"] = LAST_MODIFIED
    meta["mac"] = encrypt_scalar(mac, key, LAST_MODIFIED)
    rules = recipe.rules
    for name in (
        "unencrypted_suffix",
        "encrypted_suffix",
        "unencrypted_regex",
        "encrypted_regex",
        "unencrypted_comment_regex",
        "encrypted_comment_regex",
    ):
        if getattr(rules, name):
            meta[name] = getattr(rules, name)
    if recipe.mac_only_encrypted:
        meta["mac_only_encrypted"] = True
    meta["version"] = "3.9.0"
    return meta


def to_plain(value: Any) -> Any:
    if isinstance(value, Branch):
        return {k: to_plain(v) for k, v in value if not isinstance(k, Comment)}
    if isinstance(value, list):
        return [to_plain(v) for v in value if not isinstance(v, Comment)]
    return value


def flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            out += flatten(v, f"{prefix}__map_{k}" if prefix else k)
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            out += flatten(v, f"{prefix}__list_{i}")
        return out
    if isinstance(value, bool):
        return [(prefix, "true" if value else "false")]
    return [(prefix, str(value))]


def encrypt_document(plain: Branch | dict[str, Any], fmt: str, recipe: Recipe, key: bytes | None = None) -> bytes:
    """Encrypt ``plain`` and emit it as sops would in ``fmt`` (yaml, json, dotenv, ini, binary)."""
    key = key or os.urandom(32)
    branch = plain if isinstance(plain, Branch) else _to_branch(plain)
    encrypted, mac = encrypt_branch(branch, key, recipe)
    meta = build_metadata(key, mac, recipe)
    if fmt == "yaml":
        return yaml.dump({**to_plain(encrypted), "sops": meta}, Dumper=_SopsLikeDumper, sort_keys=False).encode()
    if fmt in ("json", "binary"):
        return json.dumps({**to_plain(encrypted), "sops": meta}, indent="\t").encode()
    if fmt == "dotenv":
        lines = []
        for k, v in encrypted:
            if isinstance(k, Comment):
                lines.append(f"#{k.value}")
            else:
                lines.append(f"{k}={v}".replace("\n", "\\n"))
        lines += [f"sops_{k}={v}".replace("\n", "\\n") for k, v in flatten(meta)]
        return ("\n".join(lines) + "\n").encode()
    if fmt == "ini":
        lines = []
        for section, items in encrypted:
            lines.append(f"[{section}]")
            for k, v in items:
                if isinstance(k, Comment):
                    lines.append(f"; {k.value}")
                else:
                    lines.append(f"{k} = {v}")
        lines.append("[sops]")
        lines += [f"{k} = {v}".replace("\n", "\\n") for k, v in flatten(meta)]
        return ("\n".join(lines) + "\n").encode()
    raise ValueError(fmt)


class _SopsLikeDumper(yaml.SafeDumper):
    """Quotes every string that go-yaml v3 (sops) or YAML 1.1 would read as another type."""


for _tag, _regexp in _GoLoader.yaml_implicit_resolvers.get("0", []):
    _SopsLikeDumper.add_implicit_resolver(_tag, _regexp, list("-+0123456789."))


def _to_branch(value: dict[str, Any]) -> Branch:
    return Branch((k, _to_tree(v)) for k, v in value.items())


def _to_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return _to_branch(value)
    if isinstance(value, list):
        return [_to_tree(v) for v in value]
    return value


@dataclass
class AgeKey:
    identity: str
    recipient: str

    @classmethod
    def generate(cls) -> AgeKey:
        ident = pyrage.x25519.Identity.generate()
        return cls(str(ident), str(ident.to_public()))

    @property
    def secret_data(self) -> dict[str, bytes]:
        return {"key.agekey": self.identity.encode()}
