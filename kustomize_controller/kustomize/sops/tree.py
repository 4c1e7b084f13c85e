"""The SOPS tree and its decryption walk.

A document is a list of branches (YAML documents; every other format has one). A ``Branch`` is
an ordered list of ``(key, value)`` items where a key is a ``str`` or a ``Comment`` (a comment
line, value ``None``); values are scalars, ``Branch`` or lists (which may hold ``Comment`` items).

Contract of ``decrypt_branches`` (mirrors sops' ``Tree.Decrypt``):
- Leaves are visited in document order; comments inside a mapping or a list are pushed on a
  per-level comment stack that the comment-regex rules read, and cleared after each non-comment
  item.
- ``EncryptionRules.should_encrypt`` decides whether a leaf is encrypted from its key path and
  that stack; an encrypted leaf is decrypted with AAD ``"k1:k2:…:"`` (list indexes are not
  part of the path); an encrypted comment that fails to decrypt is kept as it is (older sops
  left comments in clear).
- The MAC is SHA-512 over ``to_mac_bytes`` of every non-comment leaf after decryption
  (only encrypted leaves, after a fixed 32-byte prefix, when ``mac_only_encrypted``), returned as
  upper-case hex. ``None`` leaves are skipped, as in sops.
- A leaf the rules leave in clear but that holds an ``ENC[…]`` value is an error: the result is
  never half-decrypted.
- Input branches are not modified; new branches are returned.
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kustomize_controller.kustomize.sops.cipher import Comment, Scalar, decrypt_value, looks_encrypted, to_mac_bytes
from kustomize_controller.kustomize.sops.errors import SopsError, SopsFormatError

# sha256("sops"): makes a mac_only_encrypted MAC differ from a full MAC over the same values.
MAC_ONLY_ENCRYPTED_INIT = bytes.fromhex("8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69")


class Branch(list[tuple[Any, Any]]):
    """An ordered mapping that can hold comment lines: ``[(key | Comment, value), …]``."""


@dataclass(frozen=True, slots=True)
class EncryptionRules:
    """The sops metadata settings that choose which leaves are encrypted (Go RE2 syntax)."""

    unencrypted_suffix: str = ""
    encrypted_suffix: str = ""
    unencrypted_regex: str = ""
    encrypted_regex: str = ""
    unencrypted_comment_regex: str = ""
    encrypted_comment_regex: str = ""

    @property
    def uses_comments(self) -> bool:
        return bool(self.unencrypted_comment_regex or self.encrypted_comment_regex)

    def compiled(self) -> _CompiledRules:
        def comp(pattern: str, field: str) -> re.Pattern[str] | None:
            if not pattern:
                return None
            try:
                return re.compile(pattern)
            except re.error as err:
                raise SopsFormatError(f"invalid {field} in sops metadata: {err}") from None

        return _CompiledRules(
            self,
            comp(self.unencrypted_regex, "unencrypted_regex"),
            comp(self.encrypted_regex, "encrypted_regex"),
            comp(self.unencrypted_comment_regex, "unencrypted_comment_regex"),
            comp(self.encrypted_comment_regex, "encrypted_comment_regex"),
        )


@dataclass(frozen=True, slots=True)
class _CompiledRules:
    rules: EncryptionRules
    unencrypted_re: re.Pattern[str] | None
    encrypted_re: re.Pattern[str] | None
    unencrypted_comment_re: re.Pattern[str] | None
    encrypted_comment_re: re.Pattern[str] | None

    def should_encrypt(self, path: Sequence[str], stack: Sequence[Sequence[str]], is_comment: bool) -> bool:
        # Same precedence as sops: each configured rule overrides the previous verdict.
        encrypted = True
        rules = self.rules
        if rules.unencrypted_suffix and any(p.endswith(rules.unencrypted_suffix) for p in path):
            encrypted = False
        if rules.encrypted_suffix:
            encrypted = any(p.endswith(rules.encrypted_suffix) for p in path)
        if self.unencrypted_re is not None and any(self.unencrypted_re.search(p) for p in path):
            encrypted = False
        if self.encrypted_re is not None:
            encrypted = any(self.encrypted_re.search(p) for p in path)
        if self.unencrypted_comment_re is not None:
            pattern = self.unencrypted_comment_re
            if any(pattern.search(c) for level in stack for c in level):
                encrypted = False
        if self.encrypted_comment_re is not None:
            pattern = self.encrypted_comment_re
            encrypted = False
            last_level = len(stack) - 1
            for i, level in enumerate(stack):
                for j, c in enumerate(level):
                    # The comment that switches encryption on is itself left in clear.
                    if is_comment and i == last_level and j == len(level) - 1:
                        continue
                    if pattern.search(c):
                        encrypted = True
                        break
                if encrypted:
                    break
        return encrypted


LeafFn = Callable[[Scalar, list[str], list[list[str]]], Scalar]


def _walk_value(value: Any, path: list[str], stack: list[list[str]], on_leaf: LeafFn) -> Any:
    if isinstance(value, Branch):
        return _walk_branch(value, path, stack, on_leaf)
    if isinstance(value, list):
        return _walk_list(value, path, stack, on_leaf)
    if value is None:
        return None
    if isinstance(value, str | int | float | bool | bytes | Comment | datetime.date):
        # dates: objects parsed with a YAML 1.1 loader upstream of us carry timestamps as dates
        return on_leaf(value, path, stack)
    raise SopsFormatError(f"Cannot walk value, unknown type: {type(value).__name__}")


def _walk_list(values: list[Any], path: list[str], stack: list[list[str]], on_leaf: LeafFn) -> list[Any]:
    stack = [*stack, []]
    out: list[Any] = []
    for item in values:
        is_comment = isinstance(item, Comment)
        if is_comment:
            stack[-1] = [*stack[-1], item.value]
        out.append(_walk_value(item, path, stack, on_leaf))
        if not is_comment:
            stack[-1] = []
    return out


def _walk_branch(branch: Branch, path: list[str], stack: list[list[str]], on_leaf: LeafFn) -> Branch:
    stack = [*stack, []]
    out = Branch()
    for key, value in branch:
        if isinstance(key, Comment):
            stack[-1] = [*stack[-1], key.value]
            new_key = on_leaf(key, path, stack)
            if isinstance(new_key, str):
                new_key = Comment(new_key, key.inline)
            out.append((new_key, value))
            continue
        value_is_comment = isinstance(value, Comment)
        if value_is_comment:
            stack[-1] = [*stack[-1], value.value]
        if not isinstance(key, str):
            raise SopsFormatError(
                f"Tree contains a non-string key (type {type(key).__name__}). Only string keys are supported"
            )
        out.append((key, _walk_value(value, [*path, key], stack, on_leaf)))
        if not value_is_comment:
            stack[-1] = []
    return out


def decrypt_branches(
    branches: Sequence[Branch],
    *,
    key: bytes,
    rules: EncryptionRules,
    mac_only_encrypted: bool,
) -> tuple[list[Branch], str]:
    """Decrypt every encrypted leaf; return the plain branches and the computed MAC (hex)."""
    compiled = rules.compiled()
    digest = hashlib.sha512()
    if mac_only_encrypted:
        digest.update(MAC_ONLY_ENCRYPTED_INIT)

    def on_leaf(value: Scalar, path: list[str], stack: list[list[str]]) -> Scalar:
        is_comment = isinstance(value, Comment)
        encrypted = compiled.should_encrypt(path, stack, is_comment)
        result: Scalar = value
        if encrypted:
            aad = ":".join(path) + ":"
            if isinstance(value, Comment):
                try:
                    result = decrypt_value(value.value, key, aad)
                except SopsError:
                    result = value  # a comment written in clear by an older sops
                if isinstance(result, Comment):
                    result = Comment(result.value, value.inline)
            elif isinstance(value, str):
                try:
                    result = decrypt_value(value, key, aad)
                except SopsError as err:
                    raise type(err)(f"Could not decrypt value: {err}") from None
            else:
                raise SopsFormatError(f"Expected encrypted value as string, but got {type(value).__name__}")
        elif isinstance(value, str) and looks_encrypted(value):
            # Never hand on half-decrypted data (a rule sops applied that we read differently).
            raise SopsFormatError(
                f"the value at '{':'.join(path)}:' is encrypted but the document's rules say it should not be"
            )
        if (not mac_only_encrypted or encrypted) and not is_comment:
            digest.update(to_mac_bytes(result))
        return result

    out = []
    for branch in branches:
        try:
            out.append(_walk_branch(branch, [], [], on_leaf))
        except SopsError as err:
            raise type(err)(f"Error walking tree: {err}") from None
    return out, digest.hexdigest().upper()


def branch_from_mapping(obj: dict[str, Any]) -> Branch:
    """A JSON-like object as a ``Branch`` (keys kept in insertion order)."""
    return Branch((k, from_plain(v)) for k, v in obj.items())


def from_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return branch_from_mapping(value)
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    return value


def branch_to_mapping(branch: Branch) -> dict[str, Any]:
    """A ``Branch`` as a plain dict: comments dropped, ``bytes`` decoded as UTF-8."""
    return {k: _to_plain(v) for k, v in branch if not isinstance(k, Comment)}


def _to_plain(value: Any) -> Any:
    if isinstance(value, Branch):
        return branch_to_mapping(value)
    if isinstance(value, list):
        return [_to_plain(v) for v in value if not isinstance(v, Comment)]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
