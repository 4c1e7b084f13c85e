"""The TokenRequest subresource (``serviceaccounts/{name}/token``), as docs/testing.md describes a real
kube-apiserver v1.36: defaults, validation, the token's claims, 404 for a missing ServiceAccount, RBAC
on ``serviceaccounts/token``, and nothing stored."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import datetime
from typing import Any

import pytest

from .helpers import call

pytestmark = pytest.mark.integration


def claims_of(token: str) -> dict[str, Any]:
    parts = token.split(".")
    assert len(parts) == 3
    header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    assert header["alg"] in ("RS256", "ES256") and header.get("kid")
    return dict(json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))))


def verify_rs256(token: str, public_pem: bytes) -> None:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    head, payload, signature = token.split(".")
    key = serialization.load_pem_public_key(public_pem)
    key.verify(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),  # type: ignore[union-attr]
               f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())  # type: ignore[call-arg]


def token_path(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token"


def token_request(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


async def create_sa(http: Any, ns: str, name: str) -> dict[str, Any]:
    status, body = await call(http, "POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body={
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    assert status == 201, body
    return body


async def test_token_for_audiences_with_its_claims(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        sa = await create_sa(http, ns, "tokens")
        status, body = await call(http, "POST", token_path(ns, "tokens"),
                                  body=token_request(audiences=["sts.amazonaws.com"], expirationSeconds=1800))
        assert status == 201, body
        assert (body["apiVersion"], body["kind"]) == ("authentication.k8s.io/v1", "TokenRequest")
        assert body["spec"]["audiences"] == ["sts.amazonaws.com"]
        assert body["spec"]["expirationSeconds"] == 1800
        # the request's metadata completed with the ServiceAccount's name, namespace and uid, the time of the
        # request and its managedFields (kube-apiserver v1.36.3); nothing stored, so no resourceVersion
        meta = body["metadata"]
        assert (meta["name"], meta["namespace"], meta["uid"]) == ("tokens", ns, sa["metadata"]["uid"])
        assert "resourceVersion" not in meta and meta["creationTimestamp"]
        [entry] = meta["managedFields"]
        assert (entry["operation"], entry["apiVersion"], entry["subresource"]) == (
            "Update", "authentication.k8s.io/v1", "token")
        assert entry["fieldsV1"] == {"f:spec": {"f:audiences": {}, "f:expirationSeconds": {}}}
        claims = claims_of(body["status"]["token"])
        assert claims["sub"] == f"system:serviceaccount:{ns}:tokens"
        assert claims["aud"] == ["sts.amazonaws.com"]
        assert claims["exp"] - claims["iat"] == 1800
        assert claims["nbf"] == claims["iat"]
        assert isinstance(claims["iss"], str) and claims["iss"]
        assert claims["jti"]
        assert claims["kubernetes.io"]["namespace"] == ns
        assert claims["kubernetes.io"]["serviceaccount"] == {"name": "tokens", "uid": sa["metadata"]["uid"]}
        expires = datetime.fromisoformat(body["status"]["expirationTimestamp"].replace("Z", "+00:00"))
        assert int(expires.timestamp()) == claims["exp"]
        if cluster.server is not None:  # the embedded server's tokens verify with its key
            verify_rs256(body["status"]["token"], cluster.server.tokens.public_key_pem)
        # nothing is stored: the ServiceAccount is unchanged
        status, again = await call(http, "GET", f"/api/v1/namespaces/{ns}/serviceaccounts/tokens")
        assert again["metadata"]["resourceVersion"] == sa["metadata"]["resourceVersion"]


async def test_defaults_expiration_and_audiences(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await create_sa(http, ns, "defaults")
        status, body = await call(http, "POST", token_path(ns, "defaults"), body=token_request())
        assert status == 201, body
        assert body["spec"]["expirationSeconds"] == 3600
        audiences = body["spec"]["audiences"]
        assert isinstance(audiences, list) and audiences  # the API server's own audiences
        claims = claims_of(body["status"]["token"])
        assert claims["aud"] == audiences
        assert claims["exp"] - claims["iat"] == 3600


async def test_missing_service_account_then_validation(cluster):
    """kube-apiserver v1.36.3 reads the ServiceAccount before it validates the spec: an invalid request for a
    missing one is 404; the body's name must match the path (422) and its namespace the request's (400)."""
    ns = cluster.namespace
    async with cluster.session() as http:
        status, body = await call(http, "POST", token_path(ns, "missing"), body=token_request(expirationSeconds=599))
        assert (status, body["reason"]) == (404, "NotFound")
        assert body["message"] == 'serviceaccounts "missing" not found'
        await create_sa(http, ns, "present")
        status, body = await call(http, "POST", token_path(ns, "present"), body=token_request(expirationSeconds=599))
        assert (status, body["reason"]) == (422, "Invalid")
        assert body["message"] == ('TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
                                   "Invalid value: 599: may not specify a duration less than 10 minutes")
        status, body = await call(http, "POST", token_path(ns, "present"),
                                  body={**token_request(), "metadata": {"name": "other"}})
        assert (status, body["reason"]) == (422, "Invalid")
        assert body["message"] == ('TokenRequest.authentication.k8s.io "present" is invalid: metadata.name: '
                                   'Invalid value: "other": must match the service account name if specified')
        status, body = await call(http, "POST", token_path(ns, "present"),
                                  body={**token_request(), "metadata": {"namespace": f"{ns}-other"}})
        assert (status, body["reason"]) == (400, "BadRequest")
        assert body["message"] == ("the namespace of the provided object does not match the namespace sent on "
                                   "the request")
        status, _ = await call(http, "GET", token_path(ns, "missing"))
        assert status in (404, 405)


async def test_rbac_on_serviceaccounts_token(cluster):
    if cluster.server is not None:
        cluster.server.options.rbac = True
    ns = cluster.namespace
    user = f"system:serviceaccount:{ns}:minter"
    as_minter = {"Impersonate-User": user}
    async with cluster.session() as http:
        await create_sa(http, ns, "minter")
        await create_sa(http, ns, "target")
        status, body = await call(http, "POST", token_path(ns, "target"), body=token_request(), headers=as_minter)
        assert (status, body["reason"]) == (403, "Forbidden")
        assert body["message"] == (f'serviceaccounts "target" is forbidden: User "{user}" cannot create resource '
                                   f'"serviceaccounts/token" in API group "" in the namespace "{ns}"')
        status, body = await call(http, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", body={
            "metadata": {"name": "token-minter"},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
                       "resourceNames": ["target"]}]})
        assert status == 201, body
        status, body = await call(http, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                                  body={"metadata": {"name": "token-minter"},
                                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": "token-minter"},
                                        "subjects": [{"kind": "ServiceAccount", "name": "minter", "namespace": ns}]})
        assert status == 201, body
        for _ in range(100):  # a real server's RBAC authorizer sees a new binding through its informer
            status, body = await call(http, "POST", token_path(ns, "target"), body=token_request(),
                                      headers=as_minter)
            if status != 403:
                break
            await asyncio.sleep(0.1)
        assert status == 201, body
        assert claims_of(body["status"]["token"])["sub"] == f"system:serviceaccount:{ns}:target"
