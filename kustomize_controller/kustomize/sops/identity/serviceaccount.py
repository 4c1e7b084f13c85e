"""Kubernetes ServiceAccount tokens, as fluxcd/pkg ``auth`` obtains them.

Contract:
- ``ServiceAccounts.get(namespace, name)`` reads a ServiceAccount with the controller's own client
  (never an impersonated one, as upstream). Failure: ``failed to get service account
  '<ns>/<name>': <the API server's message>``.
- ``ServiceAccounts.token(namespace, name, audiences)`` sends a TokenRequest (``POST
  …/serviceaccounts/<name>/token``, ``spec.audiences`` only: the API server picks the lifetime
  and, for empty audiences, its own). Failure: ``failed to create kubernetes token for service
  account '<ns>/<name>': <message>`` (``… for controller service account …`` for the controller's
  own). The result's lifetime is the token's ``exp`` claim.
- ``controller_service_account(path)`` is the controller's own ServiceAccount, read from the ``sub``
  claim of its projected token file (``system:serviceaccount:<ns>:<name>``).
- JWTs are decoded, never verified: the API server that issued them is the one we trust.
- No token ever appears in an error or a log line; errors name ServiceAccounts only.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kustomize_controller.kube.errors import ApiError, KubeError
from kustomize_controller.kustomize.sops.keys.credentials import CredentialError

CONTROLLER_TOKEN_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
SUBJECT_PREFIX = "system:serviceaccount:"


class IdentityError(CredentialError):
    """A credential could not be obtained; the message is safe to show (upstream's wording)."""


class ApiClient(Protocol):
    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    async def request_json(
        self, method: str, path: str, *, params: Sequence[tuple[str, str]] = (), body: Any = None
    ) -> Any: ...


@dataclass(frozen=True, slots=True)
class KubeToken:
    """A ServiceAccount token; ``repr`` never shows it."""

    token: str
    expires_at: datetime

    def __repr__(self) -> str:
        return f"KubeToken(expires_at={self.expires_at.isoformat()})"


def _api_message(err: KubeError) -> str:
    # Go prints apierrors as the server's message (``serviceaccounts "x" not found``)
    return err.message if isinstance(err, ApiError) and err.message else str(err)


def jwt_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, unverified. Raises ``ValueError`` with a short reason."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        raw = base64.urlsafe_b64decode(payload.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError) as err:
        raise ValueError(f"failed to decode token payload: {err}") from None
    try:
        claims = json.loads(raw)
    except ValueError as err:
        raise ValueError(f"failed to unmarshal token payload: {err}") from None
    if not isinstance(claims, dict):
        raise ValueError("failed to unmarshal token payload: not a JSON object")
    return claims


def expiry_of(token: str) -> datetime:
    try:
        claims = jwt_claims(token)
    except ValueError as err:
        raise IdentityError(f"failed to parse service account token: {err}") from None
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise IdentityError("failed to get expiration time from service account token: no exp claim")
    return datetime.fromtimestamp(exp, UTC)


def service_account_of(token: str) -> tuple[str, str]:
    """``(namespace, name)`` from the ``sub`` claim; raises ``ValueError`` in upstream's words."""
    claims = jwt_claims(token)
    subject = claims.get("sub")
    subject = subject if isinstance(subject, str) else ""
    rest = subject[len(SUBJECT_PREFIX):] if subject.startswith(SUBJECT_PREFIX) else None
    if rest is not None:
        namespace, _, name = rest.partition(":")
        if namespace and name:
            return namespace, name
    raise ValueError(f"unexpected token subject '{subject}'")


async def controller_service_account(path: Path = CONTROLLER_TOKEN_FILE) -> tuple[str, str]:
    try:
        raw = await asyncio.to_thread(path.read_text, encoding="utf-8")
    except OSError as err:
        raise IdentityError(f"failed to read service account token file {path}: {err.strerror or err}") from None
    try:
        subject = jwt_claims(raw).get("sub")
    except ValueError as err:
        raise IdentityError(f"failed to parse service account token: {err}") from None
    parts = subject.split(":") if isinstance(subject, str) else []
    if len(parts) != 4:
        raise IdentityError(f"invalid subject format in service account token: {subject or ''}")
    return parts[2], parts[3]


class ServiceAccounts:
    """ServiceAccount reads and TokenRequests through the controller's client."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return await self._client.get("v1", "ServiceAccount", name, namespace)
        except KubeError as err:
            raise IdentityError(f"failed to get service account '{namespace}/{name}': {_api_message(err)}") from None

    async def token(
        self, namespace: str, name: str, audiences: Sequence[str], *, controller: bool = False
    ) -> KubeToken:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": list(audiences)},
        }
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        what = "controller service account" if controller else "service account"
        try:
            answer = await self._client.request_json("POST", path, body=body)
        except KubeError as err:
            raise IdentityError(
                f"failed to create kubernetes token for {what} '{namespace}/{name}': {_api_message(err)}"
            ) from None
        status = answer.get("status") if isinstance(answer, Mapping) else None
        token = status.get("token") if isinstance(status, Mapping) else None
        if not isinstance(token, str) or not token:
            raise IdentityError(f"failed to create kubernetes token for {what} '{namespace}/{name}': no token returned")
        return KubeToken(token, expiry_of(token))
