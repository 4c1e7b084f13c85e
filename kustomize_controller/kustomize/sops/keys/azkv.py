"""Azure Key Vault master keys (sops ``azure_kv``): the data key decrypted with the vault's RSA key.

Contract (sops ``azkv/keysource.go`` with azkeys, as kustomize-controller runs it):
- ``enc`` is base64url without padding; a bad one fails with ``failed to base64 decode Azure Key
  Vault encrypted key: …``.
- The call is Key Vault's **decrypt** operation: ``POST <vault_url>/keys/<name>/<version>/decrypt
  ?api-version=7.5`` with ``{"alg": "RSA-OAEP-256", "value": "<enc>"}``; the answer's ``value``
  (base64url) is the data key.
- Authentication follows the Key Vault challenge: a first request without a token and without a
  body gets ``401`` with ``WWW-Authenticate: Bearer … resource=…`` (or ``scope=…``); the
  challenge's resource must be the vault's domain or a parent of it (azkeys' challenge resource
  verification), and the token is asked for ``<resource>/.default``. A bearer token is only sent
  over https, or to a loopback address (emulators).
- Credentials: the reconcile's Azure credential (static ``sops.azure-kv`` or object-level
  workload identity), else the controller's chain.
- Failures: ``failed to decrypt sops data key with Azure Key Vault key '<vault_url>/keys/<name>/
  <version>': …`` followed by the request and the service's answer laid out as azcore's
  ``ResponseError`` prints them (the answer of Key Vault holds no secret).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from urllib.parse import urlsplit

from kustomize_controller.kustomize.sops.errors import SopsKeyError
from kustomize_controller.kustomize.sops.keys import http, oauth
from kustomize_controller.kustomize.sops.keys.azure_credentials import ControllerChain
from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
from kustomize_controller.kustomize.sops.metadata import MasterKey

API_VERSION = "7.5"
_PARAM = re.compile(r'(\w+)="([^"]*)"')
_RULE = "-" * 80


def _b64url_decode(text: str) -> bytes:
    if "=" in text or "+" in text or "/" in text:
        raise binascii.Error("illegal base64 data")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def challenge_scope(header: str, vault_url: str) -> str:
    params = dict(_PARAM.findall(header))
    scope = params.get("scope") or (params["resource"].rstrip("/") + "/.default" if params.get("resource") else "")
    if not scope:
        raise SopsKeyError(f"the vault's authentication challenge names no resource: {header[:200]}")
    resource_host = urlsplit(scope.removesuffix("/.default")).hostname or ""
    vault_host = urlsplit(vault_url).hostname or ""
    if not resource_host or not (vault_host == resource_host or vault_host.endswith("." + resource_host)):
        raise SopsKeyError(
            f"challenge resource '{resource_host}' doesn't match the requested domain. See "
            "https://aka.ms/azsdk/blog/vault-uri for more information"
        )
    return scope


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _response_error(method: str, url: str, answer: http.Response, sent: tuple[str, ...] = ()) -> str:
    """The answer as azure-sdk-for-go shows it; ``sent``: the request's secrets, scrubbed from the body."""
    doc = oauth.parse_json(answer.body)
    error = doc.get("error") if isinstance(doc.get("error"), dict) else {}
    code = str(error.get("code") or "") if isinstance(error, dict) else ""
    lines = [
        f"{method} {http.redact_url(url)}",
        _RULE,
        f"RESPONSE {answer.status}",
        f"ERROR CODE: {code or 'UNAVAILABLE'}",
        _RULE,
    ]
    if doc:
        lines.append(json.dumps(doc, indent=2))
    elif answer.body:
        lines.append(answer.text()[:500])
    lines.append(_RULE)
    return http.scrub("\n".join(lines), sent)


async def decrypt_data_key(key: MasterKey, context: KeyServiceContext) -> bytes:
    name = key.to_string()
    prefix = f"failed to decrypt sops data key with Azure Key Vault key '{name}'"
    try:
        ciphertext = _b64url_decode(key.enc)
    except (binascii.Error, ValueError) as err:
        raise SopsKeyError(f"failed to base64 decode Azure Key Vault encrypted key: {err}") from None
    url = f"{key.name.rstrip('/')}/keys/{key.attr('name')}/{key.attr('version')}/decrypt?api-version={API_VERSION}"
    if not url.startswith("https://") and not _loopback(url):
        raise SopsKeyError(
            f"{prefix}: Bearer token authentication is not permitted for non-TLS protected (non-https) URLs."
        )
    body = json.dumps({"alg": "RSA-OAEP-256", "value": oauth.b64url(ciphertext)}).encode()
    credential = context.credentials.azure or ControllerChain(context)
    try:
        challenge = await http.call(
            "POST", url, timeout=context.timeout, environ=context.environ, headers={"Content-Length": "0"}
        )
        if challenge.status != 401 or "www-authenticate" not in challenge.headers:
            raise SopsKeyError(_response_error("POST", url, challenge))
        scope = challenge_scope(challenge.headers["www-authenticate"], key.name)
        token = await context.reuse(("azure", scope), lambda: credential.azure_token(scope))
        headers = {"Authorization": f"Bearer {token.token}", "Content-Type": "application/json"}
        answer = await http.call(
            "POST", url, timeout=context.timeout, environ=context.environ, headers=headers, body=body
        )
    except SopsKeyError as err:
        raise SopsKeyError(f"{prefix}: {err}") from None
    if answer.status != 200:
        raise SopsKeyError(f"{prefix}: {_response_error('POST', url, answer, (token.token,))}")
    value = oauth.parse_json(answer.body).get("value")
    try:
        return _b64url_decode(str(value)) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        raise SopsKeyError(f"{prefix}: the answer's value is not base64url") from None
