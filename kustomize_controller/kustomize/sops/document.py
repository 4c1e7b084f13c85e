"""Decrypt one SOPS document: bytes in a store format, or an object already parsed from JSON.

Contract:
- Steps and their error prefixes follow Flux's decryptor: ``failed to load encrypted <F>
  data``, ``cannot get sops data key``, ``error decrypting sops tree``, ``failed to verify sops
  data integrity``, ``failed to emit encrypted <F> file as decrypted <G>``.
- The stored MAC is always authenticated (AES-GCM with ``lastmodified`` as AAD) when present.
  With ``verify_mac=True`` it must also equal the MAC computed over the decrypted tree; a
  missing MAC then fails too. Callers turn comparison off only for objects that went through
  ``kustomize build`` (it rewrites names, namespaces and key order, so the MAC cannot match —
  upstream never compares it at all).
- Metadata that selects leaves by comment (``*_comment_regex``): YAML files are then re-read
  with their comments (``stores/yaml_comments.py``); parsed objects have lost theirs and are
  refused, since decrypting them would leave values half-decrypted.
- Nothing here logs; messages hold no plaintext and no key.
"""

from __future__ import annotations

from typing import Any

from kustomize_controller.kustomize.sops.cipher import decrypt_value
from kustomize_controller.kustomize.sops.errors import (
    SopsError,
    SopsIntegrityError,
    SopsUnsupportedError,
)
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.metadata import Metadata, parse_metadata
from kustomize_controller.kustomize.sops.stores import emit_plain, extract_nested_metadata, load_encrypted
from kustomize_controller.kustomize.sops.tree import Branch, branch_from_mapping, branch_to_mapping, decrypt_branches


def _rewrap(prefix: str, err: SopsError) -> SopsError:
    return type(err)(f"{prefix}: {err}")


def decrypt_tree(
    branches: list[Branch],
    metadata: Metadata,
    *,
    keyring: KeyRing,
    verify_mac: bool,
    comments_available: bool,
) -> list[Branch]:
    if metadata.rules.uses_comments and not comments_available:
        raise SopsUnsupportedError(
            "not supported: encrypted_comment_regex/unencrypted_comment_regex in an already built "
            "object (its comments are gone)"
        )
    try:
        key = keyring.data_key(metadata)
    except SopsError as err:
        raise _rewrap("cannot get sops data key", err) from None
    try:
        plain, computed = decrypt_branches(
            branches, key=key, rules=metadata.rules, mac_only_encrypted=metadata.mac_only_encrypted
        )
    except SopsError as err:
        raise _rewrap("error decrypting sops tree", err) from None
    stored = ""
    if metadata.mac:
        try:
            stored_value = decrypt_value(metadata.mac, key, metadata.mac_aad)
        except SopsError as err:
            raise _rewrap("failed to verify sops data integrity", err) from None
        if not isinstance(stored_value, str):
            raise SopsIntegrityError("failed to verify sops data integrity: the stored MAC is not a string")
        stored = stored_value
    if verify_mac and stored != computed:
        if not stored:
            raise SopsIntegrityError("failed to verify sops data integrity: expected mac 'no MAC'")
        raise SopsIntegrityError(
            "failed to verify sops data integrity: MAC mismatch, the document was modified after encryption"
        )
    return plain


def decrypt_bytes(
    data: bytes,
    input_format: Format,
    output_format: Format,
    *,
    keyring: KeyRing,
    verify_mac: bool = True,
) -> bytes:
    """Decrypt a file's content and write it out in ``output_format``."""
    try:
        branches, raw_metadata = load_encrypted(data, input_format)
        metadata = parse_metadata(raw_metadata)
        if metadata.rules.uses_comments and input_format is Format.YAML:
            branches, _ = load_encrypted(data, input_format, yaml_comments=True)
    except SopsError as err:
        raise _rewrap(f"failed to load encrypted {input_format.value} data", err) from None
    plain = decrypt_tree(branches, metadata, keyring=keyring, verify_mac=verify_mac, comments_available=True)
    try:
        return emit_plain(plain, output_format)
    except SopsError as err:
        raise _rewrap(
            f"failed to emit encrypted {input_format.value} file as decrypted {output_format.value}", err
        ) from None


def decrypt_mapping(obj: dict[str, Any], *, keyring: KeyRing, verify_mac: bool) -> dict[str, Any]:
    """Decrypt an object with a top-level ``sops`` key; returns a new object without it."""
    try:
        branches, raw_metadata = extract_nested_metadata([branch_from_mapping(obj)])
        metadata = parse_metadata(raw_metadata)
    except SopsError as err:
        raise _rewrap("failed to load encrypted JSON data", err) from None
    plain = decrypt_tree(branches, metadata, keyring=keyring, verify_mac=verify_mac, comments_available=False)
    return branch_to_mapping(plain[0])
