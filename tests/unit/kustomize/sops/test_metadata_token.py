"""The access token from a node's metadata server, as Azure's managed identity (IMDS) and Google's
default service account (GCE metadata) fetch it: what is sent, the token and its expiry, and each
provider's error text byte for byte (a status, no body quoted beyond OAuth's error fields)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web

from kustomize_controller.kustomize.sops.keys.azure_credentials import ManagedIdentity
from kustomize_controller.kustomize.sops.keys.credentials import CredentialError, KeyServiceContext
from kustomize_controller.kustomize.sops.keys.gcp_credentials import ControllerADC
from kustomize_controller.runtime.clock import FakeClock
from tests.loopback import serve

GCP = "failed to create provider access token for the controller: "
Answer = Callable[[web.Request], web.Response]


class Metadata:
    """A loopback metadata server answering every GET with ``answer``; it keeps what it was sent."""

    def __init__(self) -> None:
        self.answer: Answer = lambda _request: web.json_response({"access_token": "tok", "expires_in": "3599"})
        self.seen: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, dict(request.query), dict(request.headers)))
        return self.answer(request)


@pytest.fixture
async def metadata() -> AsyncIterator[Metadata]:
    server = Metadata()
    app = web.Application()
    app.router.add_get("/{tail:.*}", server.handle)
    runner, server.url = await serve(app)
    try:
        yield server
    finally:
        await runner.cleanup()


def _context(clock: FakeClock, **environ: str) -> KeyServiceContext:
    return KeyServiceContext(environ={"HOME": "/nonexistent", **environ}, clock=clock)


async def _azure(metadata: Metadata, clock: FakeClock, client_id: str = "") -> Any:
    identity = ManagedIdentity(client_id, _context(clock, AZURE_POD_IDENTITY_AUTHORITY_HOST=metadata.url))
    return await identity.azure_token("https://vault.azure.net/.default")


async def _gcp(metadata: Metadata, clock: FakeClock) -> Any:
    return await ControllerADC(_context(clock, GCE_METADATA_HOST=metadata.url.removeprefix("http://"))).gcp_token()


async def test_azure_managed_identity_token(metadata: Metadata) -> None:
    clock = FakeClock()
    token = await _azure(metadata, clock, client_id="c-1")
    assert token.token == "tok" and token.expires == clock.now() + timedelta(seconds=3599)
    path, query, headers = metadata.seen[-1]
    assert path == "/metadata/identity/oauth2/token" and headers["Metadata"] == "true"
    assert query == {"api-version": "2018-02-01", "resource": "https://vault.azure.net", "client_id": "c-1"}


async def test_gcp_metadata_server_token(metadata: Metadata) -> None:
    clock = FakeClock()
    token = await _gcp(metadata, clock)
    assert token.token == "tok" and token.expires == clock.now() + timedelta(seconds=3599)
    path, _query, headers = metadata.seen[-1]
    assert path == "/computeMetadata/v1/instance/service-accounts/default/token"
    assert headers["Metadata-Flavor"] == "Google"


@pytest.mark.parametrize(
    ("status", "body", "azure", "gcp"),
    [
        (400, {"error": "invalid_request", "error_description": "Identity not found"},
         "ManagedIdentityCredential: IMDS answered 400: invalid_request: Identity not found",
         GCP + "metadata server answered 400 for the default service account token"),
        (500, "upstream connect error", "ManagedIdentityCredential: IMDS answered 500: status 500",
         GCP + "metadata server answered 500 for the default service account token"),
        (200, {"token_type": "Bearer"}, "ManagedIdentityCredential: IMDS answered 200: status 200",
         GCP + "metadata server answered 200 for the default service account token"),
        (200, {"access_token": 42}, "ManagedIdentityCredential: IMDS answered 200: status 200",
         GCP + "metadata server answered 200 for the default service account token"),
    ],
)
async def test_errors_word_each_provider_as_before(
    metadata: Metadata, status: int, body: Any, azure: str, gcp: str
) -> None:
    def answer(_request: web.Request) -> web.Response:
        if isinstance(body, str):
            return web.Response(status=status, text=body)
        return web.json_response(body, status=status)

    metadata.answer = answer
    with pytest.raises(CredentialError) as on_azure:
        await _azure(metadata, FakeClock())
    with pytest.raises(CredentialError) as on_gcp:
        await _gcp(metadata, FakeClock())
    assert (str(on_azure.value), str(on_gcp.value)) == (azure, gcp)


async def test_an_expiry_that_is_no_number_leaves_the_token_without_one(metadata: Metadata) -> None:
    metadata.answer = lambda _request: web.json_response({"access_token": "tok", "expires_in": "soon"})
    assert (await _azure(metadata, FakeClock())).expires is None
    assert (await _gcp(metadata, FakeClock())).expires is None

