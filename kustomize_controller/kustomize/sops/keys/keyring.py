"""Every key this controller was given, and the recovery of a document's data key with them.

Contract:
- ``KeyRing.from_secret_data(data, global_age_keys=…, workload=…, environ=…, loop=…)``: Secret
  values named ``*.agekey`` are age identity files, ``*.asc`` armored OpenPGP private keys;
  ``sops.aws-kms``, ``sops.gcp-kms`` and ``sops.azure-kv`` are static credentials, parsed by
  their provider's module (imported only then); they beat ``workload`` (object-level
  credentials), which beat the key services' controller-level chains. Other keys are ignored,
  as upstream does. A malformed key or credential fails construction with upstream's
  ``failed to import '<key>' data from <secret>: …``.
- ``data_key(metadata)`` follows sops' ``GetDataKeyWithKeyServices``: in each key group the keys
  are tried in metadata order (age, pgp, kms, gcp_kms, hckms, azure_kv, hc_vault) until one
  succeeds; every group is attempted. One group: its part is the data key. Several: at least
  ``shamir_threshold`` parts (the stored value) are combined. Otherwise the error is sops'
  ``UserError()`` text (``usererror.py``), a ``SopsUnsupportedError`` when every failed key was of
  a kind this controller cannot use, else a ``SopsKeyError``.
- Remote kinds go through ``services.KeyServices`` (the event loop, a deadline per key).
- Recovered data keys, and failures, are cached per encrypted blob for the keyring's lifetime
  (one reconcile).
- ``close()`` removes the temporary GNUPGHOME, if one was created.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from kustomize_controller.kustomize.sops.errors import (
    SopsError,
    SopsFormatError,
    SopsKeyError,
    SopsUnsupportedError,
)
from kustomize_controller.kustomize.sops.keys import age, shamir
from kustomize_controller.kustomize.sops.keys.credentials import Credentials, KeyServiceContext
from kustomize_controller.kustomize.sops.keys.pgp import GnuPGKeyring
from kustomize_controller.kustomize.sops.keys.services import KeyServices
from kustomize_controller.kustomize.sops.keys.usererror import GroupResult, KeyFailure, data_key_error_text
from kustomize_controller.kustomize.sops.metadata import MasterKey, Metadata

AGE_EXT = ".agekey"
PGP_EXT = ".asc"
_CREDENTIALS = "kustomize_controller.kustomize.sops.keys"
# decryption Secret key → module whose ``parse_static(bytes, context) -> Credentials`` reads it
STATIC_CREDENTIALS: dict[str, str] = {
    "sops.aws-kms": f"{_CREDENTIALS}.aws_credentials",
    "sops.gcp-kms": f"{_CREDENTIALS}.gcp_credentials",
    "sops.azure-kv": f"{_CREDENTIALS}.azure_credentials",
    "sops.vault-token": f"{_CREDENTIALS}.hcvault",
}


class KeyRing:
    """The decryption keys of one reconcile."""

    def __init__(
        self,
        *,
        age_identities: age.AgeIdentities,
        pgp_keys: Mapping[str, bytes],
        services: KeyServices | None = None,
    ) -> None:
        self._age = age_identities
        self._pgp = GnuPGKeyring(pgp_keys)
        self._services = services or KeyServices(KeyServiceContext())
        self._cache: dict[tuple[str, str], bytes | SopsError] = {}

    @classmethod
    def from_secret_data(
        cls,
        data: Mapping[str, bytes],
        *,
        global_age_keys: Mapping[str, bytes] | None = None,
        secret_label: str = "decryption Secret",
        global_secret_label: str = "global age Secret",
        workload: Credentials | None = None,
        environ: Mapping[str, str] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> KeyRing:
        """``*_label`` name the Secrets in import errors (e.g. ``sops decryption Secret 'ns/name'``);
        ``environ`` is what the key services read their endpoints and controller-level chains from."""
        identities = age.AgeIdentities()
        pgp_keys: dict[str, bytes] = {}
        static = Credentials()
        base = KeyServiceContext(environ=dict(environ or {}))
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
                elif name in STATIC_CREDENTIALS and full:
                    static = static.with_fallback(_parse_static(name, value, label, base))
        credentials = static.with_fallback(workload) if workload is not None else static
        context = dataclasses.replace(base, credentials=credentials)
        return cls(age_identities=identities, pgp_keys=pgp_keys, services=KeyServices(context, loop=loop))

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
        return self._services.decrypt(key)

    def _unwrap_cached(self, key: MasterKey) -> bytes:
        # Failures are remembered too: a key service that is down costs one timeout per reconcile,
        # not one per document.
        cache_key = (key.kind, key.enc)
        if cache_key not in self._cache:
            try:
                self._cache[cache_key] = self._unwrap(key)
            except SopsError as err:
                self._cache[cache_key] = err
        found = self._cache[cache_key]
        if isinstance(found, SopsError):
            raise type(found)(str(found))
        return found

    def _group_part(self, group: tuple[MasterKey, ...]) -> tuple[bytes | None, list[KeyFailure], bool]:
        """The group's part (``None``: no key worked), its failures, and whether all were unsupported."""
        failures: list[KeyFailure] = []
        unsupported = True
        for key in group:
            try:
                return self._unwrap_cached(key), failures, False
            except SopsUnsupportedError as err:
                failures.append(KeyFailure(key.to_string(), str(err)))
            except SopsError as err:
                failures.append(KeyFailure(key.to_string(), str(err)))
                unsupported = False
        return None, failures, unsupported and bool(failures)

    def data_key(self, metadata: Metadata) -> bytes:
        parts: list[bytes] = []
        results: list[GroupResult] = []
        all_unsupported = True
        for group in metadata.key_groups:
            part, failures, unsupported = self._group_part(group)
            if part is not None:
                parts.append(part)
            else:
                all_unsupported = all_unsupported and unsupported
            results.append(GroupResult(tuple(failures), succeeded=part is not None))
        if len(metadata.key_groups) > 1:
            if len(parts) >= metadata.shamir_threshold:
                return _check_length(shamir.combine(parts))
        elif len(parts) == 1:
            return _check_length(parts[0])
        message = data_key_error_text(results, metadata.shamir_threshold)
        if all_unsupported:
            raise SopsUnsupportedError(message)
        raise SopsKeyError(message)


def _parse_static(name: str, value: bytes, label: str, context: KeyServiceContext) -> Credentials:
    module: Any = importlib.import_module(STATIC_CREDENTIALS[name])
    try:
        credentials: Credentials = module.parse_static(value, context)
    except SopsError as err:
        raise SopsFormatError(f"failed to import '{name}' data from {label}: {err}") from None
    return credentials


def _check_length(key: bytes) -> bytes:
    if len(key) != 32:
        raise SopsKeyError(f"the recovered data key has {len(key)} bytes, expected 32")
    return key
