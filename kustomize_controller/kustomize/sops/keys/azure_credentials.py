"""Azure credentials: the ``sops.azure-kv`` Secret entry and the controller's chain, as Microsoft
Entra ID (AAD) token requests.

Contract:
- :func:`parse_static` reads ``sops.azure-kv`` as upstream (``azkv/config.go``): UTF-16 (BOM)
  or UTF-8 bytes, JSON or YAML, field names matched case-insensitively, unknown ones ignored.
  First match wins: ``tenantId``+``clientId``+``clientSecret`` (client secret);
  ``tenantId``+``clientId``+``clientCertificate`` (PEM, or PKCS#12 raw or base64, with
  ``clientCertificatePassword``; ``clientCertificateSendChain`` sends ``x5c``); ``tenant``+
  ``appId``+``password`` (``az ad sp create-for-rbac`` output); ``clientId`` alone (managed
  identity, user-assigned). ``authorityHost`` (default ``https://login.microsoftonline.com/``)
  applies to the first three. Anything else fails with upstream's ``invalid data: …``.
- :class:`ControllerChain` is upstream's DefaultAzureCredential without CLI/developer tools:
  environment (``AZURE_TENANT_ID``+``AZURE_CLIENT_ID``+``AZURE_CLIENT_SECRET`` or
  ``AZURE_CLIENT_CERTIFICATE_PATH`` [+``_PASSWORD``]); else workload identity when all of
  ``AZURE_CLIENT_ID``, ``AZURE_TENANT_ID``, ``AZURE_FEDERATED_TOKEN_FILE``,
  ``AZURE_AUTHORITY_HOST`` are set; else managed identity through IMDS (``AZURE_CLIENT_ID`` as
  the user-assigned id; ``AZURE_POD_IDENTITY_AUTHORITY_HOST`` overrides the IMDS host).
- :func:`client_assertion_token` takes the assertion itself (a federated token from a file here,
  a TokenRequest token for object-level workload identity, or a certificate-signed JWT).
- Secrets (client secret, certificate key, assertions, tokens) never appear in messages.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import yaml

from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.keys import http, oauth
from kustomize_controller.kustomize.sops.keys.credentials import (
    AccessToken,
    AzureTokenCredential,
    CredentialError,
    Credentials,
    KeyServiceContext,
)

AUTHORITY = "https://login.microsoftonline.com/"
IMDS = "http://169.254.169.254"
INVALID = (
    "invalid data: requires a 'clientId' field, a combination of 'tenantId', 'clientId' and 'clientSecret', "
    "or 'tenantId', 'clientId' and 'clientCertificate'"
)


def token_url(authority: str, tenant: str) -> str:
    return f"{(authority or AUTHORITY).rstrip('/')}/{tenant}/oauth2/v2.0/token"


async def client_assertion_token(
    assertion: str, *, tenant_id: str, client_id: str, scope: str, authority: str, context: KeyServiceContext
) -> AccessToken:
    form = {
        "grant_type": "client_credentials",
        "client_id": client_id,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "client_assertion": assertion,
        "scope": scope,
    }
    return await oauth.token_request(
        token_url(authority, tenant_id), form, timeout=context.timeout, now=context.clock.now(), environ=context.environ
    )


async def _assert(credential: ClientCertificate | WorkloadIdentity, assertion: str, scope: str) -> AccessToken:
    return await client_assertion_token(
        assertion,
        tenant_id=credential.tenant_id,
        client_id=credential.client_id,
        scope=scope,
        authority=credential.authority,
        context=credential.context,
    )


@dataclass(frozen=True, slots=True)
class ClientSecret:
    tenant_id: str
    client_id: str
    secret: str = field(repr=False)
    authority: str
    context: KeyServiceContext

    async def azure_token(self, scope: str) -> AccessToken:
        form = {
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.secret,
            "scope": scope,
        }
        url = token_url(self.authority, self.tenant_id)
        return await oauth.token_request(
            url, form, timeout=self.context.timeout, now=self.context.clock.now(), environ=self.context.environ
        )


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    tenant_id: str
    client_id: str
    key_pem: str = field(repr=False)
    chain_der: tuple[bytes, ...]  # the leaf first
    send_chain: bool
    authority: str
    context: KeyServiceContext

    async def azure_token(self, scope: str) -> AccessToken:
        url = token_url(self.authority, self.tenant_id)
        now = int(self.context.clock.now().timestamp())
        claims = {
            "aud": url,
            "iss": self.client_id,
            "sub": self.client_id,
            "jti": str(uuid.uuid4()),
            "nbf": now,
            "exp": now + 600,
        }
        headers: dict[str, Any] = {
            "x5t": oauth.b64url(hashlib.sha1(self.chain_der[0]).digest())
        }  # x5t: SHA-1 by RFC 7515
        if self.send_chain:
            headers["x5c"] = [base64.b64encode(c).decode() for c in self.chain_der]
        return await _assert(self, oauth.rs256_jwt(claims, self.key_pem, headers=headers), scope)


@dataclass(frozen=True, slots=True)
class ManagedIdentity:
    client_id: str
    context: KeyServiceContext

    async def azure_token(self, scope: str) -> AccessToken:
        base = self.context.environ.get("AZURE_POD_IDENTITY_AUTHORITY_HOST", IMDS).rstrip("/")
        query = {"api-version": "2018-02-01", "resource": scope.removesuffix("/.default")}
        if self.client_id:
            query["client_id"] = self.client_id
        url = f"{base}/metadata/identity/oauth2/token?{urlencode(query)}"
        return await oauth.metadata_token(
            url, headers={"Metadata": "true"}, context=self.context, failure=_imds_failure
        )


def _imds_failure(status: int, doc: Mapping[str, Any]) -> str:
    return f"ManagedIdentityCredential: IMDS answered {status}: {oauth.describe_error(doc, f'status {status}')}"


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    tenant_id: str
    client_id: str
    token_file: str
    authority: str
    context: KeyServiceContext

    async def azure_token(self, scope: str) -> AccessToken:
        return await _assert(self, await http.read_token_file(self.token_file, "federated token file"), scope)


def _certificate(raw: bytes, password: str) -> tuple[str, tuple[bytes, ...]]:
    """(PEM private key, DER certificates leaf first) from PEM or PKCS#12 data."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    pem_key = serialization.NoEncryption()
    if b"-----BEGIN" in raw:
        key = None
        for secret in dict.fromkeys([password.encode() or None, None]):  # the password, then none
            with contextlib.suppress(ValueError, TypeError):
                key = serialization.load_pem_private_key(raw, password=secret)
                break
        try:
            certs = x509.load_pem_x509_certificates(raw)
        except ValueError:
            certs = []
        if key is None:
            raise SopsFormatError("clientCertificate: cannot read the PEM private key")
    else:
        candidates = [raw]
        with contextlib.suppress(binascii.Error, ValueError):
            candidates.append(base64.b64decode(raw, validate=True))
        for candidate in candidates:
            try:
                loaded = pkcs12.load_pkcs12(candidate, password.encode() or None)
            except (ValueError, TypeError):
                continue
            if loaded.key is not None and loaded.cert is not None:
                key, certs = loaded.key, [loaded.cert.certificate, *(c.certificate for c in loaded.additional_certs)]
                break
        else:
            raise SopsFormatError("clientCertificate: neither PEM nor PKCS#12 data with a key and a certificate")
    if not certs:
        raise SopsFormatError("clientCertificate: no certificate found")
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, pem_key).decode()
    return key_pem, tuple(c.public_bytes(serialization.Encoding.DER) for c in certs)


