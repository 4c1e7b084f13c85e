"""OAuth2 building blocks shared by the GCP and Azure credentials: a form POST to a token
endpoint, and RS256 JWTs signed with ``cryptography`` (already a dependency for age and AES-GCM).

Contract:
- :func:`token_request` POSTs ``form`` to ``url`` and returns the ``access_token`` with its expiry
  (``expires_in`` seconds from now). A non-2xx answer raises :class:`CredentialError` with the
  endpoint (no query), the status and the OAuth ``error``/``error_description`` (or Google's
  ``error.message``); the form (secrets, assertions) never appears in a message.
- :func:`metadata_token` GETs an access token from a node's metadata server (Azure IMDS, GCE
  metadata) within ``http.METADATA_TIMEOUT``; an answer other than 200 with a string ``access_token``
  raises :class:`CredentialError` with the text the caller words from the status and the answer.
- :func:`rs256_jwt` signs ``claims`` with a PEM private key (PKCS#8 or PKCS#1); a key that cannot
  be read raises :class:`CredentialError` without quoting it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from kustomize_controller.kustomize.sops.keys import http
from kustomize_controller.kustomize.sops.keys.credentials import AccessToken, CredentialError, KeyServiceContext

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
#: the form fields of a token request that carry a secret (scrubbed from an answer quoted in an error)
SECRET_FIELDS = frozenset({
    "client_secret", "client_assertion", "assertion", "refresh_token", "subject_token", "actor_token", "password",
})


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def rs256_jwt(claims: Mapping[str, Any], private_key_pem: str, *, headers: Mapping[str, Any] | None = None) -> str:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    try:
        key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
    except (ValueError, TypeError):
        raise CredentialError("private key is not a PEM-encoded, unencrypted RSA key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise CredentialError("private key is not an RSA key")
    header = {"alg": "RS256", "typ": "JWT", **(headers or {})}
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(dict(claims)).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(body) if body else {}
    except (ValueError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def describe_error(doc: Mapping[str, Any], fallback: str) -> str:
    error = doc.get("error")
    if isinstance(error, Mapping):  # Google APIs: {"error": {"code", "message", "status"}}
        return str(error.get("message") or error.get("status") or fallback)
    if isinstance(error, str):  # OAuth: {"error", "error_description"}
        description = doc.get("error_description")
        return f"{error}: {description}" if description else error
    return fallback


async def token_request(
    url: str,
    form: Mapping[str, str],
    *,
    timeout: float,  # noqa: ASYNC109 - the HTTP call's own timeout
    now: datetime,
    environ: Mapping[str, str],
    headers: Mapping[str, str] | None = None,
) -> AccessToken:
    answer = await http.call(
        "POST",
        url,
        timeout=timeout,
        headers={**FORM, **(headers or {})},
        body=urlencode(dict(form)).encode(),
        environ=environ,
    )
    doc = parse_json(answer.body)
    if not 200 <= answer.status < 300:
        sent = [v for k, v in form.items() if k in SECRET_FIELDS] + [v for k, v in (headers or {}).items()
                                                                      if k.lower() == "authorization"]
        reason = http.scrub(describe_error(doc, answer.text()[:200]), sent)
        raise CredentialError(f"token request to {http.redact_url(url)} answered {answer.status}: {reason}")
    token = doc.get("access_token")
    if not isinstance(token, str) or not token:
        raise CredentialError(f"token request to {http.redact_url(url)}: the answer holds no access_token")
    return AccessToken(token, expires_after(doc.get("expires_in"), now))


def expires_after(seconds: Any, now: datetime) -> datetime | None:
    try:
        return now + timedelta(seconds=int(seconds))
    except (TypeError, ValueError):
        return None


async def metadata_token(
    url: str,
    *,
    headers: Mapping[str, str],
    context: KeyServiceContext,
    failure: Callable[[int, Mapping[str, Any]], str],
) -> AccessToken:
    """The ``access_token`` a metadata server answers at ``url``; ``failure(status, answer)`` words the
    error when there is none (the answer's JSON, ``{}`` when it is none)."""
    answer = await http.call(
        "GET", url, timeout=min(context.timeout, http.METADATA_TIMEOUT), environ=context.environ, headers=headers
    )
    doc = parse_json(answer.body)
    if answer.status != 200 or not isinstance(doc.get("access_token"), str):
        raise CredentialError(failure(answer.status, doc))
    return AccessToken(doc["access_token"], expires_after(doc.get("expires_in"), context.clock.now()))
