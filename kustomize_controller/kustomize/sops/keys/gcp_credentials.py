"""Google credentials: the ``sops.gcp-kms`` Secret entry (a Google credential JSON file) and the
controller's Application Default Credentials.

Contract:
- :func:`parse_static` reads the JSON (surrounding newlines trimmed) and picks the flow by
  ``type``, as golang.org/x/oauth2 ``CredentialsFromJSON`` does:
  - ``service_account``: an RS256 JWT (``iss`` = ``client_email``, ``aud`` = ``token_uri``,
    scopes ``cloud-platform`` + ``cloudkms``) exchanged at ``token_uri``;
  - ``authorized_user``: the ``refresh_token`` grant with ``client_id``/``client_secret``;
  - ``external_account`` (workload identity federation) with a ``file`` or ``url``
    ``credential_source`` (``text`` or ``json`` format): the subject token exchanged at
    ``token_url`` (Google STS, :func:`sts_exchange`), then, with
    ``service_account_impersonation_url``, a ``generateAccessToken`` call;
  - ``external_account_authorized_user`` (workforce identity federation, ``gcloud auth login
    --cred-file``): the ``refresh_token`` grant at ``token_url``, the client authenticated with
    HTTP Basic (``client_id``/``client_secret``);
  - ``impersonated_service_account``: its ``source_credentials`` (one of the above), then
    ``generateAccessToken`` at ``service_account_impersonation_url``.
  Other types (``gdch_service_account``, AWS- or executable-sourced external accounts) fail at
  import with a message saying so
  (docs/differences.md). A JSON error or unknown type fails at import too.
- :class:`ControllerADC`: ``GOOGLE_APPLICATION_CREDENTIALS`` (the same file types), else gcloud's
  well-known file (``$CLOUDSDK_CONFIG`` or ``~/.config/gcloud``
  ``/application_default_credentials.json``), else the metadata server (``GCE_METADATA_HOST``,
  default ``metadata.google.internal``; ``Metadata-Flavor: Google``). Errors read ``failed to
  create provider access token for the controller: …``.
- A token is fetched per reconcile (caching belongs to the token cache). No message carries a
  private key, a refresh token, a client secret or a token.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kustomize_controller.api.meta import parse_time
from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.keys import http, oauth
from kustomize_controller.kustomize.sops.keys.credentials import (
    AccessToken,
    CredentialError,
    Credentials,
    GcpTokenSource,
    KeyServiceContext,
)

SCOPES = ("https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/cloudkms")
TOKEN_URI = "https://oauth2.googleapis.com/token"
STS_URI = "https://sts.googleapis.com/v1/token"
METADATA_HOST = "metadata.google.internal"


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    email: str
    private_key: str = field(repr=False)
    private_key_id: str
    token_uri: str
    context: KeyServiceContext

    async def gcp_token(self) -> AccessToken:
        now = self.context.clock.now()
        issued = int(now.timestamp())
        claims = {
            "iss": self.email,
            "scope": " ".join(SCOPES),
            "aud": self.token_uri,
            "iat": issued,
            "exp": issued + 3600,
        }
        headers = {"kid": self.private_key_id} if self.private_key_id else {}
        assertion = oauth.rs256_jwt(claims, self.private_key, headers=headers)
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion}
        return await oauth.token_request(
            self.token_uri, form, timeout=self.context.timeout, now=now, environ=self.context.environ
        )


@dataclass(frozen=True, slots=True)
class AuthorizedUser:
    client_id: str
    client_secret: str = field(repr=False)
    refresh_token: str = field(repr=False)
    token_uri: str
    context: KeyServiceContext
    basic_auth: bool = False  # external_account_authorized_user: the client in an Authorization header

    async def gcp_token(self) -> AccessToken:
        form = {"grant_type": "refresh_token", "refresh_token": self.refresh_token}
        headers: dict[str, str] = {}
        if self.basic_auth:
            pair = f"{self.client_id}:{self.client_secret}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        else:
            form.update(client_id=self.client_id, client_secret=self.client_secret)
        return await oauth.token_request(
            self.token_uri,
            form,
            timeout=self.context.timeout,
            now=self.context.clock.now(),
            environ=self.context.environ,
            headers=headers,
        )


async def sts_exchange(
    subject_token: str,
    *,
    audience: str,
    subject_token_type: str,
    context: KeyServiceContext,
    token_url: str = STS_URI,
    scopes: tuple[str, ...] = SCOPES,
) -> AccessToken:
    """Google STS token exchange (RFC 8693) of an external subject token for a federated token."""
    form = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "audience": audience,
        "scope": " ".join(scopes),
        "requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "subject_token": subject_token,
        "subject_token_type": subject_token_type,
    }
    return await oauth.token_request(
        token_url, form, timeout=context.timeout, now=context.clock.now(), environ=context.environ
    )


async def impersonate(source: AccessToken, url: str, context: KeyServiceContext) -> AccessToken:
    """IAM Credentials ``generateAccessToken`` for the service account named in ``url``."""
    body = json.dumps({"scope": list(SCOPES), "lifetime": "3600s"}).encode()
    headers = {"Authorization": f"Bearer {source.token}", "Content-Type": "application/json"}
    answer = await http.call("POST", url, timeout=context.timeout, environ=context.environ, headers=headers, body=body)
    doc = oauth.parse_json(answer.body)
    if answer.status != 200:
        reason = oauth.describe_error(doc, answer.text()[:200])
        raise CredentialError(f"impersonation at {http.redact_url(url)} answered {answer.status}: {reason}")
    token = doc.get("accessToken")
    if not isinstance(token, str) or not token:
        raise CredentialError(f"impersonation at {http.redact_url(url)}: the answer holds no accessToken")
    return AccessToken(token, parse_time(doc.get("expireTime")))


@dataclass(frozen=True, slots=True)
class ExternalAccount:
    audience: str
    subject_token_type: str
    token_url: str
    source: Mapping[str, Any] = field(repr=False)  # may name headers or files holding tokens
    impersonation_url: str
    context: KeyServiceContext

    async def gcp_token(self) -> AccessToken:
        subject = await self._subject_token()
        scopes = ("https://www.googleapis.com/auth/cloud-platform",) if self.impersonation_url else SCOPES
        token = await sts_exchange(
            subject,
            audience=self.audience,
            subject_token_type=self.subject_token_type,
            context=self.context,
            token_url=self.token_url,
            scopes=scopes,
        )
        if self.impersonation_url:
            return await impersonate(token, self.impersonation_url, self.context)
        return token

    async def _subject_token(self) -> str:
        fmt = _mapping(self.source.get("format"))
        if self.source.get("file"):
            raw = await http.read_token_file(str(self.source["file"]), "external account credential source file")
        else:
            url = str(self.source["url"])
            headers = _mapping(self.source.get("headers"))
            answer = await http.call(
                "GET",
                url,
                timeout=self.context.timeout,
                environ=self.context.environ,
                headers={str(k): str(v) for k, v in headers.items()},
            )
            if answer.status != 200:
                raise CredentialError(
                    f"external account credential source {http.redact_url(url)} answered {answer.status}"
                )
            raw = answer.text().strip()
        if fmt.get("type") == "json":
            field = str(fmt.get("subject_token_field_name", ""))
            token = oauth.parse_json(raw.encode()).get(field)
            if not isinstance(token, str) or not token:
                raise CredentialError(f"external account credential source has no '{field}' field")
            return token
        return raw


@dataclass(frozen=True, slots=True)
class Impersonated:
    source: GcpTokenSource
    url: str
    context: KeyServiceContext

    async def gcp_token(self) -> AccessToken:
        return await impersonate(await self.source.gcp_token(), self.url, self.context)


def from_json(doc: Mapping[str, Any], context: KeyServiceContext) -> GcpTokenSource:
    """The token source of one credential JSON document; ``SopsFormatError`` when unusable."""
    kind = doc.get("type")
    if kind == "service_account":
        if not doc.get("client_email") or not doc.get("private_key"):
            raise SopsFormatError("service account credentials need 'client_email' and 'private_key'")
        return ServiceAccount(
            str(doc["client_email"]),
            str(doc["private_key"]),
            str(doc.get("private_key_id") or ""),
            str(doc.get("token_uri") or TOKEN_URI),
            context,
        )
    if kind == "authorized_user":
        if not doc.get("refresh_token"):
            raise SopsFormatError("authorized user credentials need a 'refresh_token'")
        return AuthorizedUser(
            str(doc.get("client_id") or ""),
            str(doc.get("client_secret") or ""),
            str(doc["refresh_token"]),
            str(doc.get("token_uri") or TOKEN_URI),
            context,
        )
    if kind == "external_account":
        source = doc.get("credential_source")
        if not isinstance(source, Mapping) or not (source.get("file") or source.get("url")):
            raise SopsFormatError(
                "not supported: external_account credential_source other than 'file' or 'url' "
                "(AWS- and executable-sourced credentials)"
            )
        return ExternalAccount(
            str(doc.get("audience") or ""),
            str(doc.get("subject_token_type") or "urn:ietf:params:oauth:token-type:jwt"),
            str(doc.get("token_url") or STS_URI),
            source,
            str(doc.get("service_account_impersonation_url") or ""),
            context,
        )
    if kind == "impersonated_service_account":
        inner = doc.get("source_credentials")
        url = doc.get("service_account_impersonation_url")
        if not isinstance(inner, Mapping) or not url:
            raise SopsFormatError(
                "impersonated_service_account credentials need 'source_credentials' and "
                "'service_account_impersonation_url'"
            )
        return Impersonated(from_json(inner, context), str(url), context)
    if kind == "external_account_authorized_user":
        if not doc.get("refresh_token") or not doc.get("token_url"):
            raise SopsFormatError("external_account_authorized_user credentials need 'refresh_token' and 'token_url'")
        return AuthorizedUser(
            str(doc.get("client_id") or ""),
            str(doc.get("client_secret") or ""),
            str(doc["refresh_token"]),
            str(doc["token_url"]),
            context,
            basic_auth=True,
        )
    if kind == "gdch_service_account":
        raise SopsFormatError(f"not supported: credential type {kind!r}")
    raise SopsFormatError(f"unknown credential type: {json.dumps(kind if isinstance(kind, str) else '')}")


def parse_json_credentials(value: bytes, context: KeyServiceContext) -> GcpTokenSource:
    try:
        doc = json.loads(value.decode("utf-8").strip("\n"))
    except (ValueError, UnicodeDecodeError) as err:
        where = f" at line {err.lineno} column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        raise SopsFormatError(f"invalid credentials JSON{where}") from None
    if not isinstance(doc, dict):
        raise SopsFormatError("invalid credentials JSON: not an object")
    return from_json(doc, context)


def parse_static(value: bytes, context: KeyServiceContext) -> Credentials:
    return Credentials(gcp=parse_json_credentials(value, context))


@dataclass(frozen=True, slots=True)
class ControllerADC:
    """The controller's Application Default Credentials, resolved anew on every call."""

    context: KeyServiceContext

    async def gcp_token(self) -> AccessToken:
        try:
            return await self._resolve()
        except (SopsKeyError, SopsFormatError) as err:
            raise CredentialError(f"failed to create provider access token for the controller: {err}") from None

    async def _resolve(self) -> AccessToken:
        env = self.context.environ
        path = env.get("GOOGLE_APPLICATION_CREDENTIALS")
        if path:
            return await (await self._file_source(path)).gcp_token()
        config = env.get("CLOUDSDK_CONFIG") or os.path.join(env.get("HOME", "~"), ".config", "gcloud")
        well_known = os.path.join(config, "application_default_credentials.json")
        if well_known.startswith("~"):
            well_known = os.path.join(env.get("HOME", ""), well_known[2:])
        if await asyncio.to_thread(os.path.isfile, well_known):
            return await (await self._file_source(well_known)).gcp_token()
        host = env.get("GCE_METADATA_HOST") or METADATA_HOST
        url = f"http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
        return await oauth.metadata_token(
            url, headers={"Metadata-Flavor": "Google"}, context=self.context, failure=_metadata_failure
        )

    async def _file_source(self, path: str) -> GcpTokenSource:
        text = await http.read_token_file(path, "Google credentials file")
        try:
            return parse_json_credentials(text.encode(), self.context)
        except SopsFormatError as err:
            raise CredentialError(f"credentials file '{path}': {err}") from None


def _metadata_failure(status: int, doc: Mapping[str, Any]) -> str:
    return f"metadata server answered {status} for the default service account token"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}

