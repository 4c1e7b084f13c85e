"""Azure for object-level workload identity (fluxcd/pkg ``auth/azure``): a ServiceAccount token as
the client assertion of the Entra ID application named by the ServiceAccount.

- Audience ``api://AzureADTokenExchange``; tenant and client from the annotations
  ``azure.workload.identity/tenant-id`` and ``azure.workload.identity/client-id`` (identity
  ``<tenant>/<client>``; a missing one: ``azure tenant ID is not set in the service account
  annotation azure.workload.identity/tenant-id``, or the client-ID equivalent).
- The token endpoint is ``<AZURE_AUTHORITY_HOST or https://login.microsoftonline.com/>
  <tenant>/oauth2/v2.0/token`` (azidentity's default authority host), through the Azure helper's
  ``client_assertion_token``; the scope comes from the Key Vault challenge and is part of the
  cache key (``scopes=…``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kustomize_controller.kustomize.sops.identity.access import annotations_of
from kustomize_controller.kustomize.sops.identity.serviceaccount import IdentityError
from kustomize_controller.kustomize.sops.keys.credentials import AccessToken, KeyServiceContext

AUDIENCE = "api://AzureADTokenExchange"
TENANT_ANNOTATION = "azure.workload.identity/tenant-id"
CLIENT_ANNOTATION = "azure.workload.identity/client-id"


def tenant_and_client(service_account: Mapping[str, Any]) -> tuple[str, str]:
    annotations = annotations_of(service_account)
    if TENANT_ANNOTATION not in annotations:
        raise IdentityError(f"azure tenant ID is not set in the service account annotation {TENANT_ANNOTATION}")
    if CLIENT_ANNOTATION not in annotations:
        raise IdentityError(f"azure client ID is not set in the service account annotation {CLIENT_ANNOTATION}")
    return annotations[TENANT_ANNOTATION], annotations[CLIENT_ANNOTATION]


class AzureToken:
    __slots__ = ("access", "expires_at")

    def __init__(self, access: AccessToken, now: datetime) -> None:
        self.access = access
        self.expires_at = access.expires or now  # no expiry: never served from the cache


class AzureProvider:
    name = "azure"

    def __init__(self, *, scope: str, context: KeyServiceContext) -> None:
        self._scope = scope
        self._context = context

    def cache_parts(self) -> Sequence[str]:
        return (f"scopes={self._scope}",)

    async def audiences(self, service_account: Mapping[str, Any]) -> list[str]:
        return [AUDIENCE]

    def identity(self, service_account: Mapping[str, Any]) -> str:
        tenant, client = tenant_and_client(service_account)
        return f"{tenant}/{client}"

    async def controller_token(self) -> AzureToken:
        from kustomize_controller.kustomize.sops.keys.azure_credentials import ControllerChain

        return AzureToken(await ControllerChain(self._context).azure_token(self._scope), self._context.clock.now())

    async def exchange(self, kube_token: str, service_account: Mapping[str, Any]) -> AzureToken:
        from kustomize_controller.kustomize.sops.keys.azure_credentials import client_assertion_token

        tenant, client = tenant_and_client(service_account)
        access = await client_assertion_token(
            kube_token, tenant_id=tenant, client_id=client, scope=self._scope,
            authority=self._context.environ.get("AZURE_AUTHORITY_HOST", ""), context=self._context,
        )
        return AzureToken(access, self._context.clock.now())
