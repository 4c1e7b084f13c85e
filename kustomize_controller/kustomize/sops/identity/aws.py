"""AWS for object-level workload identity (fluxcd/pkg ``auth/aws``): IRSA-style
``AssumeRoleWithWebIdentity`` with a ServiceAccount token.

- Audience ``sts.amazonaws.com``; the role from the ServiceAccount annotation
  ``eks.amazonaws.com/role-arn``, which must match ``^arn:aws[\\w-]*:iam::[0-9]{1,30}:role/.{1,200}$``
  (else ``invalid eks.amazonaws.com/role-arn annotation: '<v>'. must match <regex>``).
- Session name ``<sa>.<namespace>.<region>.fluxcd.io``; STS of the key's region. Unlike upstream,
  ``AWS_ENDPOINT_URL_STS``/``AWS_ENDPOINT_URL`` apply here as they do to the controller's own chain
  (private endpoints, emulators; docs/differences.md).
- Cache key parts: ``stsRegion=<region>``. Credentials without an expiry are never kept.
- Controller level is the key service's own chain (``aws_credentials.ControllerChain``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kustomize_controller.kustomize.sops.identity.access import annotations_of
from kustomize_controller.kustomize.sops.identity.serviceaccount import IdentityError
from kustomize_controller.kustomize.sops.keys.credentials import AwsCredentials, KeyServiceContext

AUDIENCE = "sts.amazonaws.com"
ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
ROLE_ARN_PATTERN = r"^arn:aws[\w-]*:iam::[0-9]{1,30}:role/.{1,200}$"
_ROLE_ARN = re.compile(ROLE_ARN_PATTERN)


@dataclass(frozen=True, slots=True)
class AwsToken:
    credentials: AwsCredentials = field(repr=False)
    expires_at: datetime


def role_arn(service_account: Mapping[str, Any]) -> str:
    arn = annotations_of(service_account).get(ROLE_ANNOTATION, "")
    if not _ROLE_ARN.match(arn):
        raise IdentityError(f"invalid {ROLE_ANNOTATION} annotation: '{arn}'. must match {ROLE_ARN_PATTERN}")
    return arn


class AwsProvider:
    name = "aws"

    def __init__(self, *, region: str, context: KeyServiceContext) -> None:
        self._region = region
        self._context = context

    def cache_parts(self) -> Sequence[str]:
        return (f"stsRegion={self._region}",)

    async def audiences(self, service_account: Mapping[str, Any]) -> list[str]:
        return [AUDIENCE]

    def identity(self, service_account: Mapping[str, Any]) -> str:
        return role_arn(service_account)

    def _token(self, credentials: AwsCredentials) -> AwsToken:
        # no expiry (plain keys): stale at once, never served from the cache (as upstream)
        return AwsToken(credentials, credentials.expires or self._context.clock.now())

    async def controller_token(self) -> AwsToken:
        from kustomize_controller.kustomize.sops.keys.aws_credentials import ControllerChain

        return self._token(await ControllerChain(self._context).aws_credentials(region=self._region))

    async def exchange(self, kube_token: str, service_account: Mapping[str, Any]) -> AwsToken:
        from kustomize_controller.kustomize.sops.keys.aws_sts import assume_role_with_web_identity

        metadata = service_account.get("metadata") or {}
        session = f"{metadata.get('name', '')}.{metadata.get('namespace', '')}.{self._region}.fluxcd.io"
        credentials = await assume_role_with_web_identity(
            kube_token, role_arn=role_arn(service_account), session_name=session, region=self._region,
            context=self._context,
        )
        return self._token(credentials)