def _decode(value: bytes) -> str:
    try:
        if value.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return value.decode("utf-16")
        return value.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SopsFormatError(f"failed to decode Azure authentication file bytes: {err.reason}") from None


def parse_static(value: bytes, context: KeyServiceContext) -> Credentials:
    try:
        doc = yaml.safe_load(_decode(value))
    except yaml.YAMLError as err:
        raise SopsFormatError(f"failed to unmarshal Azure authentication file: {type(err).__name__}") from None
    if not isinstance(doc, dict):
        raise SopsFormatError("failed to unmarshal Azure authentication file: not a mapping")
    fields = {str(k).lower(): v for k, v in doc.items()}

    def get(name: str) -> str:
        found = fields.get(name.lower())
        return str(found) if isinstance(found, str | int) and not isinstance(found, bool) else ""

    tenant, client, authority = get("tenantId"), get("clientId"), get("authorityHost")
    credential: AzureTokenCredential
    if tenant and client and get("clientSecret"):
        credential = ClientSecret(tenant, client, get("clientSecret"), authority, context)
    elif tenant and client and get("clientCertificate"):
        key_pem, chain = _certificate(get("clientCertificate").encode(), get("clientCertificatePassword"))
        send_chain = fields.get("clientcertificatesendchain") in (True, "true", "True")
        credential = ClientCertificate(tenant, client, key_pem, chain, send_chain, authority, context)
    elif get("tenant") and get("appId") and get("password"):
        credential = ClientSecret(get("tenant"), get("appId"), get("password"), authority, context)
    elif client:
        credential = ManagedIdentity(client, context)
    else:
        raise SopsFormatError(INVALID)
    return Credentials(azure=credential)


@dataclass(frozen=True, slots=True)
class ControllerChain:
    """The controller's own Azure identity (controller-level)."""

    context: KeyServiceContext

    async def azure_token(self, scope: str) -> AccessToken:
        try:
            return await self._credential().azure_token(scope)
        except (SopsKeyError, SopsFormatError) as err:
            raise CredentialError(f"failed to create provider access token for the controller: {err}") from None

    def _credential(self) -> AzureTokenCredential:
        env = self.context.environ
        tenant, client = env.get("AZURE_TENANT_ID", ""), env.get("AZURE_CLIENT_ID", "")
        authority = env.get("AZURE_AUTHORITY_HOST", "")
        if tenant and client and env.get("AZURE_CLIENT_SECRET"):
            return ClientSecret(tenant, client, env["AZURE_CLIENT_SECRET"], authority, self.context)
        if tenant and client and env.get("AZURE_CLIENT_CERTIFICATE_PATH"):
            return _CertificateFile(tenant, client, authority, self.context)
        if tenant and client and authority and env.get("AZURE_FEDERATED_TOKEN_FILE"):
            return WorkloadIdentity(tenant, client, env["AZURE_FEDERATED_TOKEN_FILE"], authority, self.context)
        return ManagedIdentity(client, self.context)


@dataclass(frozen=True, slots=True)
class _CertificateFile:
    tenant_id: str
    client_id: str
    authority: str
    context: KeyServiceContext

    async def azure_token(self, scope: str) -> AccessToken:
        env = self.context.environ
        data = await http.read_file(env["AZURE_CLIENT_CERTIFICATE_PATH"], "client certificate file")
        key_pem, chain = _certificate(data, env.get("AZURE_CLIENT_CERTIFICATE_PASSWORD", ""))
        credential = ClientCertificate(
            self.tenant_id, self.client_id, key_pem, chain, False, self.authority, self.context
        )
        return await credential.azure_token(scope)
