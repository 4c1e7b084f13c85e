"""Every key this controller was given, and the recovery of a document's data key with them.

Contract:
- ``KeyRing.from_secret_data(data, global_age_keys=…)``: Secret values named ``*.agekey`` are age
  identity files, ``*.asc`` armored OpenPGP private keys; ``sops.vault-token``,
  ``sops.aws-kms``, ``sops.azure-kv`` and ``sops.gcp-kms`` are credentials for key services this
  controller does not implement: they are recorded (by name only) so that a failed decryption
  names them. Other keys are ignored, as upstream does. A malformed age key fails construction.
- ``data_key(metadata)`` tries, in each key group, age keys first, then PGP, then the rest (as
  sops' default decryption order), stops at the first success, and combines Shamir parts when
  there are several groups. Kinds that cannot be used here (KMS, Vault, post-quantum age, age
  plugins) fail with ``not supported: <kind>``; no key kind is skipped silently: when nothing
  works the error lists every key tried and why. If every failure is "not supported" the error
  is a ``SopsUnsupportedError``.
- Recovered data keys are cached per encrypted blob for the keyring's lifetime (one reconcile).
- ``close()`` removes the temporary GNUPGHOME, if one was created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kustomize_controller.kustomize.sops.errors import (
    SopsError,
    SopsFormatError,
    SopsKeyError,
    SopsUnsupportedError,
)
from kustomize_controller.kustomize.sops.keys import age, shamir
from kustomize_controller.kustomize.sops.keys.pgp import GnuPGKeyring
from kustomize_controller.kustomize.sops.metadata import MasterKey, Metadata

AGE_EXT = ".agekey"
PGP_EXT = ".asc"
UNSUPPORTED_CREDENTIALS: dict[str, str] = {
    "sops.vault-token": "HashiCorp Vault",
    "sops.aws-kms": "AWS KMS",
    "sops.azure-kv": "Azure Key Vault",
    "sops.gcp-kms": "GCP KMS",
}
KIND_NAMES: dict[str, str] = {
    "age": "age",
    "pgp": "PGP",
    "kms": "AWS KMS",
    "gcp_kms": "GCP KMS",
    "azure_kv": "Azure Key Vault",
    "hc_vault": "HashiCorp Vault",
    "hckms": "HuaweiCloud KMS",
}
_ORDER = {"age": 0, "pgp": 1}


@dataclass(frozen=True, slots=True)
class _KeyFailure:
    key: MasterKey
    message: str
    unsupported: bool


class KeyRing:
    """The decryption keys of one reconcile."""

    def __init__(
        self,
        *,
        age_identities: age.AgeIdentities,
        pgp_keys: Mapping[str, bytes],
        unusable_credentials: list[str],
    ) -> None:
        self._age = age_identities
        self._pgp = GnuPGKeyring(pgp_keys)
        self._unusable = list(unusable_credentials)
        self._cache: dict[tuple[str, str], bytes] = {}

    @classmethod
    def from_secret_data(
        cls,
        data: Mapping[str, bytes],
        *,
        global_age_keys: Mapping[str, bytes] | None = None,
        secret_label: str = "decryption Secret",
        global_secret_label: str = "global age Secret",
    ) -> KeyRing:
        """``*_label`` name the Secrets in import errors (e.g. ``sops decryption Secret 'ns/name'``)."""
        identities = age.AgeIdentities()
        pgp_keys: dict[str, bytes] = {}
        unusable: list[str] = []
        sources = [(secret_label, data, True), (global_secret_label, global_age_keys or {}, False)]
        for label, values, full in sources:
            for name in sorted(values):
                value = values[name]
                if name.endswith(AGE_EXT):
                    try:
                        identities.extend(age.parse_identities(value.decode("utf-8", errors="replace")))
                    except SopsError as err:
                        raise SopsFormatError(f"failed to import '{name}' data from {label}: {err}") from None
                elif name.endswith(PGP_EXT) and full:
                    pgp_keys[name] = value
                elif name in UNSUPPORTED_CREDENTIALS and full:
                    unusable.append(f"'{name}' ({UNSUPPORTED_CREDENTIALS[name]})")
        return cls(age_identities=identities, pgp_keys=pgp_keys, unusable_credentials=unusable)

    def close(self) -> None:
        self._pgp.close()
        self._cache.clear()

    @property
    def gnupg_home(self) -> str | None:
        return self._pgp.home

    def _unwrap(self, key: MasterKey) -> bytes:
        if key.kind == "age":
            if age.is_post_quantum(key.name, key.enc):
                detail = (
                    f" (the Secret holds {self._age.post_quantum} post-quantum identity(ies) that cannot be used)"
                    if self._age.post_quantum
                    else ""
                )
                raise SopsUnsupportedError(f"not supported: post-quantum age (ML-KEM-768 + X25519) recipient{detail}")
            plugin = age.plugin_name(key.name)
            if plugin is not None:
                raise SopsUnsupportedError(f"not supported: age plugin '{plugin}' recipient")
            return age.decrypt_data_key(key.enc, self._age.usable)
        if key.kind == "pgp":
            return self._pgp.decrypt_data_key(key.enc, key.name)
        raise SopsUnsupportedError(f"not supported: {KIND_NAMES.get(key.kind, key.kind)}")

    def _unwrap_cached(self, key: MasterKey) -> bytes:
        cache_key = (key.kind, key.enc)
        if cache_key not in self._cache:
            self._cache[cache_key] = self._unwrap(key)
        return self._cache[cache_key]

    def _group_part(self, group: tuple[MasterKey, ...]) -> tuple[bytes | None, list[_KeyFailure]]:
        failures: list[_KeyFailure] = []
        ordered = sorted(group, key=lambda k: _ORDER.get(k.kind, len(_ORDER)))
        for key in ordered:
            try:
                return self._unwrap_cached(key), failures
            except SopsUnsupportedError as err:
                failures.append(_KeyFailure(key, str(err), unsupported=True))
            except SopsError as err:
                failures.append(_KeyFailure(key, str(err), unsupported=False))
        return None, failures

    def data_key(self, metadata: Metadata) -> bytes:
        parts: list[bytes] = []
        group_errors: list[str] = []
        all_unsupported = True
        for index, group in enumerate(metadata.key_groups):
            part, failures = self._group_part(group)
            if part is not None:
                parts.append(part)
                continue
            all_unsupported = all_unsupported and all(f.unsupported for f in failures)
            detail = "; ".join(f"{f.key.describe()}: {f.message}" for f in failures) or "empty key group"
            group_errors.append(f"group {index}: {detail}")
        groups = len(metadata.key_groups)
        if groups == 1:
            if parts:
                return _check_length(parts[0])
            needed = 1
        else:
            needed = metadata.shamir_threshold or groups
            if len(parts) >= needed:
                return _check_length(shamir.combine(parts))
        message = (
            f"failed to get the data key required to decrypt the SOPS file: {needed} successful "
            f"group(s) required, got {len(parts)}: " + " | ".join(group_errors)
        )
        if self._unusable:
            message += f"; keys given but not supported: {', '.join(self._unusable)}"
        if all_unsupported and group_errors:
            raise SopsUnsupportedError(message)
        raise SopsKeyError(message)


def _check_length(key: bytes) -> bytes:
    if len(key) != 32:
        raise SopsKeyError(f"the recovered data key has {len(key)} bytes, expected 32")
    return key
