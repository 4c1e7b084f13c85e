"""The "generic" provider of fluxcd/pkg ``auth``: the access token is a Kubernetes ServiceAccount
token itself (used for Vault/OpenBao Kubernetes and JWT auth, audience = the Vault address).

- Object level: the TokenRequest's token, unchanged; identity ``system:serviceaccount:<ns>:<name>``.
- Controller level: the controller's own ServiceAccount, named by the ``sub`` claim of its token
  file, asks for a token for itself (``serviceaccounts/token`` create on its own ServiceAccount).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kustomize_controller.kustomize.sops.identity.serviceaccount import (
    CONTROLLER_TOKEN_FILE,
    IdentityError,
    KubeToken,
    ServiceAccounts,
    controller_service_account,
    expiry_of,
)


class KubernetesTokenProvider:
    name = "generic"

    def __init__(
        self, accounts: ServiceAccounts, *, audiences: Sequence[str], token_file: Path = CONTROLLER_TOKEN_FILE
    ) -> None:
        self._accounts = accounts
        self._audiences = list(audiences)
        self._token_file = token_file

    def cache_parts(self) -> Sequence[str]:
        return ()

    async def audiences(self, service_account: Mapping[str, Any]) -> list[str]:
        return []

    def identity(self, service_account: Mapping[str, Any]) -> str:
        metadata = service_account.get("metadata") or {}
        return f"system:serviceaccount:{metadata.get('namespace', '')}:{metadata.get('name', '')}"

    async def controller_token(self) -> KubeToken:
        try:
            namespace, name = await controller_service_account(self._token_file)
            return await self._accounts.token(namespace, name, self._audiences, controller=True)
        except IdentityError as err:
            raise IdentityError(f"failed to create provider access token for the controller: {err}") from None

    async def exchange(self, kube_token: str, service_account: Mapping[str, Any]) -> KubeToken:
        return KubeToken(kube_token, expiry_of(kube_token))
