"""Fetch the decryption keys of a Kustomization from the cluster, as Flux's ``ImportKeys`` does.

Contract:
- ``spec.decryption.secretRef`` set: that Secret (in the Kustomization's namespace) is read and
  the global ``--sops-age-secret`` is *not* used — upstream consults the global Secret only when
  a Kustomization has no ``secretRef``.
- No ``secretRef`` but a global age Secret configured: only its ``*.agekey`` entries are used.
- Neither: a decryptor without keys (documents then fail with "no age identity was provided" /
  "not supported: …", naming what they need).
- Errors are ``SopsError`` (a ``DecryptionError``, reason BuildFailed): a missing Secret carries
  the API server's message (``secrets "x" not found``) as upstream; other API errors read
  ``cannot get sops decryption Secret '<ns>/<name>': …`` (``cannot get sops SOPS age decryption
  Secret …`` for the global one). Transport errors are not retried here: the reconcile fails and
  is retried after ``retryInterval``, as upstream.
- Remote key services: credentials from the Secret first, then ``workload`` (object-level
  credentials of the chosen ServiceAccount, when the caller built them), then the controller's
  own environment (``environ``, by default a snapshot of the process environment taken now).
  Key services run on the calling event loop.
- The caller owns the returned decryptor and must ``close()`` it (or use ``with``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.kustomize.sops.errors import SopsError, SopsFormatError
from kustomize_controller.kustomize.sops.keys.credentials import Credentials

if TYPE_CHECKING:
    from kustomize_controller.kustomize.sops.decryptor import SopsDecryptor


class SecretReader(Protocol):
    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...


async def _secret_data(client: SecretReader, namespace: str, name: str, label: str) -> dict[str, bytes]:
    try:
        secret = await client.get("v1", "Secret", name, namespace)
    except NotFoundError as err:
        raise SopsError(err.message or str(err)) from err
    except KubeError as err:
        raise SopsError(f"cannot get {label}: {err}") from err
    data = secret.get("data") or {}
    if not isinstance(data, dict):
        raise SopsFormatError(f"{label} has no valid data")
    decoded: dict[str, bytes] = {}
    for key, value in data.items():
        try:
            decoded[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise SopsFormatError(f"{label} key '{key}' is not valid base64") from None
    return decoded


async def load_decryptor(
    *,
    client: SecretReader,
    namespace: str,
    secret_name: str | None,
    global_age_secret: tuple[str, str] | None = None,
    max_file_size: int | None = None,
    verify_mac: bool = True,
    workload: Credentials | None = None,
    environ: Mapping[str, str] | None = None,
) -> SopsDecryptor:
    """Build the ``SopsDecryptor`` of one reconcile.

    ``namespace``/``secret_name``: the Kustomization's namespace and ``spec.decryption.secretRef``
    name (``None`` when unset); ``global_age_secret``: ``(namespace, name)`` of
    ``--sops-age-secret`` in ``RUNTIME_NAMESPACE``, ``None`` when the flag is unset;
    ``max_file_size``: ``MAX_ENCRYPTED_FILE_SIZE`` when ``None``.
    """
    # imported here, at the first Kustomization that decrypts: the decryptor's ciphers, stores and key
    # services are not part of the controller's start-up (see the package's docstring)
    from kustomize_controller.kustomize.sops.decryptor import MAX_ENCRYPTED_FILE_SIZE, SopsDecryptor

    if max_file_size is None:
        max_file_size = MAX_ENCRYPTED_FILE_SIZE
    remote: dict[str, Any] = {
        "workload": workload,
        "environ": dict(os.environ if environ is None else environ),
        "loop": asyncio.get_running_loop(),
    }
    if secret_name:
        label = f"sops decryption Secret '{namespace}/{secret_name}'"
        data = await _secret_data(client, namespace, secret_name, label)
        return SopsDecryptor.from_secret_data(
            data, max_file_size=max_file_size, verify_mac=verify_mac, secret_label=label, **remote
        )
    if global_age_secret is not None:
        global_ns, global_name = global_age_secret
        label = f"sops SOPS age decryption Secret '{global_ns}/{global_name}'"
        data = await _secret_data(client, global_ns, global_name, label)
        return SopsDecryptor.from_secret_data(
            {},
            global_age_keys=data,
            max_file_size=max_file_size,
            verify_mac=verify_mac,
            global_secret_label=label,
            **remote,
        )
    return SopsDecryptor.from_secret_data({}, max_file_size=max_file_size, verify_mac=verify_mac, **remote)
