"""Vault/OpenBao Kubernetes (or JWT) auth for SOPS decryption, configured by ``--sops-vault-configmap``.

Contract (upstream ``decryptor.go`` ``vaultK8sAuth``):
- The ConfigMap ``<RUNTIME_NAMESPACE>/<name>`` holds ``config.yaml``: ``instances:`` a list of
  ``{address, loginPath}`` (keys matched case-insensitively, as Go's JSON decoding). It is read
  at most once per reconcile, when a Vault key first needs a token; a failed read is not
  remembered. It is also the allow-list: an address must equal an ``address`` entry exactly.
- Per address: a Kubernetes token with audience = the address (the decryption ServiceAccount's
  with ``spec.decryption.serviceAccountName``/``--default-decryption-service-account``, else the
  controller's own; token cache operation ``decrypt_with_vault``), the Vault role
  ``<namespace>_<name>`` read from the issued token's ``sub``, then ``PUT <address>/v1/<loginPath>``
  with ``{"role", "jwt"}``; ``auth.client_token`` is the Vault token, kept for the reconcile.
  Concurrent lookups of one reconcile share one login (the lock is held while logging in).
- Error texts are upstream's (``failed to get Vault ConfigMap '<ns>/<name>': …``, ``Vault
  ConfigMap … is missing the 'config.yaml' key``, ``failed to parse 'config.yaml' in Vault
  ConfigMap …``, ``no Vault login path configured for address …``, ``failed to issue Kubernetes
  token for Vault authentication: …``, ``failed to derive Vault role for authentication: …``,
  ``failed to authenticate with Vault '<addr>' at login path '<path>' as role '<role>': …``,
  ``Vault '<addr>' returned no token for login at '<path>' as role '<role>'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import yaml

from kustomize_controller.kube.errors import ApiError, KubeError
from kustomize_controller.kustomize.sops.identity.serviceaccount import ApiClient, IdentityError, service_account_of
from kustomize_controller.kustomize.sops.keys.hcvault import (
    VaultClientConfig,
    VaultError,
    VaultRequestError,
    vault_write,
)

CONFIG_KEY = "config.yaml"


def _field(mapping: Mapping[str, Any], name: str) -> Any:
    for key, value in mapping.items():
        if isinstance(key, str) and key.lower() == name.lower():
            return value
    return None


def parse_login_paths(text: str) -> dict[str, str]:
    """``address → loginPath`` from ``config.yaml``; raises ``ValueError``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ValueError(str(err).replace("\n", " ")) from None
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise ValueError("json: cannot unmarshal into Go value of type v1.VaultConfig")
    instances = _field(document, "instances")
    if instances is None:
        return {}
    if not isinstance(instances, list):
        raise ValueError("json: cannot unmarshal into Go struct field VaultConfig.instances of type []v1.VaultInstance")
    paths: dict[str, str] = {}
    for instance in instances:
        if not isinstance(instance, Mapping):
            raise ValueError(
                "json: cannot unmarshal into Go struct field VaultConfig.instances of type v1.VaultInstance"
            )
        address, login_path = _field(instance, "address"), _field(instance, "loginPath")
        paths["" if address is None else str(address)] = "" if login_path is None else str(login_path)
    return paths


class VaultKubernetesAuth:
    """Vault tokens by Kubernetes auth for one reconcile (a ``credentials.VaultTokenSource``)."""

    def __init__(
        self,
        *,
        config: VaultClientConfig,
        client: ApiClient,
        configmap: tuple[str, str],
        issue: Callable[[str], Awaitable[str]],
    ) -> None:
        """``client``: reads the ConfigMap (``get``); ``issue(address)``: a Kubernetes token with
        that audience (object or controller level, through the token cache)."""
        self._config = config
        self._client = client
        self._configmap = configmap
        self._issue = issue
        self._lock = asyncio.Lock()
        self._tokens: dict[str, str] = {}
        self._login_paths: dict[str, str] | None = None

    @property
    def _label(self) -> str:
        return f"{self._configmap[0]}/{self._configmap[1]}"

    async def _load(self) -> dict[str, str]:
        namespace, name = self._configmap
        try:
            configmap = await self._client.get("v1", "ConfigMap", name, namespace)
        except KubeError as err:
            detail = err.message if isinstance(err, ApiError) and err.message else str(err)
            raise VaultError(f"failed to get Vault ConfigMap '{self._label}': {detail}") from None
        data = configmap.get("data") or {}
        if not isinstance(data, Mapping) or CONFIG_KEY not in data:
            raise VaultError(f"Vault ConfigMap '{self._label}' is missing the '{CONFIG_KEY}' key")
        try:
            return parse_login_paths(str(data[CONFIG_KEY]))
        except ValueError as err:
            raise VaultError(f"failed to parse '{CONFIG_KEY}' in Vault ConfigMap '{self._label}': {err}") from None

    async def vault_token(self, address: str) -> str | None:
        async with self._lock:
            if address in self._tokens:
                return self._tokens[address]
            if self._login_paths is None:
                self._login_paths = await self._load()
            login_path = self._login_paths.get(address, "")
            if not login_path:
                raise VaultError(
                    f"no Vault login path configured for address '{address}' in ConfigMap '{self._label}'"
                )
            try:
                jwt = await self._issue(address)
            except IdentityError as err:
                raise VaultError(f"failed to issue Kubernetes token for Vault authentication: {err}") from None
            try:
                namespace, name = service_account_of(jwt)
            except ValueError as err:
                raise VaultError(f"failed to derive Vault role for authentication: {err}") from None
            role = f"{namespace}_{name}"
            token = await self._login(address, login_path, role, jwt)
            self._tokens[address] = token
            return token

    async def _login(self, address: str, login_path: str, role: str, jwt: str) -> str:
        where = f"Vault '{address}' at login path '{login_path}' as role '{role}'"
        try:
            answer = await vault_write(
                self._config, address=address, path=login_path,
                body={"role": role, "jwt": jwt}, token="",
            )
        except VaultRequestError as err:
            raise VaultError(f"failed to authenticate with {where}: {err}") from None
        auth = answer.get("auth") if answer is not None else None
        token = auth.get("client_token") if isinstance(auth, Mapping) else None
        if not isinstance(token, str) or not token:
            raise VaultError(f"Vault '{address}' returned no token for login at '{login_path}' as role '{role}'")
        return token
