"""The seam between the keyring and the remote key services: which module decrypts which master
key kind, and how a worker thread gets an answer from a coroutine.

Contract:
- :data:`KEY_SERVICES` maps a metadata kind to the module implementing it. A module exposes
  ``async def decrypt_data_key(key: MasterKey, context: KeyServiceContext) -> bytes`` and raises
  ``SopsError`` with upstream's message (no secret in it). Modules are imported on first use, so a
  controller that never meets a cloud key never loads them (nor what they import).
- A kind mapped to ``None`` is known but not implemented: ``not supported: <provider>``
  (``SopsUnsupportedError``).
- :class:`KeyServices` is called by the keyring in a worker thread (the build pipeline runs
  decryption there). It runs the coroutine on the controller's event loop — aiohttp sessions,
  the Kubernetes client and token caches live there — and waits at most ``context.deadline``
  seconds; a key service that does not answer fails that key, it never holds the worker
  longer. Without a loop (a CLI or a unit test calling the decryptor directly) it runs the
  coroutine on a private loop in the calling thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kustomize_controller.kustomize.sops.errors import SopsKeyError, SopsUnsupportedError
from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
from kustomize_controller.kustomize.sops.metadata import MasterKey

_PACKAGE = "kustomize_controller.kustomize.sops.keys"

KEY_SERVICES: dict[str, str | None] = {
    "kms": f"{_PACKAGE}.awskms",
    "gcp_kms": f"{_PACKAGE}.gcpkms",
    "azure_kv": f"{_PACKAGE}.azkv",
    "hc_vault": f"{_PACKAGE}.hcvault",
    "hckms": None,  # HuaweiCloud KMS: not supported (docs/differences.md)
}

PROVIDER_NAMES: dict[str, str] = {
    "age": "age",
    "pgp": "PGP",
    "kms": "AWS KMS",
    "gcp_kms": "GCP KMS",
    "hckms": "HuaweiCloud KMS",
    "azure_kv": "Azure Key Vault",
    "hc_vault": "HashiCorp Vault",
}

DecryptFn = Callable[[MasterKey, KeyServiceContext], Awaitable[bytes]]


def service_for(kind: str) -> DecryptFn:
    module_name = KEY_SERVICES.get(kind)
    if module_name is None:
        raise SopsUnsupportedError(f"not supported: {PROVIDER_NAMES.get(kind, kind)}")
    module = importlib.import_module(module_name)
    fn: DecryptFn = module.decrypt_data_key
    return fn


class KeyServices:
    """Remote master keys of one reconcile, decrypted from a worker thread."""

    def __init__(self, context: KeyServiceContext, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.context = context
        self._loop = loop

    def decrypt(self, key: MasterKey) -> bytes:
        fn = service_for(key.kind)
        return self._run(fn(key, self.context), PROVIDER_NAMES.get(key.kind, key.kind))

    def _run(self, awaitable: Awaitable[bytes], provider: str) -> bytes:
        deadline = self.context.deadline

        async def bounded() -> bytes:
            try:
                return await asyncio.wait_for(awaitable, deadline)
            except TimeoutError:
                raise SopsKeyError(f"{provider} did not answer within {deadline:g}s") from None

        loop = self._loop
        if loop is None or loop.is_closed():
            return asyncio.run(bounded())
        if _running_loop() is loop:
            _close(awaitable)
            raise SopsKeyError(f"{provider}: key services cannot be called on the event loop thread")
        request = bounded()
        try:
            future = asyncio.run_coroutine_threadsafe(request, loop)
        except RuntimeError:  # the loop closed since is_closed() above: the controller has stopped
            request.close()
            _close(awaitable)
            raise SopsKeyError(f"{provider}: the request was cancelled (the controller is stopping)") from None
        try:
            # wait_for above answers first; this only guards against a loop that stopped
            return future.result(deadline + 5.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise SopsKeyError(f"{provider} did not answer within {deadline:g}s") from None
        except concurrent.futures.CancelledError:  # the controller is shutting down
            raise SopsKeyError(f"{provider}: the request was cancelled") from None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _close(awaitable: Awaitable[Any]) -> None:
    if isinstance(awaitable, Coroutine):
        awaitable.close()
