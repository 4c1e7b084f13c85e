"""AWS through the workload identity layer against moto: the controller's web identity (IRSA) is
cached across reconciles by the token cache (upstream caches controller-level tokens too), plain
environment keys are never cached, and the object-level web identity names its session as upstream."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import yaml
from prometheus_client import CollectorRegistry

from kustomize_controller.kustomize.sops import SopsDecryptor
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity, WorkloadIdentityOptions
from kustomize_controller.kustomize.sops.keys import aws_credentials
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.tokencache import TokenCache, TokenCacheMetrics
from tests.fakes.jwt import service_account_jwt

from .aws_moto import Moto
from .sopsgen import Recipe, encrypt_document
from .test_identity import FakeApi

PLAIN = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"key": "value"}}
ROLE = "arn:aws:iam::123456789012:role/flux"


@pytest.fixture
def sts_actions(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, list[str]]]:
    seen: list[dict[str, list[str]]] = []
    real_call = aws_credentials.http.call

    async def spy(method: str, url: str, **kwargs: Any) -> Any:
        form = parse_qs((kwargs.get("body") or b"").decode())
        if "Action" in form:
            seen.append(form)
        return await real_call(method, url, **kwargs)

    monkeypatch.setattr(aws_credentials.http, "call", spy)
    return seen


def document(moto: Moto) -> bytes:
    data_key = os.urandom(32)
    entry = moto.kms_entry(moto.create_key(), data_key)
    return encrypt_document(PLAIN, "yaml", Recipe(extra_key_entries={"kms": [entry]}), key=data_key)


async def reconcile(identity: WorkloadIdentity, doc: bytes, environ: dict[str, str], sa: str = "") -> None:
    workload = identity.credentials(name="app", namespace="apps", service_account_name=sa)
    with SopsDecryptor.from_secret_data({}, workload=workload, environ=environ,
                                        loop=asyncio.get_running_loop()) as dec:
        out = yaml.safe_load(await asyncio.to_thread(dec._decrypt_file, doc, Format.YAML))
    assert out["stringData"] == {"key": "value"}


async def test_controller_web_identity_is_cached_across_reconciles(moto_server: Moto, tmp_path: Path,
                                                                   sts_actions: list[dict[str, list[str]]]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(service_account_jwt("flux-system", "kc", audience="sts.amazonaws.com", exp=2e9))
    environ = {"HOME": "/nonexistent", "AWS_ENDPOINT_URL": moto_server.url, "AWS_ROLE_ARN": ROLE,
               "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file), "AWS_EC2_METADATA_DISABLED": "true"}
    registry = CollectorRegistry()
    clock = FakeClock(start=datetime.now(UTC))
    cache: TokenCache[Any] = TokenCache(max_size=10, clock=clock, metrics=TokenCacheMetrics(registry))
    identity = WorkloadIdentity(client=FakeApi(), options=WorkloadIdentityOptions(environ=environ), cache=cache,
                                clock=clock)
    doc = document(moto_server)
    await reconcile(identity, doc, environ)
    await reconcile(identity, doc, environ)
    assert [a["Action"] for a in sts_actions] == [["AssumeRoleWithWebIdentity"]]
    labels = {"kind": "Kustomization", "name": "app", "namespace": "apps", "operation": "decrypt_with_aws"}
    assert registry.get_sample_value("gotk_token_cache_events_total", {"event_type": "cache_hit", **labels}) == 1


async def test_plain_environment_keys_are_never_cached(moto_server: Moto) -> None:
    environ = {"HOME": "/nonexistent", "AWS_ENDPOINT_URL": moto_server.url, "AWS_ACCESS_KEY_ID": "AKIAENV",
               "AWS_SECRET_ACCESS_KEY": "env-secret-never-leak"}
    clock = FakeClock(start=datetime.now(UTC))
    cache: TokenCache[Any] = TokenCache(max_size=10, clock=clock)
    identity = WorkloadIdentity(client=FakeApi(), options=WorkloadIdentityOptions(environ=environ), cache=cache,
                                clock=clock)
    doc = document(moto_server)
    await reconcile(identity, doc, environ)
    await reconcile(identity, doc, environ)
    assert all(entry.fresh_until <= cache._clock.monotonic() for entry in cache._entries.values())


async def test_object_level_session_name_and_audience(moto_server: Moto,
                                                      sts_actions: list[dict[str, list[str]]]) -> None:
    environ = {"HOME": "/nonexistent", "AWS_ENDPOINT_URL": moto_server.url, "AWS_EC2_METADATA_DISABLED": "true"}
    api = FakeApi({("apps", "decryptor"): {"eks.amazonaws.com/role-arn": ROLE}})
    identity = WorkloadIdentity(client=api, options=WorkloadIdentityOptions(object_level=True, environ=environ),
                                cache=None)
    await reconcile(identity, document(moto_server), environ, sa="decryptor")
    (call,) = sts_actions
    assert call["RoleArn"] == [ROLE]
    assert call["RoleSessionName"] == ["decryptor.apps.eu-west-1.fluxcd.io"]
    assert api.token_requests == [("apps/decryptor", ["sts.amazonaws.com"])]
