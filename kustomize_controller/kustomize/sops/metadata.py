"""The ``sops`` metadata block: key groups, MAC, timestamps and encryption rules.

Contract:
- ``parse_metadata(mapping)`` accepts the block as plain Python values (after a store has
  un-flattened dotenv/INI metadata) and is weakly typed like sops' ``mapstructure`` decoding:
  ``"true"``/``"2"`` are accepted for booleans/integers.
- Key groups: ``key_groups`` when present (Shamir secret sharing between the groups, threshold
  ``shamir_threshold``, default all groups), otherwise one group of every top-level master key.
- Every master key kind sops writes is recognised (``age``, ``pgp``, ``kms``, ``gcp_kms``,
  ``azure_kv``, ``hc_vault``, ``hckms``); which ones can be used is decided by ``keys``.
- ``mac_aad`` is ``lastmodified`` re-formatted like Go's ``time.Format(time.RFC3339)`` (second
  precision, ``Z`` for a zero offset): that string is the MAC's additional data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.tree import EncryptionRules

DEFAULT_UNENCRYPTED_SUFFIX = "_unencrypted"

# metadata field → (master key kind, field that names the key in messages)
KEY_KINDS: dict[str, str] = {
    "age": "recipient",
    "pgp": "fp",
    "kms": "arn",
    "gcp_kms": "resource_id",
    "azure_kv": "vault_url",
    "hc_vault": "vault_address",
    "hckms": "key_id",
}


@dataclass(frozen=True, slots=True)
class MasterKey:
    kind: str  # one of KEY_KINDS
    name: str  # recipient, fingerprint, ARN, …: public, safe to show
    enc: str  # the data key (or a Shamir part) encrypted for this master key
    extra: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        if len(self.name) > 72:  # post-quantum age recipients run to ~2 kB
            return f"{self.kind} {self.name[:32]}…{self.name[-8:]}"
        if self.kind == "azure_kv" and self.extra.get("name"):
            return f"{self.kind} {self.name}/keys/{self.extra['name']}"
        if self.kind == "hc_vault" and self.extra.get("key_name"):
            return f"{self.kind} {self.name}/v1/{self.extra.get('engine_path', '')}/keys/{self.extra['key_name']}"
        return f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class Metadata:
    key_groups: tuple[tuple[MasterKey, ...], ...]
    shamir_threshold: int
    last_modified: str
    mac: str
    mac_only_encrypted: bool
    rules: EncryptionRules
    version: str

    @property
    def mac_aad(self) -> str:
        return go_rfc3339(self.last_modified)


def go_rfc3339(text: str) -> str:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise SopsFormatError("sops metadata field 'lastmodified' is not an RFC 3339 timestamp") from None
    if when.tzinfo is None:
        raise SopsFormatError("sops metadata field 'lastmodified' has no time zone")
    offset = when.utcoffset() or timedelta(0)
    base = when.replace(microsecond=0, tzinfo=None).isoformat()
    if offset == timedelta(0):
        return base + "Z"
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{base}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _str(mapping: Mapping[str, Any], key: str) -> str:
    value = mapping.get(key)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise SopsFormatError(f"sops metadata field '{key}' must be a string")


def _bool(mapping: Mapping[str, Any], key: str) -> bool:
    value = mapping.get(key)
    if value is None or value == "":
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str) and value.lower() in ("1", "t", "true"):
        return True
    if isinstance(value, str) and value.lower() in ("0", "f", "false"):
        return False
    raise SopsFormatError(f"sops metadata field '{key}' must be a boolean")


def _int(mapping: Mapping[str, Any], key: str) -> int:
    value = mapping.get(key)
    if value is None or value == "":
        return 0
    try:
        if isinstance(value, bool):
            raise ValueError(key)
        return int(value)
    except (TypeError, ValueError):
        raise SopsFormatError(f"sops metadata field '{key}' must be an integer") from None


def _group(mapping: Mapping[str, Any], where: str) -> tuple[MasterKey, ...]:
    keys: list[MasterKey] = []
    for kind, name_field in KEY_KINDS.items():
        entries = mapping.get(kind)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise SopsFormatError(f"sops metadata field '{where}{kind}' must be a list")
        for entry in entries:
            if not isinstance(entry, Mapping):
                raise SopsFormatError(f"sops metadata field '{where}{kind}' must be a list of mappings")
            extra = {k: _str(entry, k) for k in entry if k not in (name_field, "enc")}
            keys.append(MasterKey(kind, _str(entry, name_field), _str(entry, "enc"), extra))
    return tuple(keys)


def parse_metadata(mapping: Mapping[str, Any]) -> Metadata:
    """Read the ``sops`` block; raises ``SopsFormatError`` when it is malformed."""
    if not isinstance(mapping, Mapping):
        raise SopsFormatError("Found sops entry that is not a mapping")
    raw_groups = mapping.get("key_groups")
    if raw_groups:
        if not isinstance(raw_groups, list) or not all(isinstance(g, Mapping) for g in raw_groups):
            raise SopsFormatError("sops metadata field 'key_groups' must be a list of mappings")
        groups = tuple(_group(g, f"key_groups[{i}].") for i, g in enumerate(raw_groups))
    else:
        groups = (_group(mapping, ""),)
    if not any(groups):
        raise SopsFormatError("sops metadata has no master keys")
    last_modified = _str(mapping, "lastmodified")
    if not last_modified:
        raise SopsFormatError("sops metadata field 'lastmodified' is missing")
    rules = EncryptionRules(
        unencrypted_suffix=_str(mapping, "unencrypted_suffix"),
        encrypted_suffix=_str(mapping, "encrypted_suffix"),
        unencrypted_regex=_str(mapping, "unencrypted_regex"),
        encrypted_regex=_str(mapping, "encrypted_regex"),
        unencrypted_comment_regex=_str(mapping, "unencrypted_comment_regex"),
        encrypted_comment_regex=_str(mapping, "encrypted_comment_regex"),
    )
    rule_count = sum(
        bool(r)
        for r in (
            rules.unencrypted_suffix,
            rules.encrypted_suffix,
            rules.unencrypted_regex,
            rules.encrypted_regex,
            rules.unencrypted_comment_regex,
            rules.encrypted_comment_regex,
        )
    )
    if rule_count > 1:
        raise SopsFormatError(
            "Cannot use more than one of encrypted_suffix, unencrypted_suffix, encrypted_regex, "
            "unencrypted_regex, encrypted_comment_regex, or unencrypted_comment_regex in the same file"
        )
    if rule_count == 0:
        rules = EncryptionRules(unencrypted_suffix=DEFAULT_UNENCRYPTED_SUFFIX)
    metadata = Metadata(
        key_groups=groups,
        shamir_threshold=_int(mapping, "shamir_threshold"),
        last_modified=last_modified,
        mac=_str(mapping, "mac"),
        mac_only_encrypted=_bool(mapping, "mac_only_encrypted"),
        rules=rules,
        version=_str(mapping, "version"),
    )
    metadata.mac_aad  # noqa: B018 - validate the timestamp now, not halfway through decryption
    return metadata
