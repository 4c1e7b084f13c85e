"""The ``sops`` metadata block: key groups, MAC, timestamps and encryption rules.

Contract:
- ``parse_metadata(mapping)`` accepts the block as plain Python values (after a store has
  un-flattened dotenv/INI metadata) and is weakly typed like sops' ``mapstructure`` decoding:
  ``"true"``/``"2"`` are accepted for booleans/integers.
- Key groups: ``key_groups`` when present (Shamir secret sharing between the groups, threshold
  ``shamir_threshold``, default all groups), otherwise one group of every top-level master key.
- Every master key kind sops writes is recognised (``age``, ``pgp``, ``kms``, ``gcp_kms``,
  ``hckms``, ``azure_kv``, ``hc_vault``) with the fields sops' stores define for it; unknown
  fields are ignored (as sops' struct decoding does). ``kms`` ``context`` is a string map (the
  KMS encryption context). Which kinds can be used is decided by ``keys``.
- Within a group the keys come in sops' effective decryption order (its build order, then a
  stable sort by ``[age, pgp]``): age, pgp, kms, gcp_kms, hckms, azure_kv, hc_vault, each kind in
  file order.
- ``MasterKey.to_string()`` is sops' ``ToString()`` of the key: the name the error chain shows.
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

# metadata list → (field naming the key, string fields), in sops' effective decryption order
KEY_KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "age": ("recipient", ()),
    "pgp": ("fp", ()),
    "kms": ("arn", ("role", "aws_profile")),
    "gcp_kms": ("resource_id", ()),
    "hckms": ("key_id", ()),
    "azure_kv": ("vault_url", ("name", "version")),
    "hc_vault": ("vault_address", ("engine_path", "key_name")),
}


@dataclass(frozen=True, slots=True)
class MasterKey:
    kind: str  # one of KEY_KINDS
    name: str  # recipient, fingerprint, ARN, resource id, vault URL/address, key id: public
    enc: str  # the data key (or a Shamir part) encrypted for this master key
    extra: Mapping[str, str] = field(default_factory=dict)  # the kind's other string fields
    context: Mapping[str, str] = field(default_factory=dict)  # kms: the encryption context

    def attr(self, name: str) -> str:
        return self.extra.get(name, "")

    def to_string(self) -> str:
        """sops' ``MasterKey.ToString()``: what ``UserError()`` names the key by."""
        if self.kind == "kms":
            text = self.name + (f"+{self.attr('role')}" if self.attr("role") else "")
            if self.context:
                text += "|" + ",".join(sorted(f"{k}:{v}" for k, v in self.context.items()))
            if self.attr("aws_profile"):
                text += f"|{self.attr('aws_profile')}"
            return text
        if self.kind == "azure_kv":
            return f"{self.name}/keys/{self.attr('name')}/{self.attr('version')}"
        if self.kind == "hc_vault":
            return f"{self.name}/v1/{self.attr('engine_path')}/keys/{self.attr('key_name')}"
        return self.name


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


def _string_map(mapping: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = mapping.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SopsFormatError(f"sops metadata field '{where}{key}' must be a mapping of strings")
    return {str(k): _str(value, k) for k in value}


def _group(mapping: Mapping[str, Any], where: str) -> tuple[MasterKey, ...]:
    keys: list[MasterKey] = []
    for kind, (name_field, fields) in KEY_KINDS.items():
        entries = mapping.get(kind)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise SopsFormatError(f"sops metadata field '{where}{kind}' must be a list")
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise SopsFormatError(f"sops metadata field '{where}{kind}' must be a list of mappings")
            extra = {name: _str(entry, name) for name in fields if entry.get(name) is not None}
            context = _string_map(entry, "context", f"{where}{kind}[{index}].") if kind == "kms" else {}
            keys.append(MasterKey(kind, _str(entry, name_field), _str(entry, "enc"), extra, context))
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
