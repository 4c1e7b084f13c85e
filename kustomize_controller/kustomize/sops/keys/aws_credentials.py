"""AWS credentials: the ``sops.aws-kms`` Secret entry, the controller's standard chain, and the
STS exchanges (AssumeRole, AssumeRoleWithWebIdentity).

Contract:
- :func:`parse_static` reads ``sops.aws-kms`` as upstream does (YAML or JSON; field names
  matched case-insensitively, unknown ones ignored): ``aws_access_key_id``,
  ``aws_secret_access_key``, optional ``aws_session_token``. A missing id or secret is not an
  import error; it fails at first use with ``static credentials are empty`` (aws-sdk-go-v2).
- :class:`ControllerChain` is aws-sdk-go-v2's default chain without the SDK: ``AWS_PROFILE`` set →
  that profile of the shared credentials file; else env keys (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``); else web identity (``AWS_ROLE_ARN`` +
  ``AWS_WEB_IDENTITY_TOKEN_FILE``, IRSA); else the ``default`` profile of the shared credentials
  file (``AWS_SHARED_CREDENTIALS_FILE``, ``~/.aws/credentials``) if it has one; else container
  credentials (``AWS_CONTAINER_CREDENTIALS_FULL_URI`` / ``_RELATIVE_URI`` with
  ``AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]``, EKS Pod Identity / ECS); else EC2 instance
  metadata (IMDSv2; ``AWS_EC2_METADATA_SERVICE_ENDPOINT``, ``AWS_EC2_METADATA_DISABLED``).
  Profiles that assume roles or use SSO/processes are not read (docs/differences.md).
- ``AWS_CA_BUNDLE`` replaces the trusted CAs for KMS and STS, as in the SDK.
- STS is called at the key's region (``sts.<region>.amazonaws.com``) unless
  ``AWS_ENDPOINT_URL_STS`` / ``AWS_ENDPOINT_URL`` say otherwise (:func:`endpoint`).
- :func:`assume_role_with_web_identity` takes the token itself (read from a file here; a
  TokenRequest token for object-level workload identity), :func:`assume_role` the base
  credentials. Errors read like aws-sdk-go-v2's (``operation error STS: <Op>, https response
  error StatusCode: …, RequestID: …, api error <Code>: <message>``); none carries a secret: the
  web identity token and every key stay out of messages.
"""

from __future__ import annotations

import asyncio
import configparser
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from xml.etree import ElementTree

import yaml

from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.keys import http
from kustomize_controller.kustomize.sops.keys.aws_sigv4 import sign
from kustomize_controller.kustomize.sops.keys.credentials import (
    AwsCredentials,
    CredentialError,
    Credentials,
    KeyServiceContext,
)

STS_VERSION = "2011-06-15"
_FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
_IMDS = "http://169.254.169.254"
_CONTAINER_HOST = "http://169.254.170.2"


def endpoint(service: str, region: str, environ: Mapping[str, str]) -> str:
    """aws-sdk-go-v2's resolution: ``AWS_ENDPOINT_URL_<SERVICE>``, then ``AWS_ENDPOINT_URL``,
    then the regional endpoint; ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`` skips both."""
    if environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != "true":
        configured = environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or environ.get("AWS_ENDPOINT_URL")
        if configured:
            return configured.rstrip("/") + "/"
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://{service}.{region}.{suffix}/"


class StaticCredentials:
    def __init__(self, credentials: AwsCredentials) -> None:
        self._credentials = credentials

    async def aws_credentials(self, *, region: str) -> AwsCredentials:
        if not self._credentials.access_key_id or not self._credentials.secret_access_key:
            raise CredentialError("failed to retrieve credentials: static credentials are empty")
        return self._credentials


