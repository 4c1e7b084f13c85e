"""AWS endpoints and the STS exchanges (AssumeRole, AssumeRoleWithWebIdentity), and the SigV4-signed
POST that KMS and STS share.

Contract:
- A service is called at the key's region (``<service>.<region>.amazonaws.com``) unless
  ``AWS_ENDPOINT_URL_<SERVICE>`` / ``AWS_ENDPOINT_URL`` say otherwise (:func:`endpoint`).
- ``AWS_CA_BUNDLE`` replaces the trusted CAs for KMS and STS, as in the SDK.
- :func:`assume_role_with_web_identity` takes the token itself (read from a file by
  ``aws_credentials.ControllerChain``; a TokenRequest token for object-level workload identity),
  :func:`assume_role` the base credentials. Errors read like aws-sdk-go-v2's (``operation error STS:
  <Op>, https response error StatusCode: …, RequestID: …, api error <Code>: <message>``); none
  carries a secret: the web identity token (scrubbed from a quoted answer too) and every key stay out
  of messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode
from xml.etree import ElementTree

from kustomize_controller.api.meta import parse_time
from kustomize_controller.kustomize.sops.keys import http
from kustomize_controller.kustomize.sops.keys.aws_sigv4 import sign
from kustomize_controller.kustomize.sops.keys.credentials import AwsCredentials, CredentialError, KeyServiceContext

STS_VERSION = "2011-06-15"
_FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}


def endpoint(service: str, region: str, environ: Mapping[str, str]) -> str:
    """aws-sdk-go-v2's resolution: ``AWS_ENDPOINT_URL_<SERVICE>``, then ``AWS_ENDPOINT_URL``,
    then the regional endpoint; ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`` skips both."""
    if environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != "true":
        configured = environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or environ.get("AWS_ENDPOINT_URL")
        if configured:
            return configured.rstrip("/") + "/"
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://{service}.{region}.{suffix}/"


def _sts_error(operation: str, answer: http.Response, sent: tuple[str, ...]) -> CredentialError:
    code, message, request_id = "", "", answer.headers.get("x-amzn-requestid", "")
    try:
        root = ElementTree.fromstring(answer.body)
        for element in root.iter():
            tag = element.tag.rpartition("}")[2]
            if tag == "Code" and not code:
                code = element.text or ""
            elif tag == "Message" and not message:
                message = element.text or ""
            elif tag == "RequestId" and not request_id:
                request_id = element.text or ""
    except ElementTree.ParseError:
        message = answer.text()[:200]
    return CredentialError(
        f"operation error STS: {operation}, https response error StatusCode: {answer.status}, "
        f"RequestID: {request_id}, api error {code or 'UnknownError'}: {http.scrub(message, sent)}"
    )


def _sts_credentials(operation: str, answer: http.Response, *, sent: tuple[str, ...] = ()) -> AwsCredentials:
    """``sent``: the secrets of the request (scrubbed from an error answer quoted in the message)."""
    if answer.status != 200:
        raise _sts_error(operation, answer, sent)
    try:
        root = ElementTree.fromstring(answer.body)
    except ElementTree.ParseError:
        raise CredentialError(f"operation error STS: {operation}, deserialization failed") from None
    found = {el.tag.rpartition("}")[2]: (el.text or "") for el in root.iter()}
    if not found.get("AccessKeyId") or not found.get("SecretAccessKey"):
        raise CredentialError(f"operation error STS: {operation}, the answer holds no credentials")
    return AwsCredentials(
        found["AccessKeyId"],
        found["SecretAccessKey"],
        found.get("SessionToken", ""),
        expires=parse_time(found.get("Expiration", "")),
    )


async def assume_role(
    base: AwsCredentials, *, role_arn: str, session_name: str, region: str, context: KeyServiceContext
) -> AwsCredentials:
    url = endpoint("sts", region, context.environ)
    body = urlencode(
        {"Action": "AssumeRole", "Version": STS_VERSION, "RoleArn": role_arn, "RoleSessionName": session_name}
    ).encode()
    answer = await signed_post(
        url, headers=_FORM, body=body, credentials=base, region=region, service="sts", context=context
    )
    return _sts_credentials("AssumeRole", answer)


async def signed_post(
    url: str,
    *,
    headers: Mapping[str, str],
    body: bytes,
    credentials: AwsCredentials,
    region: str,
    service: str,
    context: KeyServiceContext,
) -> http.Response:
    """One SigV4-signed POST (KMS, STS)."""
    signature = sign(
        method="POST",
        url=url,
        headers=headers,
        body=body,
        credentials=credentials,
        region=region,
        service=service,
        now=context.clock.now(),
    )
    return await http.call(
        "POST",
        url,
        timeout=context.timeout,
        environ=context.environ,
        headers={**headers, **signature},
        body=body,
        cafile=context.environ.get("AWS_CA_BUNDLE"),
    )


async def assume_role_with_web_identity(
    token: str, *, role_arn: str, session_name: str, region: str, context: KeyServiceContext, sts_url: str | None = None
) -> AwsCredentials:
    """Exchange a web identity (OIDC) token for role credentials; the request is not signed.
    ``sts_url`` overrides the endpoint (object-level workload identity calls the regional STS
    without the env overrides, as upstream)."""
    url = sts_url or endpoint("sts", region, context.environ)
    body = urlencode(
        {
            "Action": "AssumeRoleWithWebIdentity",
            "Version": STS_VERSION,
            "RoleArn": role_arn,
            "RoleSessionName": session_name,
            "WebIdentityToken": token,
        }
    ).encode()
    answer = await http.call(
        "POST",
        url,
        timeout=context.timeout,
        environ=context.environ,
        headers=_FORM,
        body=body,
        cafile=context.environ.get("AWS_CA_BUNDLE"),
    )
    return _sts_credentials("AssumeRoleWithWebIdentity", answer, sent=(token,))
