"""The secret-less credentials of one reconcile (upstream ``Decryptor.SetAuthOptions``).

Contract:
- One ``WorkloadIdentity`` per controller, built at start-up: the controller's API client, the
  token cache (``None`` with ``--token-cache-max-size=0``), the ``ObjectLevelWorkloadIdentity``
  gate, ``--default-decryption-service-account``, ``--sops-vault-configmap`` (only with
  ``RUNTIME_NAMESPACE``, as upstream) and the key services' environment.
- ``credentials(name=…, namespace=…, service_account_name=…)`` gives the ``Credentials`` the
  loader falls back to after the decryption Secret's (``Credentials.with_fallback``):
  - a ServiceAccount is chosen by ``spec.decryption.serviceAccountName``, else the default flag;
    with one, AWS, GCP and Azure get object-level providers (a TokenRequest for that
    ServiceAccount, in the Kustomization's namespace, exchanged with the provider's STS);
    without one, the controller's own chains (the key services' ``ControllerChain``/
    ``ControllerADC``) behind the token cache, as upstream caches controller-level tokens too
    (without a cache they stay ``None`` and the key services call their chains directly);
  - Vault gets Kubernetes auth whenever ``--sops-vault-configmap`` applies (the chosen
    ServiceAccount's token, else the controller's own), else ``None``.
- ``Credentials.identity`` says whose they are (``serviceaccount:<ns>/<name>`` or ``controller``):
  the build cache only shares a decrypted build between Kustomizations of the same identity.
- Tokens go through the token cache with the Kustomization as the involved object
  (``decrypt_with_aws|gcp|azure|vault``). Nothing is fetched here: providers fetch on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kustomize_controller.api.kustomization import Kustomization
from kustomize_controller.kustomize.sops.identity.access import Provider, T, get_access_token
from kustomize_controller.kustomize.sops.identity.aws import AwsProvider
from kustomize_controller.kustomize.sops.identity.azure import AzureProvider
from kustomize_controller.kustomize.sops.identity.gcp import IAM_CREDENTIALS_URL, GcpProvider, GkeMetadata
from kustomize_controller.kustomize.sops.identity.gcp import STS_URL as GCP_STS_URL
from kustomize_controller.kustomize.sops.identity.generic import KubernetesTokenProvider
from kustomize_controller.kustomize.sops.identity.serviceaccount import (
    CONTROLLER_TOKEN_FILE,
    ApiClient,
    ServiceAccounts,
)
from kustomize_controller.kustomize.sops.keys.credentials import (
    AccessToken,
    AwsCredentials,
    Credentials,
    KeyServiceContext,
    VaultTokenSource,
)
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.runtime.tokencache import InvolvedObject, TokenCache

KIND = "Kustomization"


@dataclass(frozen=True)
class WorkloadIdentityOptions:
    object_level: bool = False  # the ObjectLevelWorkloadIdentity gate
    default_service_account: str = ""  # --default-decryption-service-account
    vault_configmap: tuple[str, str] | None = None  # (RUNTIME_NAMESPACE, --sops-vault-configmap)
    controller_token_file: Path = CONTROLLER_TOKEN_FILE
    timeout: float = 20.0  # per network call
    environ: Mapping[str, str] = field(default_factory=dict)
    # Google's STS and IAM Credentials (upstream has no override; tests point them at loopback)
    gcp_sts_url: str = GCP_STS_URL
    gcp_iam_url: str = IAM_CREDENTIALS_URL


class WorkloadIdentity:
    def __init__(
        self,
        *,
        client: ApiClient,
        options: WorkloadIdentityOptions,
        cache: TokenCache[Any] | None,
        clock: Clock | None = None,
    ) -> None:
        self._accounts = ServiceAccounts(client)
        self._client = client
        self._options = options
        self._cache = cache
        self._context = KeyServiceContext(environ=dict(options.environ), timeout=options.timeout,
                                          clock=clock or RealClock())
        self._gke = GkeMetadata(self._context)  # read once per controller, as upstream
        # reads CA files named by VAULT_CACERT…: once, at start-up; the Vault modules load only then
        self._vault_config: Any = None
        if options.vault_configmap is not None:
            from kustomize_controller.kustomize.sops.keys.hcvault import VaultClientConfig

            self._vault_config = VaultClientConfig.from_env(options.environ)

    @property
    def cache(self) -> TokenCache[Any] | None:
        return self._cache

    @property
    def options(self) -> WorkloadIdentityOptions:
        return self._options

    def for_kustomization(self, ks: Kustomization) -> Credentials:
        """``credentials`` for a Kustomization with ``spec.decryption``."""
        decryption = ks.spec.decryption
        return self.credentials(name=ks.metadata.name or "", namespace=ks.metadata.namespace or "",
                                service_account_name=(decryption.service_account_name if decryption else None) or "")

    def credentials(self, *, name: str, namespace: str, service_account_name: str = "") -> Credentials:
        chosen = service_account_name or self._options.default_service_account
        account = (namespace, chosen) if chosen else None
        request = _Request(self, account, name=name, namespace=namespace)
        vault: VaultTokenSource | None = None
        if self._options.vault_configmap is not None and self._vault_config is not None:
            from kustomize_controller.kustomize.sops.keys.vault_auth import VaultKubernetesAuth

            vault = VaultKubernetesAuth(config=self._vault_config, client=self._client,
                                        configmap=self._options.vault_configmap, issue=request.kubernetes_token)
        # whose identity decrypts: the build cache shares builds only between equal identities
        identity = f"serviceaccount:{namespace}/{chosen}" if account is not None else "controller"
        if account is None and self._cache is None:
            return Credentials(vault=vault, identity=identity)  # the key services' own chains, uncached
        return Credentials(aws=_AwsTokens(request), gcp=_GcpTokens(request), azure=_AzureTokens(request), vault=vault,
                           identity=identity)

    async def access_token(
        self, provider: Provider[T], *, account: tuple[str, str] | None, involved: InvolvedObject,
        audiences: tuple[str, ...] = (),
    ) -> T:
        return await get_access_token(
            provider, accounts=self._accounts, service_account=account, object_level=self._options.object_level,
            cache=self._cache, involved=involved, audiences=audiences,
        )


@dataclass(frozen=True)
class _Request:
    """The credentials of one Kustomization's reconcile."""

    identity: WorkloadIdentity
    account: tuple[str, str] | None
    name: str
    namespace: str

    def involved(self, operation: str) -> InvolvedObject:
        return InvolvedObject(KIND, self.name, self.namespace, operation)

    async def kubernetes_token(self, audience: str) -> str:
        wi = self.identity
        provider = KubernetesTokenProvider(wi._accounts, audiences=[audience],
                                           token_file=wi._options.controller_token_file)
        token = await wi.access_token(provider, account=self.account, involved=self.involved("decrypt_with_vault"),
                                      audiences=(audience,))
        return token.token


@dataclass(frozen=True)
class _AwsTokens:
    request: _Request

    async def aws_credentials(self, *, region: str) -> AwsCredentials:
        wi = self.request.identity
        token = await wi.access_token(AwsProvider(region=region, context=wi._context), account=self.request.account,
                                      involved=self.request.involved("decrypt_with_aws"))
        return token.credentials


@dataclass(frozen=True)
class _GcpTokens:
    request: _Request

    async def gcp_token(self) -> AccessToken:
        wi = self.request.identity
        provider = GcpProvider(context=wi._context, metadata=wi._gke, sts_url=wi._options.gcp_sts_url,
                               iam_url=wi._options.gcp_iam_url)
        token = await wi.access_token(provider, account=self.request.account,
                                      involved=self.request.involved("decrypt_with_gcp"))
        return token.access


@dataclass(frozen=True)
class _AzureTokens:
    request: _Request

    async def azure_token(self, scope: str) -> AccessToken:
        wi = self.request.identity
        token = await wi.access_token(AzureProvider(scope=scope, context=wi._context), account=self.request.account,
                                      involved=self.request.involved("decrypt_with_azure"))
        return token.access
