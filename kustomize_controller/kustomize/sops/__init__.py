"""SOPS decryption without the sops binary: age (X25519, SSH), OpenPGP, AWS KMS, GCP KMS, Azure
Key Vault and Vault/OpenBao transit master keys, the YAML, JSON, dotenv, INI and binary stores,
whole objects, Secret fields and kustomize sources.

Public surface: :class:`SopsDecryptor` (the build pipeline's ``Decryptor``), :func:`load_decryptor`
(its keys fetched from the cluster), the exception tree
in :mod:`.errors`, and the helpers the reconciler needs around it (:func:`is_encrypted_secret`,
:func:`is_decryption_disabled`). Modules, one concept each: ``formats`` (which store),
``cipher`` (one ``ENC[…]`` value), ``tree`` (walk, rules, MAC), ``metadata`` (the ``sops``
block), ``stores/`` (file formats), ``keys/`` (age, PGP, Shamir, the keyring, the remote key services
and their credentials), ``identity/`` (workload identity: ServiceAccount tokens exchanged with
the providers, the controller's own, through the token cache), ``document`` (one
document end to end), ``sources`` (kustomization walk before the build), ``decryptor``,
``loader`` (keys from the cluster, as upstream's ``ImportKeys``).

The names are loaded on first use (PEP 562 ``__getattr__``): the decryptor pulls in cryptography's
ciphers, ruamel.yaml, pyrage and the key services, which a controller whose Kustomizations decrypt
nothing never needs, and the controller imports ``identity.workload`` (this package's ``__init__``
runs first) at start-up. ``tests/unit/test_import_footprint.py`` keeps it so.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kustomize_controller.kustomize.sops.decryptor import (
        DECRYPT_ANNOTATION,
        MAX_ENCRYPTED_FILE_SIZE,
        SopsDecryptor,
        gvk_string,
        is_decryption_disabled,
        is_encrypted_secret,
        is_sops_encrypted,
    )
    from kustomize_controller.kustomize.sops.errors import (
        SopsError,
        SopsFormatError,
        SopsIntegrityError,
        SopsKeyError,
        SopsUnsupportedError,
    )
    from kustomize_controller.kustomize.sops.loader import load_decryptor

_HOMES = {
    "DECRYPT_ANNOTATION": "decryptor",
    "MAX_ENCRYPTED_FILE_SIZE": "decryptor",
    "SopsDecryptor": "decryptor",
    "gvk_string": "decryptor",
    "is_decryption_disabled": "decryptor",
    "is_encrypted_secret": "decryptor",
    "is_sops_encrypted": "decryptor",
    "SopsError": "errors",
    "SopsFormatError": "errors",
    "SopsIntegrityError": "errors",
    "SopsKeyError": "errors",
    "SopsUnsupportedError": "errors",
    "load_decryptor": "loader",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DECRYPT_ANNOTATION",
    "MAX_ENCRYPTED_FILE_SIZE",
    "SopsDecryptor",
    "SopsError",
    "SopsFormatError",
    "SopsIntegrityError",
    "SopsKeyError",
    "SopsUnsupportedError",
    "gvk_string",
    "is_decryption_disabled",
    "is_encrypted_secret",
    "is_sops_encrypted",
    "load_decryptor",
]
