"""AWS KMS master keys (sops ``kms``): the data key decrypted with KMS ``Decrypt``.

Contract (sops ``kms/keysource.go`` as kustomize-controller runs it):
- The region is the key ARN's (``^arn:aws[\\w-]*:kms:(.+):[0-9]+:(key|alias)/.+$``), for KMS and
  for STS; an ARN that does not match fails with ``no valid ARN found in '<arn>'``.
- Credentials: the reconcile's AWS provider (static ``sops.aws-kms`` or object-level workload
  identity), else the controller's chain (``aws_credentials.ControllerChain``). ``aws_profile`` is
  ignored, as in kustomize-controller. A ``role`` is assumed with those credentials (STS
  AssumeRole, session ``sops@<hostname>``); failure: ``failed to assume role '<role>': …``.
- The call: ``POST <endpoint>`` with ``X-Amz-Target: TrentService.Decrypt`` (JSON 1.1, SigV4),
  ``KeyId`` = the ARN, ``CiphertextBlob`` = ``enc``, ``EncryptionContext`` = ``context``. The
  endpoint honours ``AWS_ENDPOINT_URL_KMS`` / ``AWS_ENDPOINT_URL``.
- Failures read ``failed to decrypt sops data key with AWS KMS: operation error KMS: Decrypt,
  …`` with the service's error code and message, as aws-sdk-go-v2 prints them.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import socket
from typing import Any

from kustomize_controller.kustomize.sops.errors import SopsKeyError
from kustomize_controller.kustomize.sops.keys import http, oauth
from kustomize_controller.kustomize.sops.keys.aws_credentials import ControllerChain
from kustomize_controller.kustomize.sops.keys.aws_sts import assume_role, endpoint, signed_post
from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
from kustomize_controller.kustomize.sops.metadata import MasterKey

ARN_RE = re.compile(r"^arn:aws[\w-]*:kms:(.+):[0-9]+:(key|alias)/.+$")
_SESSION_STRIP = re.compile(r"[^a-zA-Z0-9=,.@-_]")  # '@-_' is a range, as in sops
PREFIX = "failed to decrypt sops data key with AWS KMS"
# KMS Decrypt's modelled errors: aws-sdk-go-v2 prints them "<Code>: <message>", others "api error …"
_MODELLED = frozenset(
    {
        "DependencyTimeoutException",
        "DisabledException",
        "DryRunOperationException",
        "IncorrectKeyException",
        "InvalidCiphertextException",
        "InvalidGrantTokenException",
        "InvalidKeyUsageException",
        "KeyUnavailableException",
        "KMSInternalException",
        "KMSInvalidStateException",
        "NotFoundException",
    }
)


def region_of(arn: str) -> str:
    match = ARN_RE.match(arn)
    if match is None:
        raise SopsKeyError(f"no valid ARN found in '{arn}'")
    return match.group(1)


def session_name(hostname: str) -> str:
    return _SESSION_STRIP.sub("", f"sops@{hostname}")[:64]


async def decrypt_data_key(key: MasterKey, context: KeyServiceContext) -> bytes:
    region = region_of(key.name)
    try:
        blob = base64.b64decode(key.enc, validate=True)
    except (binascii.Error, ValueError) as err:
        raise SopsKeyError(f"error base64-decoding encrypted data key: {err}") from None
    provider = context.credentials.aws or ControllerChain(context)
    try:
        credentials = await context.reuse(("aws", region), lambda: provider.aws_credentials(region=region))
    except SopsKeyError as err:
        raise SopsKeyError(f"{PREFIX}: operation error KMS: Decrypt, {err}") from None
    role = key.attr("role")
    if role:
        try:
            base = credentials
            credentials = await context.reuse(
                ("aws-role", role, region),
                lambda: assume_role(
                    base,
                    role_arn=role,
                    session_name=session_name(socket.gethostname()),
                    region=region,
                    context=context,
                ),
            )
        except SopsKeyError as err:
            raise SopsKeyError(f"failed to assume role '{role}': {err}") from None
    url = endpoint("kms", region, context.environ)
    body = json.dumps(
        {"CiphertextBlob": base64.b64encode(blob).decode(), "EncryptionContext": dict(key.context), "KeyId": key.name}
    ).encode()
    headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "TrentService.Decrypt"}
    try:
        answer = await signed_post(
            url, headers=headers, body=body, credentials=credentials, region=region, service="kms", context=context
        )
    except http.TransportError as err:
        raise SopsKeyError(f"{PREFIX}: operation error KMS: Decrypt, {err}") from None
    doc = oauth.parse_json(answer.body)
    if answer.status != 200:
        raise SopsKeyError(f"{PREFIX}: operation error KMS: Decrypt, {_error(answer, doc)}")
    try:
        return base64.b64decode(str(doc["Plaintext"]), validate=True)
    except (KeyError, binascii.Error, ValueError):
        raise SopsKeyError(f"{PREFIX}: operation error KMS: Decrypt, the answer holds no plaintext") from None


def _error(answer: http.Response, doc: dict[str, Any]) -> str:
    code = str(doc.get("__type") or answer.headers.get("x-amzn-errortype", "") or "UnknownError")
    code = code.rpartition("#")[2].partition(":")[0]
    message = str(doc.get("message") or doc.get("Message") or "")
    described = f"{code}: {message}" if code in _MODELLED else f"api error {code}: {message}"
    return (
        f"https response error StatusCode: {answer.status}, "
        f"RequestID: {answer.headers.get('x-amzn-requestid', '')}, {described}"
    )
