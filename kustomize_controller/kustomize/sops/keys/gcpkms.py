"""Google Cloud KMS master keys (sops ``gcp_kms``): the data key decrypted with the KMS REST API.

Contract (sops ``gcpkms/keysource.go`` as kustomize-controller runs it):
- ``resource_id`` must match ``^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$``,
  else ``no valid resource ID found in "<id>"``.
- Credentials: the reconcile's GCP token source (static ``sops.gcp-kms`` or object-level workload
  identity), else the controller's Application Default Credentials.
- The call: ``POST <endpoint>/v1/<resource_id>:decrypt`` with ``Authorization: Bearer`` and
  ``{"ciphertext": "<enc>"}``; the answer's ``plaintext`` is the data key. No AAD and no CRC32C
  are sent, as sops. The endpoint is ``SOPS_GCP_KMS_ENDPOINT`` (``host[:port]`` means https, a
  URL is used as is), else ``https://cloudkms.<SOPS_GCP_KMS_UNIVERSE_DOMAIN>``, else
  ``https://cloudkms.googleapis.com``. sops' gRPC and REST transports send the same request;
  this one is REST (``SOPS_GCP_KMS_CLIENT_TYPE`` has nothing to choose).
- Failures read ``failed to decrypt sops data key with GCP KMS key: rpc error: code = <Code>
  desc = <message>`` (the gRPC status the REST error body carries), as upstream prints them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re

from kustomize_controller.kustomize.sops.errors import SopsKeyError
from kustomize_controller.kustomize.sops.keys import http, oauth
from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
from kustomize_controller.kustomize.sops.keys.gcp_credentials import ControllerADC
from kustomize_controller.kustomize.sops.metadata import MasterKey

RESOURCE_RE = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
PREFIX = "failed to decrypt sops data key with GCP KMS key"


def endpoint(environ: dict[str, str] | None) -> str:
    env = environ or {}
    configured = env.get("SOPS_GCP_KMS_ENDPOINT", "")
    if configured:
        return configured.rstrip("/") if "://" in configured else f"https://{configured.rstrip('/')}"
    domain = env.get("SOPS_GCP_KMS_UNIVERSE_DOMAIN", "") or "googleapis.com"
    return f"https://cloudkms.{domain}"


def grpc_code(status: str) -> str:
    """``PERMISSION_DENIED`` → ``PermissionDenied`` (gRPC's code names)."""
    return "".join(part.capitalize() for part in status.split("_")) if status else "Unknown"


async def decrypt_data_key(key: MasterKey, context: KeyServiceContext) -> bytes:
    if RESOURCE_RE.match(key.name) is None:
        raise SopsKeyError(f'no valid resource ID found in "{key.name}"')
    try:
        ciphertext = base64.b64decode(key.enc, validate=True)
    except (binascii.Error, ValueError) as err:
        raise SopsKeyError(str(err)) from None
    source = context.credentials.gcp or ControllerADC(context)
    try:
        token = await context.reuse(("gcp",), source.gcp_token)
    except SopsKeyError as err:
        raise SopsKeyError(f"{PREFIX}: rpc error: code = Unauthenticated desc = {err}") from None
    url = f"{endpoint(dict(context.environ))}/v1/{key.name}:decrypt"
    body = json.dumps({"ciphertext": base64.b64encode(ciphertext).decode()}).encode()
    headers = {"Authorization": f"Bearer {token.token}", "Content-Type": "application/json"}
    try:
        answer = await http.call(
            "POST", url, timeout=context.timeout, environ=context.environ, headers=headers, body=body
        )
    except http.TransportError as err:
        raise SopsKeyError(f"{PREFIX}: rpc error: code = Unavailable desc = {err}") from None
    doc = oauth.parse_json(answer.body)
    if answer.status != 200:
        found = doc.get("error")
        error: dict[str, object] = found if isinstance(found, dict) else {}
        code = grpc_code(str(error.get("status") or ""))
        message = http.scrub(str(error.get("message") or answer.text()[:200]), (token.token,))
        raise SopsKeyError(f"{PREFIX}: rpc error: code = {code} desc = {message}")
    try:
        return base64.b64decode(str(doc["plaintext"]), validate=True)
    except (KeyError, binascii.Error, ValueError):
        raise SopsKeyError(f"{PREFIX}: the answer holds no plaintext") from None
