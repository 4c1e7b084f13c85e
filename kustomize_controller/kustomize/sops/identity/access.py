"""One access token for a key service: fluxcd/pkg ``auth.GetAccessToken``.

Contract:
- With no ServiceAccount: the provider's controller-level token (the controller's own identity);
  the provider words its failure ``failed to create provider access token for the controller:
  <err>`` (the key services' own chains already do).
- With a ServiceAccount ``(namespace, name)``, on every call (cached or not): GET it, take the
  audiences (the caller's, else the provider's from its annotations: ``failed to get provider
  audience: <err>``) and the identity (``failed to get provider identity from service account
  '<ns>/<name>' annotations: <err>``). Then, when the token is not cached: the
  ``ObjectLevelWorkloadIdentity`` gate is checked (``ObjectLevelWorkloadIdentity feature gate is
  not enabled``), a TokenRequest for those audiences is sent and its token exchanged with the
  provider (``failed to create provider access token for service account '<ns>/<name>': <err>``).
- Cached in the controller-wide token cache when there is one, under upstream's key: sha256 of
  ``provider=…``, ``audiences=…``, (``providerIdentity=…``, ``serviceAccountName=…``,
  ``serviceAccountNamespace=…``), then the provider's own parts (``scopes=…``, ``stsRegion=…``,
  …). One cache event per call for the involved object.
- Errors are ``IdentityError`` (a ``CredentialError``); a provider's ``CredentialError`` is wrapped
  with the context above. None carries a token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from kustomize_controller.kustomize.sops.identity.serviceaccount import IdentityError, ServiceAccounts
from kustomize_controller.kustomize.sops.keys.credentials import CredentialError
from kustomize_controller.runtime.tokencache import InvolvedObject, Token, TokenCache, cache_key

GATE_DISABLED = "ObjectLevelWorkloadIdentity feature gate is not enabled"

T = TypeVar("T", bound=Token)
T_co = TypeVar("T_co", bound=Token, covariant=True)


class Provider(Protocol[T_co]):
    """One key service's side of workload identity (fluxcd/pkg ``auth.Provider``)."""

    @property
    def name(self) -> str: ...

    def cache_parts(self) -> Sequence[str]:
        """``scopes=…``, ``stsRegion=…``, ``stsEndpoint=…`` as they apply, in that order."""
        ...

    async def audiences(self, service_account: Mapping[str, Any]) -> list[str]: ...

    def identity(self, service_account: Mapping[str, Any]) -> str: ...

    async def controller_token(self) -> T_co:
        """Raises ``CredentialError`` worded ``failed to create provider access token for the controller: …``."""
        ...

    async def exchange(self, kube_token: str, service_account: Mapping[str, Any]) -> T_co: ...


def annotations_of(service_account: Mapping[str, Any]) -> Mapping[str, str]:
    metadata = service_account.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return {}
    return {str(k): str(v) for k, v in annotations.items()}


async def get_access_token(
    provider: Provider[T],
    *,
    accounts: ServiceAccounts,
    service_account: tuple[str, str] | None,
    object_level: bool,
    cache: TokenCache[Any] | None = None,
    involved: InvolvedObject | None = None,
    audiences: Sequence[str] = (),
) -> T:
    """``service_account`` is ``(namespace, name)`` or ``None`` (controller level); ``object_level``
    is the state of the ``ObjectLevelWorkloadIdentity`` gate."""
    wanted = list(audiences)
    parts = [f"provider={provider.name}"]

    fetch = provider.controller_token
    if service_account is not None:
        namespace, name = service_account
        account = await accounts.get(namespace, name)
        if not wanted:
            try:
                wanted = await provider.audiences(account)
            except CredentialError as err:
                raise IdentityError(f"failed to get provider audience: {err}") from None
        try:
            identity = provider.identity(account)
        except CredentialError as err:
            raise IdentityError(
                f"failed to get provider identity from service account '{namespace}/{name}' annotations: {err}"
            ) from None

        async def for_service_account() -> T:
            if not object_level:
                raise IdentityError(GATE_DISABLED)
            kube_token = await accounts.token(namespace, name, wanted)
            try:
                return await provider.exchange(kube_token.token, account)
            except CredentialError as err:
                raise IdentityError(
                    f"failed to create provider access token for service account '{namespace}/{name}': {err}"
                ) from None

        fetch = for_service_account
        if wanted:
            parts.append(f"audiences={','.join(wanted)}")
        parts += [f"providerIdentity={identity}", f"serviceAccountName={name}", f"serviceAccountNamespace={namespace}"]
    elif wanted:
        parts.append(f"audiences={','.join(wanted)}")
    parts += provider.cache_parts()
    if cache is None:
        return await fetch()
    token: T = await cache.get_or_set(cache_key(*parts), fetch, involved=involved)
    return token
