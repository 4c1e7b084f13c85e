"""GCP for object-level workload identity (fluxcd/pkg ``auth/gcp``): Workload Identity Federation
with a ServiceAccount token, optionally impersonating a Google service account.

- Audience: with the annotation ``gcp.auth.fluxcd.io/workload-identity-provider``
  (``projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>``,
  regex-checked) ``//iam.googleapis.com/<that>`` for both the TokenRequest and STS; without it
  (GKE) ``<project>.svc.id.goog`` for the TokenRequest and ``identitynamespace:<project>.svc.id.goog:
  https://container.googleapis.com/v1/projects/<p>/locations/<l>/clusters/<n>`` for STS, from the
  metadata server (``GCE_METADATA_HOST``, default ``metadata.google.internal``; read once per
  controller, as upstream; ``failed to get GKE cluster <field> from the metadata service: …``).
- STS: ``https://sts.googleapis.com/v1/token`` (subject token type JWT). With
  ``iam.gke.io/gcp-service-account`` (``<name>@<project>.iam.gserviceaccount.com``, regex-checked)
  the federated token (scope ``cloud-platform``) impersonates that account through
  ``iamcredentials.googleapis.com …:generateAccessToken``; without it, the federated token is used
  directly (scopes ``cloud-platform`` and ``userinfo.email``).
- The endpoints are constructor arguments (tests point them at loopback servers); the
  controller uses Google's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kustomize_controller.kustomize.sops.identity.access import annotations_of
from kustomize_controller.kustomize.sops.identity.serviceaccount import IdentityError
from kustomize_controller.kustomize.sops.keys.credentials import AccessToken, KeyServiceContext

SCOPES = ("https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/userinfo.email")
STS_URL = "https://sts.googleapis.com/v1/token"
IAM_CREDENTIALS_URL = "https://iamcredentials.googleapis.com"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
EMAIL_ANNOTATION = "iam.gke.io/gcp-service-account"
EMAIL_PATTERN = r"^[a-zA-Z0-9-]{1,100}@[a-zA-Z0-9-]{1,100}\.iam\.gserviceaccount\.com$"
WIP_ANNOTATION = "gcp.auth.fluxcd.io/workload-identity-provider"
WIP_PATTERN = r"^projects/\d{1,30}/locations/global/workloadIdentityPools/[^/]{1,100}/providers/[^/]{1,100}$"


def service_account_email(service_account: Mapping[str, Any]) -> str:
    email = annotations_of(service_account).get(EMAIL_ANNOTATION, "")
    if email and not re.match(EMAIL_PATTERN, email):
        raise IdentityError(f"invalid {EMAIL_ANNOTATION} annotation: '{email}'. must match {EMAIL_PATTERN}")
    return email


def provider_audience(service_account: Mapping[str, Any]) -> str:
    provider = annotations_of(service_account).get(WIP_ANNOTATION, "")
    if not provider:
        return ""
    if not re.match(WIP_PATTERN, provider):
        raise IdentityError(f"invalid {WIP_ANNOTATION} annotation: '{provider}'. must match {WIP_PATTERN}")
    return f"//iam.googleapis.com/{provider}"


@dataclass
class GkeMetadata:
    """The cluster's project, location and name from the GKE metadata server, read once."""

    context: KeyServiceContext
    _loaded: tuple[str, str, str] | None = None
    _lock: asyncio.Lock | None = None

    async def load(self) -> tuple[str, str, str]:
        if self._loaded is not None:
            return self._loaded
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._loaded is None:
                self._loaded = (
                    await self._get("project/project-id", "project ID"),
                    await self._get("instance/attributes/cluster-location", "location"),
                    await self._get("instance/attributes/cluster-name", "name"),
                )
        return self._loaded

    async def _get(self, path: str, what: str) -> str:
        from kustomize_controller.kustomize.sops.keys import http

        host = self.context.environ.get("GCE_METADATA_HOST") or "metadata.google.internal"
        prefix = f"failed to get GKE cluster {what} from the metadata service"
        try:
            answer = await http.call("GET", f"http://{host}/computeMetadata/v1/{path}",
                                     timeout=min(self.context.timeout, http.METADATA_TIMEOUT),
                                     headers={"Metadata-Flavor": "Google"})
        except http.TransportError as err:
            raise IdentityError(f"{prefix}: {err}") from None
        if answer.status != 200:
            raise IdentityError(f"{prefix}: metadata: GCE metadata \"{path}\" not defined (status {answer.status})")
        value = answer.text().strip()
        if not value:
            raise IdentityError(f"{prefix}: empty value")
        return value

    async def pool(self) -> str:
        project, _, _ = await self.load()
        return f"{project}.svc.id.goog"

    async def sts_audience(self) -> str:
        project, location, name = await self.load()
        return (f"identitynamespace:{project}.svc.id.goog:https://container.googleapis.com/v1/projects/"
                f"{project}/locations/{location}/clusters/{name}")


class GcpToken:
    __slots__ = ("access", "expires_at")

    def __init__(self, access: AccessToken, now: datetime) -> None:
        self.access = access
        self.expires_at = access.expires or now


class GcpProvider:
    name = "gcp"

    def __init__(self, *, context: KeyServiceContext, metadata: GkeMetadata, sts_url: str = STS_URL,
                 iam_url: str = IAM_CREDENTIALS_URL) -> None:
        self._context = context
        self._metadata = metadata
        self._sts_url = sts_url
        self._iam_url = iam_url.rstrip("/")

    def cache_parts(self) -> Sequence[str]:
        return ()

    async def audiences(self, service_account: Mapping[str, Any]) -> list[str]:
        return [provider_audience(service_account) or await self._metadata.pool()]

    def identity(self, service_account: Mapping[str, Any]) -> str:
        return service_account_email(service_account)

    async def controller_token(self) -> GcpToken:
        from kustomize_controller.kustomize.sops.keys.gcp_credentials import ControllerADC

        return GcpToken(await ControllerADC(self._context).gcp_token(), self._context.clock.now())

    async def exchange(self, kube_token: str, service_account: Mapping[str, Any]) -> GcpToken:
        from kustomize_controller.kustomize.sops.keys.gcp_credentials import impersonate, sts_exchange

        audience = provider_audience(service_account) or await self._metadata.sts_audience()
        email = service_account_email(service_account)
        scopes = SCOPES[:1] if email else SCOPES
        federated = await sts_exchange(kube_token, audience=audience, subject_token_type=JWT_TOKEN_TYPE,
                                       context=self._context, token_url=self._sts_url, scopes=scopes)
        if not email:
            return GcpToken(federated, self._context.clock.now())
        url = f"{self._iam_url}/v1/projects/-/serviceAccounts/{email}:generateAccessToken"
        return GcpToken(await impersonate(federated, url, self._context), self._context.clock.now())
