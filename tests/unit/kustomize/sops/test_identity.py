"""Workload identity without a cluster: upstream's GetAccessToken flow and error texts, the cache
key and token caching, the AWS annotation, the generic (Vault) provider at both levels."""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kustomize_controller.kube.errors import ForbiddenError, NotFoundError
from kustomize_controller.kustomize.sops.identity import aws
from kustomize_controller.kustomize.sops.identity.access import GATE_DISABLED, get_access_token
from kustomize_controller.kustomize.sops.identity.generic import KubernetesTokenProvider
from kustomize_controller.kustomize.sops.identity.serviceaccount import (
    IdentityError,
    ServiceAccounts,
    controller_service_account,
    jwt_claims,
    service_account_of,
)
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity, WorkloadIdentityOptions
from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.runtime.tokencache import InvolvedObject, TokenCache, TokenCacheMetrics
from tests.fakes.jwt import service_account_jwt, unsigned_jwt

ROLE = "arn:aws:iam::123456789012:role/flux"


class FakeApi:
    """ServiceAccount GETs and TokenRequests, answered as the API server does."""

    def __init__(self, accounts: dict[tuple[str, str], dict[str, str]] | None = None, *,
                 token_error: Exception | None = None,
                 configmaps: dict[tuple[str, str], dict[str, str]] | None = None) -> None:
        self.accounts = accounts or {}
        self.configmaps = configmaps or {}
        self.token_error = token_error
        self.token_requests: list[tuple[str, list[str]]] = []

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        key = (namespace or "", name)
        if kind == "ConfigMap" and key in self.configmaps:
            return {"metadata": {"name": name, "namespace": namespace}, "data": self.configmaps[key]}
        if kind != "ServiceAccount" or key not in self.accounts:
            raise NotFoundError(f'{kind.lower()}s "{name}" not found', status=404, kind=kind, namespace=namespace,
                                name=name)
        return {"metadata": {"name": name, "namespace": namespace, "annotations": self.accounts[key]}}

    async def request_json(self, method: str, path: str, *, params: Any = (), body: Any = None) -> Any:
        if self.token_error is not None:
            raise self.token_error
        parts = path.split("/")
        namespace, name = parts[4], parts[6]
        audiences = list(body["spec"]["audiences"]) or ["https://kubernetes.default.svc.cluster.local"]
        self.token_requests.append((f"{namespace}/{name}", audiences))
        token = service_account_jwt(namespace, name, audience=audiences[0], exp=time.time() + 3600)
        return {"status": {"token": token, "expirationTimestamp": "x"}}


def test_jwt_helpers() -> None:
    token = service_account_jwt("apps", "sa", audience="a", exp=2_000_000_000)
    assert jwt_claims(token)["aud"] == ["a"]
    assert service_account_of(token) == ("apps", "sa")
    with pytest.raises(ValueError, match=r"^not a JWT$"):
        jwt_claims("abc")
    with pytest.raises(ValueError, match=r"^failed to unmarshal token payload: "):
        jwt_claims("a.bm90IGpzb24.c")
    with pytest.raises(ValueError, match=r"^unexpected token subject 'system:serviceaccount:apps'$"):
        service_account_of(unsigned_jwt({"sub": "system:serviceaccount:apps"}))


async def test_controller_service_account_from_its_token_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(service_account_jwt("flux-system", "kustomize-controller", audience="x", exp=2e9))
    assert await controller_service_account(path) == ("flux-system", "kustomize-controller")
    path.write_text(unsigned_jwt({"sub": "someone"}))
    with pytest.raises(IdentityError, match=r"^invalid subject format in service account token: someone$"):
        await controller_service_account(path)
    with pytest.raises(IdentityError, match=r"^failed to read service account token file .*/absent: "):
        await controller_service_account(tmp_path / "absent")


async def test_generic_provider_object_and_controller_level(tmp_path: Path) -> None:
    api = FakeApi({("apps", "decryptor"): {}, ("flux-system", "kc"): {}})
    accounts = ServiceAccounts(api)
    path = tmp_path / "token"
    path.write_text(service_account_jwt("flux-system", "kc", audience="x", exp=2e9))
    provider = KubernetesTokenProvider(accounts, audiences=["https://vault:8200"], token_file=path)
    token = await get_access_token(provider, accounts=accounts, service_account=("apps", "decryptor"),
                                   object_level=True, audiences=("https://vault:8200",))
    assert service_account_of(token.token) == ("apps", "decryptor")
    token = await get_access_token(provider, accounts=accounts, service_account=None, object_level=False,
                                   audiences=("https://vault:8200",))
    assert service_account_of(token.token) == ("flux-system", "kc")
    assert api.token_requests == [("apps/decryptor", ["https://vault:8200"]),
                                  ("flux-system/kc", ["https://vault:8200"])]
    assert "eyJ" not in repr(token)


