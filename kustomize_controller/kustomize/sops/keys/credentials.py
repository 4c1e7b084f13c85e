"""What a key service authenticates with: one credential protocol per provider, and the set of
them one reconcile decrypts with.

Contract:
- Every provider consumes exactly one protocol, and never asks where it came from:
  - AWS KMS: :class:`AwsCredentialsProvider` — ``await aws_credentials(region=…)`` gives an
    access key id, secret, optional session token and expiry. ``region`` is the key ARN's
    region (upstream's ``STSRegion``), for sources that call STS.
  - GCP KMS: :class:`GcpTokenSource` — ``await gcp_token()`` gives an OAuth2 bearer token.
  - Azure Key Vault: :class:`AzureTokenCredential` — ``await azure_token(scope)`` gives a bearer
    token for ``scope`` (``https://vault.azure.net/.default`` or the challenge's resource).
  - Vault/OpenBao transit: :class:`VaultTokenSource` — ``await vault_token(address)`` gives the
    token for one Vault address (``None``: use the key service's own ambient default).
- Where credentials come from, per provider, first match wins (upstream's precedence):
  1. static, from the decryption Secret (``sops.aws-kms``, ``sops.gcp-kms``, ``sops.azure-kv``,
     ``sops.vault-token``), parsed by the provider module when the Secret has the entry;
  2. object-level workload identity (``spec.decryption.serviceAccountName`` or
     ``--default-decryption-service-account``): providers built by the workload-identity
     module from a ServiceAccount token (TokenRequest) exchanged with the provider's STS;
  3. controller-level: the controller's own environment (the providers' standard chains); a
     key service uses its provider's chain when the set has ``None`` for it.
  :meth:`Credentials.with_fallback` composes 1 and 2: the loader fills what the Secret did not
  give from the object-level set when a ServiceAccount is chosen.
- Exchanges that turn a token into credentials take the token as an argument, so a token read
  from a file (controller level) and one from a TokenRequest (object level) share them:
  ``aws_sts.assume_role_with_web_identity(token, …)``,
  ``azure_credentials.client_assertion_token(assertion, …)``,
  ``gcp_credentials.sts_exchange(subject_token, …)``.
- Object-level sets name whose they are in ``Credentials.identity`` (e.g.
  ``serviceaccount:<ns>/<name>``): the build cache keys decrypted builds on it, and a set with
  providers but no identity makes the builds uncacheable (never shared across tenants).
- :meth:`KeyServiceContext.reuse` keeps what a key service fetched (credentials, tokens) for the
  reconcile while it has more than a minute to live: one token request per provider and
  reconcile, however many data keys, as upstream's token sources. Caching across reconciles is
  the token cache's, inside the object-level providers.
- A provider raises :class:`CredentialError` with a message that names the source and never
  carries a secret (keys, tokens, client secrets, assertions).
- Values are immutable; secret fields are excluded from ``repr``. Nothing here does I/O: the
  sources live next to their provider (``aws_credentials.py``, …) and are imported lazily, so a
  controller that never meets a cloud key never loads them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from kustomize_controller.kustomize.sops.errors import SopsKeyError
from kustomize_controller.runtime.clock import Clock, RealClock

T = TypeVar("T")


class CredentialError(SopsKeyError):
    """A credential source could not produce credentials (message safe to show)."""


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)
    expires: datetime | None = None  # None: does not expire (static keys)


@dataclass(frozen=True, slots=True)
class AccessToken:
    token: str = field(repr=False)
    expires: datetime | None = None


class AwsCredentialsProvider(Protocol):
    async def aws_credentials(self, *, region: str) -> AwsCredentials: ...


class GcpTokenSource(Protocol):
    async def gcp_token(self) -> AccessToken: ...


class AzureTokenCredential(Protocol):
    async def azure_token(self, scope: str) -> AccessToken: ...


class VaultTokenSource(Protocol):
    async def vault_token(self, address: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Credentials:
    """The credential of each provider for one reconcile; ``None``: this source has none."""

    aws: AwsCredentialsProvider | None = None
    gcp: GcpTokenSource | None = None
    azure: AzureTokenCredential | None = None
    vault: VaultTokenSource | None = None
    # whose credentials these are, e.g. "serviceaccount:<ns>/<name>": object-level sets must say,
    # the build cache keys on it (a set without it makes builds uncacheable)
    identity: str = ""

    def with_fallback(self, other: Credentials) -> Credentials:
        """Every provider this set lacks taken from ``other`` (static beats workload identity)."""
        return replace(
            self,
            aws=self.aws or other.aws,
            gcp=self.gcp or other.gcp,
            azure=self.azure or other.azure,
            vault=self.vault or other.vault,
        )


@dataclass(frozen=True, slots=True)
class KeyServiceContext:
    """What a key service gets besides the master key: credentials, the environment it reads
    endpoint overrides and controller-level chains from (a snapshot, never ``os.environ``
    itself), the clock (request signing, token expiry) and its timeouts."""

    credentials: Credentials = field(default_factory=Credentials)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold AWS_SECRET_ACCESS_KEY
    timeout: float = 20.0  # seconds, per network call
    deadline: float = 60.0  # seconds, per master key (every call it needs, credentials included)
    clock: Clock = field(default_factory=RealClock)
    # credentials fetched during this reconcile, per (provider, region/scope): one token request
    # per provider and reconcile however many data keys it opens, as upstream's token sources
    _memo: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    async def reuse(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        """``fetch()``'s answer, reused for ``key`` while it has more than a minute to live."""
        found = self._memo.get(key)
        if found is not None and not _expiring(found, self.clock.now()):
            return found  # type: ignore[no-any-return]
        value = await fetch()
        self._memo[key] = value
        return value


def _expiring(value: Any, now: datetime) -> bool:
    expires = getattr(value, "expires", None)
    return isinstance(expires, datetime) and expires - timedelta(minutes=1) <= now