def parse_static(value: bytes, context: KeyServiceContext | None = None) -> Credentials:
    try:
        doc = yaml.safe_load(value.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise SopsFormatError(f"failed to unmarshal AWS credentials file: {type(err).__name__}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SopsFormatError("failed to unmarshal AWS credentials file: not a mapping")
    fields = {str(k).lower(): v for k, v in doc.items()}

    def get(name: str) -> str:
        found = fields.get(name)
        return found if isinstance(found, str) else ""

    credentials = AwsCredentials(
        get("aws_access_key_id"), get("aws_secret_access_key"), get("aws_session_token"), expires=None
    )
    return Credentials(aws=StaticCredentials(credentials))


# -- STS ----------------------------------------------------------------------------------------


def _sts_error(operation: str, answer: http.Response) -> CredentialError:
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
        f"RequestID: {request_id}, api error {code or 'UnknownError'}: {message}"
    )


def _sts_credentials(operation: str, answer: http.Response) -> AwsCredentials:
    if answer.status != 200:
        raise _sts_error(operation, answer)
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
        expires=_time(found.get("Expiration", "")),
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
    return _sts_credentials("AssumeRoleWithWebIdentity", answer)


def _time(text: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


# -- the controller's chain ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerChain:
    """The controller's own AWS identity (controller-level), resolved anew on every call."""

    context: KeyServiceContext

    async def aws_credentials(self, *, region: str) -> AwsCredentials:
        try:
            return await self._resolve(region)
        except SopsKeyError as err:
            raise CredentialError(f"failed to create provider access token for the controller: {err}") from None

    async def _resolve(self, region: str) -> AwsCredentials:
        env = self.context.environ
        tried: list[str] = []
        if env.get("AWS_PROFILE"):
            found = await asyncio.to_thread(self._profile, env["AWS_PROFILE"])
            if found is None:
                raise CredentialError(f"failed to get shared config profile, {env['AWS_PROFILE']}")
            return found
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            return AwsCredentials(
                env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env.get("AWS_SESSION_TOKEN", "")
            )
        if env.get("AWS_WEB_IDENTITY_TOKEN_FILE") and env.get("AWS_ROLE_ARN"):
            return await self._web_identity(region)
        tried.append("environment: no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, no AWS_WEB_IDENTITY_TOKEN_FILE")
        found = await asyncio.to_thread(self._profile, "default")
        if found is not None:
            return found
        tried.append("shared credentials file: no [default] profile")
        if env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
            return await self._container()
        if env.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true":
            try:
                return await self._imds()
            except SopsKeyError as err:
                tried.append(f"EC2 IMDS: {err}")
        raise CredentialError("no AWS credentials found: " + "; ".join(tried))

    def _profile(self, name: str) -> AwsCredentials | None:
        env = self.context.environ
        path = env.get("AWS_SHARED_CREDENTIALS_FILE") or str(
            Path(env.get("HOME", "~")).expanduser() / ".aws/credentials"
        )
        parser = configparser.RawConfigParser()
        try:
            parser.read(os.path.expanduser(path), encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            return None
        if not parser.has_section(name):
            return None
        section = parser[name]
        key_id, secret = section.get("aws_access_key_id", ""), section.get("aws_secret_access_key", "")
        if not key_id or not secret:
            return None
        return AwsCredentials(key_id, secret, section.get("aws_session_token", ""))

    async def _web_identity(self, region: str) -> AwsCredentials:
        env = self.context.environ
        path = env["AWS_WEB_IDENTITY_TOKEN_FILE"]
        token = await http.read_token_file(path, "web identity token file")
        session = (
            env.get("AWS_ROLE_SESSION_NAME") or f"kustomize-controller-{int(self.context.clock.now().timestamp())}"
        )
        return await assume_role_with_web_identity(
            token, role_arn=env["AWS_ROLE_ARN"], session_name=session, region=region, context=self.context
        )

    async def _container(self) -> AwsCredentials:
        env = self.context.environ
        url = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or (
            _CONTAINER_HOST + env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
        )
        headers: dict[str, str] = {}
        token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        if token_file:
            headers["Authorization"] = await http.read_token_file(token_file, "container authorization token file")
        elif env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN"):
            headers["Authorization"] = env["AWS_CONTAINER_AUTHORIZATION_TOKEN"]
        answer = await http.call(
            "GET", url, timeout=self.context.timeout, environ=self.context.environ, headers=headers
        )
        if answer.status != 200:
            raise CredentialError(f"container credentials endpoint answered {answer.status}")
        return _json_credentials(answer.body, "container credentials")

    async def _imds(self) -> AwsCredentials:
        base = self.context.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", _IMDS).rstrip("/")
        timeout = min(self.context.timeout, 5.0)
        answer = await http.call(
            "PUT",
            f"{base}/latest/api/token",
            timeout=timeout,
            environ=self.context.environ,
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"},
        )
        if answer.status != 200:
            raise CredentialError(f"IMDSv2 token request answered {answer.status}")
        headers = {"X-aws-ec2-metadata-token": answer.text().strip()}
        roles = await http.call(
            "GET",
            f"{base}/latest/meta-data/iam/security-credentials/",
            timeout=timeout,
            headers=headers,
            environ=self.context.environ,
        )
        role = roles.text().strip().splitlines()[0] if roles.status == 200 and roles.body.strip() else ""
        if not role:
            raise CredentialError("no EC2 IMDS role found")
        creds = await http.call(
            "GET",
            f"{base}/latest/meta-data/iam/security-credentials/{role}",
            timeout=timeout,
            headers=headers,
            environ=self.context.environ,
        )
        if creds.status != 200:
            raise CredentialError(f"EC2 IMDS credentials of role '{role}' answered {creds.status}")
        return _json_credentials(creds.body, "EC2 IMDS")


def _json_credentials(body: bytes, source: str) -> AwsCredentials:
    try:
        doc: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise CredentialError(f"{source}: the answer is not JSON") from None
    if not isinstance(doc, dict) or not doc.get("AccessKeyId") or not doc.get("SecretAccessKey"):
        raise CredentialError(f"{source}: the answer holds no credentials")
    return AwsCredentials(
        str(doc["AccessKeyId"]),
        str(doc["SecretAccessKey"]),
        str(doc.get("Token") or ""),
        expires=_time(str(doc.get("Expiration") or "")),
    )