async def test_upstream_error_texts() -> None:
    accounts = ServiceAccounts(FakeApi({("apps", "plain"): {}, ("apps", "bad"): {aws.ROLE_ANNOTATION: "nope"}}))
    provider = aws.AwsProvider(region="eu-west-1", context=KeyServiceContext())
    with pytest.raises(IdentityError, match=r"^failed to get service account 'apps/missing': "
                                            'serviceaccounts "missing" not found$'):
        await get_access_token(provider, accounts=accounts, service_account=("apps", "missing"), object_level=True)
    with pytest.raises(IdentityError) as caught:
        await get_access_token(provider, accounts=accounts, service_account=("apps", "bad"), object_level=True)
    assert str(caught.value) == (
        "failed to get provider identity from service account 'apps/bad' annotations: invalid "
        f"eks.amazonaws.com/role-arn annotation: 'nope'. must match {aws.ROLE_ARN_PATTERN}")
    generic = KubernetesTokenProvider(accounts, audiences=["a"])
    with pytest.raises(IdentityError, match=f"^{GATE_DISABLED}$"):
        await get_access_token(generic, accounts=accounts, service_account=("apps", "plain"), object_level=False,
                               audiences=("a",))
    denied = ServiceAccounts(FakeApi({("apps", "plain"): {}}, token_error=ForbiddenError(
        'serviceaccounts "plain" is forbidden: no', status=403, kind="ServiceAccount", namespace="apps", name="plain")))
    with pytest.raises(IdentityError, match=r"^failed to create kubernetes token for service account 'apps/plain': "
                                            'serviceaccounts "plain" is forbidden: no$'):
        await get_access_token(generic, accounts=denied, service_account=("apps", "plain"), object_level=True,
                               audiences=("a",))


def test_role_arn_annotation() -> None:
    assert aws.role_arn({"metadata": {"annotations": {aws.ROLE_ANNOTATION: ROLE}}}) == ROLE
    assert aws.role_arn({"metadata": {"annotations": {
        aws.ROLE_ANNOTATION: "arn:aws-us-gov:iam::1:role/x"}}}) == "arn:aws-us-gov:iam::1:role/x"
    for bad in ("", "arn:aws:iam::123:user/x", "arn:aws:sts::123:role/x"):
        with pytest.raises(IdentityError, match=r"^invalid eks.amazonaws.com/role-arn annotation: "):
            aws.role_arn({"metadata": {"annotations": {aws.ROLE_ANNOTATION: bad}}})


async def test_tokens_are_cached_under_upstreams_key_per_kustomization() -> None:
    clock = FakeClock(start=datetime.now(UTC))
    registry = CollectorRegistry()
    cache: TokenCache[Any] = TokenCache(max_size=10, clock=clock, metrics=TokenCacheMetrics(registry))
    api = FakeApi({("apps", "decryptor"): {}})
    wi = WorkloadIdentity(client=api, options=WorkloadIdentityOptions(object_level=True), cache=cache, clock=clock)
    accounts = ServiceAccounts(api)
    provider = KubernetesTokenProvider(accounts, audiences=["https://vault"])
    involved = InvolvedObject("Kustomization", "app", "apps", "decrypt_with_vault")
    first = await wi.access_token(provider, account=("apps", "decryptor"), involved=involved,
                                  audiences=("https://vault",))
    again = await wi.access_token(provider, account=("apps", "decryptor"), involved=involved,
                                  audiences=("https://vault",))
    assert again is first and len(api.token_requests) == 1
    expected_key = hashlib.sha256("\n".join([
        "provider=generic", "audiences=https://vault",
        "providerIdentity=system:serviceaccount:apps:decryptor", "serviceAccountName=decryptor",
        "serviceAccountNamespace=apps"]).encode()).hexdigest()
    assert expected_key in cache._entries
    labels = {"kind": "Kustomization", "name": "app", "namespace": "apps", "operation": "decrypt_with_vault"}
    assert registry.get_sample_value("gotk_token_cache_events_total", {"event_type": "cache_hit", **labels}) == 1
    await clock.advance(timedelta(minutes=48).total_seconds() + 1)  # past 80% of the hour-long token
    await wi.access_token(provider, account=("apps", "decryptor"), involved=involved, audiences=("https://vault",))
    assert len(api.token_requests) == 2


def test_credentials_per_kustomization() -> None:
    api = FakeApi()
    plain = WorkloadIdentity(client=api, options=WorkloadIdentityOptions(), cache=None)
    creds = plain.credentials(name="app", namespace="apps")
    assert (creds.aws, creds.gcp, creds.azure, creds.vault) == (None, None, None, None)
    assert creds.identity == "controller"
    with_sa = WorkloadIdentity(client=api, options=WorkloadIdentityOptions(
        object_level=True, default_service_account="decryptor", vault_configmap=("flux-system", "vault")), cache=None)
    creds = with_sa.credentials(name="app", namespace="apps")
    assert creds.aws is not None and creds.vault is not None
    assert creds.identity == "serviceaccount:apps/decryptor"
    creds = with_sa.credentials(name="app", namespace="apps", service_account_name="other")
    assert creds.aws is not None and creds.identity == "serviceaccount:apps/other"
