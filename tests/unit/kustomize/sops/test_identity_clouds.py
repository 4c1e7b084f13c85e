"""Object-level workload identity for GCP and Azure against the loopback Google and Azure: the
ServiceAccount token (its audience and subject checked by the fakes) exchanged with Google STS
(+ IAM impersonation, GKE metadata) or used as Entra ID's client assertion, then the data key
decrypted through the key services. Annotation errors read as upstream's."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from aiohttp import web

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsKeyError
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity, WorkloadIdentityOptions
from tests.loopback import serve

from .fake_azure import CLIENT_ID, TENANT, FakeAzure
from .fake_google import KEY, FakeGoogle
from .sopsgen import Recipe, encrypt_document
from .test_identity import FakeApi

PLAIN = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"key": "value"}}
WIP = "projects/123456/locations/global/workloadIdentityPools/flux/providers/kind"
GSA = "sops-decrypter@proj.iam.gserviceaccount.com"


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


class FederatedGoogle(FakeGoogle):
    """Google STS accepting Kubernetes ServiceAccount tokens for one audience, and a GKE metadata server."""

    expected_audience = ""  # the STS audience
    token_audience = ""  # the TokenRequest audience

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        if form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt":
            return await super().token(request)
        self.requests.append({"path": "/sts", "form": form})
        subject = claims(str(form["subject_token"]))
        if (form.get("audience") != self.expected_audience or subject["aud"] != [self.token_audience]
                or subject["sub"] != "system:serviceaccount:apps:decryptor"):
            return web.json_response({"error": "invalid_grant", "error_description": "audience mismatch"}, status=400)
        return web.json_response({"access_token": self.issuer.issue("federated"), "expires_in": 3600,
                                  "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                                  "token_type": "Bearer"})

    async def metadata(self, request: web.Request) -> web.Response:
        self.requests.append({"path": request.path})
        assert request.headers.get("Metadata-Flavor") == "Google"
        values = {"project/project-id": "proj", "instance/attributes/cluster-location": "europe-west1",
                  "instance/attributes/cluster-name": "flux"}
        return web.Response(text=values[request.match_info["tail"]])

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/computeMetadata/v1/{tail:(project|instance/attributes)/.+}", self.metadata)
        return app


class FederatedAzure(FakeAzure):
    """Entra ID accepting Kubernetes ServiceAccount tokens (audience api://AzureADTokenExchange)."""

    async def token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        assertion = str(form.get("client_assertion", ""))
        if assertion.count(".") != 2 or claims(assertion).get("aud") != ["api://AzureADTokenExchange"]:
            return await super().token(request)
        self.requests.append({"path": request.path, "form": form})
        assert request.match_info["tenant"] == TENANT and form["client_id"] == CLIENT_ID
        assert form["scope"] == self.scope
        assert claims(assertion)["sub"] == "system:serviceaccount:apps:decryptor"
        return web.json_response({"access_token": self.issuer.issue("workload"), "expires_in": 3599})


@pytest.fixture
async def google() -> AsyncIterator[FederatedGoogle]:
    async for fake in served(FederatedGoogle()):
        yield fake


@pytest.fixture
async def azure() -> AsyncIterator[FederatedAzure]:
    async for fake in served(FederatedAzure()):
        yield fake


async def served(fake: Any) -> AsyncIterator[Any]:
    runner, fake.url = await serve(fake.app())
    try:
        yield fake
    finally:
        await runner.cleanup()


async def decrypt(document: bytes, identity: WorkloadIdentity, environ: dict[str, str]) -> dict[str, Any]:
    workload = identity.credentials(name="app", namespace="apps", service_account_name="decryptor")
    with SopsDecryptor.from_secret_data({}, workload=workload, environ=environ,
                                        loop=asyncio.get_running_loop()) as dec:
        return dict(yaml.safe_load(await asyncio.to_thread(dec._decrypt_file, document, Format.YAML)))


def gcp_document(google: FakeGoogle) -> bytes:
    data_key = os.urandom(32)
    entry = {"resource_id": KEY, "created_at": "2024-11-12T13:33:42Z", "enc": google.encrypt(KEY, data_key)}
    return encrypt_document(PLAIN, "yaml", Recipe(extra_key_entries={"gcp_kms": [entry]}), key=data_key)


def gcp_identity(google: FakeGoogle, annotations: dict[str, str], api: FakeApi | None = None) -> WorkloadIdentity:
    host = google.url.removeprefix("http://")
    environ = {"HOME": "/nonexistent", "SOPS_GCP_KMS_ENDPOINT": google.url, "GCE_METADATA_HOST": host}
    return WorkloadIdentity(
        client=api or FakeApi({("apps", "decryptor"): annotations}),
        options=WorkloadIdentityOptions(object_level=True, environ=environ, gcp_sts_url=f"{google.url}/token",
                                        gcp_iam_url=google.url),
        cache=None)


async def test_gcp_workload_identity_federation_with_impersonation(google: FederatedGoogle) -> None:
    google.expected_audience = google.token_audience = f"//iam.googleapis.com/{WIP}"
    api = FakeApi({("apps", "decryptor"): {"gcp.auth.fluxcd.io/workload-identity-provider": WIP,
                                           "iam.gke.io/gcp-service-account": GSA}})
    identity = gcp_identity(google, {}, api)
    out = await decrypt(gcp_document(google), identity, {"SOPS_GCP_KMS_ENDPOINT": google.url, "HOME": "/x"})
    assert out["stringData"] == {"key": "value"}
    assert api.token_requests == [("apps/decryptor", [f"//iam.googleapis.com/{WIP}"])]
    sts = next(r for r in google.requests if r["path"] == "/sts")
    assert sts["form"]["scope"] == "https://www.googleapis.com/auth/cloud-platform"  # impersonation follows
    assert sts["form"]["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    paths = [r["path"] for r in google.requests]
    assert f"/v1/projects/-/serviceAccounts/{GSA}:generateAccessToken" in paths
    decrypt_call = next(r for r in google.requests if r["path"].endswith(":decrypt"))
    assert decrypt_call["auth"].startswith("Bearer impersonated-")


async def test_gcp_on_gke_direct_access_with_the_metadata_server(google: FederatedGoogle) -> None:
    google.token_audience = "proj.svc.id.goog"
    google.expected_audience = ("identitynamespace:proj.svc.id.goog:https://container.googleapis.com/v1/projects/"
                                "proj/locations/europe-west1/clusters/flux")
    api = FakeApi({("apps", "decryptor"): {}})
    out = await decrypt(gcp_document(google), gcp_identity(google, {}, api),
                        {"SOPS_GCP_KMS_ENDPOINT": google.url, "HOME": "/x"})
    assert out["stringData"] == {"key": "value"}
    assert api.token_requests == [("apps/decryptor", ["proj.svc.id.goog"])]
    sts = next(r for r in google.requests if r["path"] == "/sts")
    assert sts["form"]["scope"].split() == ["https://www.googleapis.com/auth/cloud-platform",
                                            "https://www.googleapis.com/auth/userinfo.email"]
    decrypt_call = next(r for r in google.requests if r["path"].endswith(":decrypt"))
    assert decrypt_call["auth"].startswith("Bearer federated-")


@pytest.mark.parametrize(("annotations", "expected"), [
    ({"iam.gke.io/gcp-service-account": "not-an-email"},
     "failed to get provider identity from service account 'apps/decryptor' annotations: invalid "
     "iam.gke.io/gcp-service-account annotation: 'not-an-email'. must match"),
    ({"gcp.auth.fluxcd.io/workload-identity-provider": "projects/x"},
     "failed to get provider audience: invalid gcp.auth.fluxcd.io/workload-identity-provider annotation: "
     "'projects/x'. must match"),
])
async def test_gcp_annotation_errors(google: FederatedGoogle, annotations: dict[str, str], expected: str) -> None:
    with pytest.raises(SopsKeyError) as caught:
        await decrypt(gcp_document(google), gcp_identity(google, annotations),
                      {"SOPS_GCP_KMS_ENDPOINT": google.url, "HOME": "/x"})
    assert expected in " ".join(str(caught.value).replace("| ", "").split())


def azure_document(azure: FakeAzure) -> bytes:
    data_key = os.urandom(32)
    return encrypt_document(PLAIN, "yaml", Recipe(extra_key_entries={"azure_kv": [azure.entry(data_key)]}),
                            key=data_key)


async def test_azure_client_assertion_with_the_service_account_token(azure: FederatedAzure) -> None:
    api = FakeApi({("apps", "decryptor"): {"azure.workload.identity/tenant-id": TENANT,
                                           "azure.workload.identity/client-id": CLIENT_ID}})
    environ = {"HOME": "/x", "AZURE_AUTHORITY_HOST": azure.url}
    identity = WorkloadIdentity(client=api, options=WorkloadIdentityOptions(object_level=True, environ=environ),
                                cache=None)
    out = await decrypt(azure_document(azure), identity, environ)
    assert out["stringData"] == {"key": "value"}
    assert api.token_requests == [("apps/decryptor", ["api://AzureADTokenExchange"])]
    decrypts = [r for r in azure.requests if r["path"].endswith("/decrypt") and r["auth"]]
    assert decrypts[-1]["auth"].startswith("Bearer workload-")


async def test_azure_missing_annotation(azure: FederatedAzure) -> None:
    api = FakeApi({("apps", "decryptor"): {"azure.workload.identity/tenant-id": TENANT}})
    environ = {"HOME": "/x", "AZURE_AUTHORITY_HOST": azure.url}
    identity = WorkloadIdentity(client=api, options=WorkloadIdentityOptions(object_level=True, environ=environ),
                                cache=None)
    with pytest.raises(SopsKeyError) as caught:
        await decrypt(azure_document(azure), identity, environ)
    text = " ".join(str(caught.value).replace("| ", "").split())
    assert ("failed to get provider identity from service account 'apps/decryptor' annotations: azure client ID "
            "is not set in the service account annotation azure.workload.identity/client-id") in text
