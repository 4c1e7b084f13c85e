"""AWS credentials: the ``sops.aws-kms`` Secret entry and the controller's standard chain (the STS
exchanges are in ``aws_sts.py``).

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
- Web identity reads the token file off the event loop and exchanges it with
  ``aws_sts.assume_role_with_web_identity``; no error carries a secret.
"""

from __future__ import annotations

import asyncio
import configparser
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kustomize_controller.api.meta import parse_time
from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.keys import http
from kustomize_controller.kustomize.sops.keys.aws_sts import assume_role_with_web_identity
from kustomize_controller.kustomize.sops.keys.credentials import (
    AwsCredentials,
    CredentialError,
    Credentials,
    KeyServiceContext,
)

_IMDS = "http://169.254.169.254"
_CONTAINER_HOST = "http://169.254.170.2"


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
        timeout = min(self.context.timeout, http.METADATA_TIMEOUT)
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
        expires=parse_time(str(doc.get("Expiration") or "")),
    )
