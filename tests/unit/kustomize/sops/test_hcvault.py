"""Vault/OpenBao transit decryption against the loopback Vault (tests/fakes/vault.py): every token
source in upstream's order, the allow-list, Kubernetes auth, and upstream's error texts."""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.kustomize.sops.identity.serviceaccount import IdentityError
from kustomize_controller.kustomize.sops.keys.credentials import Credentials, KeyServiceContext
from kustomize_controller.kustomize.sops.keys.hcvault import (
    StaticVaultToken,
    VaultClientConfig,
    VaultError,
    check_allowlist,
    decrypt_data_key,
    decrypt_with,
    parse_static,
)
from kustomize_controller.kustomize.sops.keys.vault_auth import VaultKubernetesAuth, parse_login_paths
from kustomize_controller.kustomize.sops.metadata import MasterKey
from tests.fakes.jwt import service_account_jwt
from tests.fakes.vault import FakeVault, Role

DATA_KEY = os.urandom(32)
ROOT = "root-token-very-secret"


@pytest.fixture
async def vault() -> AsyncIterator[FakeVault]:
    fake = FakeVault()
    fake.add_key("sops", "firstkey")
    fake.add_key("a/b", "nested")
    fake.add_token(ROOT)
    await fake.start()
    yield fake
    await fake.stop()


def vault_key(vault: FakeVault, mount: str = "sops", name: str = "firstkey", address: str | None = None) -> MasterKey:
    return MasterKey("hc_vault", address or vault.url, vault.encrypt(mount, name, DATA_KEY),
                     {"engine_path": mount, "key_name": name, "created_at": "2024-01-01T00:00:00Z"})


async def test_static_token_from_the_secret(vault: FakeVault) -> None:
    credentials = parse_static(f"  {ROOT}\n".encode())
    context = KeyServiceContext(credentials=credentials, environ={
        "VAULT_TOKEN": "ignored-env-token", "VAULT_NAMESPACE": "team-a", "HOME": "/nonexistent"})
    key = vault_key(vault)
    assert await decrypt_data_key(key, context) == DATA_KEY
    sent = vault.requests[-1]
    assert (sent.method, sent.path, sent.body) == ("PUT", "/v1/sops/decrypt/firstkey", {"ciphertext": key.enc})
    assert sent.headers["X-Vault-Token"] == ROOT
    assert sent.headers["X-Vault-Request"] == "true"
    assert sent.headers["X-Vault-Namespace"] == "team-a"
    assert "very-secret" not in repr(credentials)


async def test_nested_engine_path(vault: FakeVault) -> None:
    key = vault_key(vault, "a/b", "nested")
    assert await decrypt_with(key, VaultClientConfig(), StaticVaultToken(ROOT)) == DATA_KEY
    assert vault.requests[-1].path == "/v1/a/b/decrypt/nested"


async def test_permission_denied_has_the_go_client_text(vault: FakeVault) -> None:
    with pytest.raises(VaultError) as caught:
        await decrypt_with(vault_key(vault), VaultClientConfig(), StaticVaultToken("wrong-secret-token"))
    assert str(caught.value) == (
        "failed to decrypt sops data key from Vault transit backend 'sops/decrypt/firstkey': "
        f"Error making API request.\n\nURL: PUT {vault.url}/v1/sops/decrypt/firstkey\nCode: 403. Errors:\n\n"
        "* permission denied"
    )
    assert "wrong-secret-token" not in str(caught.value)


async def test_unknown_mount_and_wrong_ciphertext(vault: FakeVault) -> None:
    key = vault_key(vault)
    missing = MasterKey("hc_vault", vault.url, key.enc, {"engine_path": "nope", "key_name": "firstkey"})
    with pytest.raises(VaultError, match=r"(?s)'nope/decrypt/firstkey': Error making API request.*Code: 404\. Errors:"):
        await decrypt_with(missing, VaultClientConfig(), StaticVaultToken(ROOT))
    bad = MasterKey("hc_vault", vault.url, "vault:v1:" + base64.b64encode(os.urandom(40)).decode(), key.extra)
    with pytest.raises(VaultError, match=r"Code: 400\. Errors:\n\n\* cipher: message authentication failed$"):
        await decrypt_with(bad, VaultClientConfig(), StaticVaultToken(ROOT))


async def test_unreachable_vault_fails_with_the_url() -> None:
    key = MasterKey("hc_vault", "http://127.0.0.1:9", "vault:v1:AAAA", {"engine_path": "sops", "key_name": "k"})
    with pytest.raises(VaultError) as caught:
        await decrypt_with(key, VaultClientConfig(timeout=5), StaticVaultToken(ROOT))
    assert str(caught.value).startswith(
        "failed to decrypt sops data key from Vault transit backend 'sops/decrypt/k': "
        'Put "http://127.0.0.1:9/v1/sops/decrypt/k": ')


async def test_ambient_vault_token_then_home_file(vault: FakeVault, tmp_path: Path) -> None:
    assert parse_static(b"  \n") == Credentials()  # an empty Secret value counts as absent
    context = KeyServiceContext(environ={"VAULT_TOKEN": ROOT, "HOME": str(tmp_path)})
    assert await decrypt_data_key(vault_key(vault), context) == DATA_KEY
    assert vault.requests[-1].headers["X-Vault-Token"] == ROOT

    (tmp_path / ".vault-token").write_text(ROOT + "\n")
    assert await decrypt_data_key(vault_key(vault), KeyServiceContext(environ={"HOME": str(tmp_path)})) == DATA_KEY
    assert vault.requests[-1].headers["X-Vault-Token"] == ROOT

    with pytest.raises(VaultError, match=r"Code: 403"):
        await decrypt_data_key(vault_key(vault), KeyServiceContext(environ={"HOME": str(tmp_path / "absent")}))
    assert "X-Vault-Token" not in vault.requests[-1].headers


def test_client_config_from_env() -> None:
    config = VaultClientConfig.from_env({"VAULT_CLIENT_TIMEOUT": "7", "VAULT_TOKEN": " t \n", "HOME": "/h",
                                         "VAULT_ADDR": "http://elsewhere:8200"})
    assert (config.timeout, config.env_token, config.ssl) == (7.0, "t", True)
    assert config.token_file == Path("/h/.vault-token")
    assert VaultClientConfig.from_env({"VAULT_CLIENT_TIMEOUT": "1m30s", "HOME": "/h"}).timeout == 90.0
    assert VaultClientConfig.from_env({"HOME": "/h"}).timeout == 60.0


@pytest.mark.parametrize(("allowlist", "address", "error"), [
    ("all", "https://vault:8200", None),
    ("none", "https://vault:8200", "Allowlist does not allow https://vault:8200"),
    ("https://vault:8200", "https://vault:8200", None),
    ("https://vault:8200/", "https://vault:8200", None),
    ("https://other:8200, https://vault:8200", "https://vault:8200", None),
    ("https://vault:82", "https://vault:8200", "Allowlist does not allow https://vault:8200"),
    ("https://a,,https://b", "https://b", "SOPS_HC_VAULT_ALLOWLIST's entry 2 is empty"),
])
def test_allowlist(allowlist: str, address: str, error: str | None) -> None:
    if error is None:
        check_allowlist(allowlist, address)
    else:
        with pytest.raises(VaultError, match=f"^{error}$"):
            check_allowlist(allowlist, address)


async def test_allowlist_applies_to_decryption(vault: FakeVault) -> None:
    context = KeyServiceContext(credentials=parse_static(ROOT.encode()),
                                environ={"SOPS_HC_VAULT_ALLOWLIST": "https://trusted:8200"})
    with pytest.raises(VaultError, match=f"^Allowlist does not allow {vault.url}$"):
        await decrypt_data_key(vault_key(vault), context)
    assert vault.requests == []


# -- Kubernetes auth --------------------------------------------------------------------------


class ConfigMaps:
    def __init__(self, data: dict[str, str] | None) -> None:
        self.data = data
        self.reads = 0

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.reads += 1
        if self.data is None:
            raise NotFoundError(f'configmaps "{name}" not found', status=404, kind=kind, namespace=namespace, name=name)
        return {"data": self.data}

    async def request_json(self, method: str, path: str, *, params: Any = (), body: Any = None) -> Any:
        raise AssertionError("not used")


def login_config(vault: FakeVault, path: str = "auth/kubernetes/login") -> dict[str, str]:
    return {"config.yaml": f"instances:\n- address: {vault.url}\n  loginPath: {path}\n"}


def issuer(namespace: str = "apps", name: str = "decryptor") -> tuple[list[str], Any]:
    issued: list[str] = []

    async def issue(audience: str) -> str:
        issued.append(audience)
        return service_account_jwt(namespace, name, audience=audience, exp=time.time() + 3600)

    return issued, issue


def k8s_auth(configmaps: ConfigMaps, issue: Any) -> VaultKubernetesAuth:
    return VaultKubernetesAuth(config=VaultClientConfig(), client=configmaps,
                               configmap=("flux-system", "vault-config"), issue=issue)


async def test_kubernetes_auth_logs_in_once_per_address(vault: FakeVault) -> None:
    vault.add_role("auth/kubernetes/login", "apps_decryptor",
                   Role(service_account="apps:decryptor", audience=vault.url, policies=("sops/firstkey",)))
    configmaps = ConfigMaps(login_config(vault))
    issued, issue = issuer()
    auth = k8s_auth(configmaps, issue)
    context = KeyServiceContext(credentials=Credentials(vault=auth), environ={"VAULT_TOKEN": "env-token-not-used"})
    assert await decrypt_data_key(vault_key(vault), context) == DATA_KEY
    assert await decrypt_data_key(vault_key(vault), context) == DATA_KEY
    assert issued == [vault.url]  # audience = the Vault address; one login for the reconcile
    assert configmaps.reads == 1
    login = vault.requests[0]
    assert (login.method, login.path, login.body["role"]) == ("PUT", "/v1/auth/kubernetes/login", "apps_decryptor")
    assert login.body["jwt"].count(".") == 2
    assert "X-Vault-Token" not in login.headers
    decrypts = vault.requests[1:]
    assert [r.path for r in decrypts] == ["/v1/sops/decrypt/firstkey"] * 2
    assert decrypts[0].headers["X-Vault-Token"].startswith("hvs.")


async def test_kubernetes_auth_namespaced_login_path(vault: FakeVault) -> None:
    vault.add_role("ns1/ns2/auth/jwt/login", "apps_decryptor",
                   Role(service_account="apps:decryptor", audience=vault.url, policies=("sops/firstkey",)))
    _, issue = issuer()
    auth = k8s_auth(ConfigMaps(login_config(vault, "ns1/ns2/auth/jwt/login")), issue)
    assert str(await auth.vault_token(vault.url)).startswith("hvs.")
    assert vault.requests[0].path == "/v1/ns1/ns2/auth/jwt/login"


async def test_kubernetes_auth_errors(vault: FakeVault) -> None:
    _, issue = issuer()
    cm = "ConfigMap 'flux-system/vault-config'"
    with pytest.raises(VaultError, match=r"^failed to get Vault ConfigMap 'flux-system/vault-config': "
                                         'configmaps "vault-config" not found$'):
        await k8s_auth(ConfigMaps(None), issue).vault_token(vault.url)
    with pytest.raises(VaultError, match=f"^Vault {cm} is missing the 'config.yaml' key$"):
        await k8s_auth(ConfigMaps({"other": ""}), issue).vault_token(vault.url)
    with pytest.raises(VaultError, match=f"^failed to parse 'config.yaml' in Vault {cm}: "):
        await k8s_auth(ConfigMaps({"config.yaml": "instances: ["}), issue).vault_token(vault.url)
    # the ConfigMap is the allow-list: an exact address match, no fall-back to VAULT_TOKEN
    auth = k8s_auth(ConfigMaps(login_config(vault)), issue)
    context = KeyServiceContext(credentials=Credentials(vault=auth), environ={"VAULT_TOKEN": ROOT})
    with pytest.raises(VaultError, match=f"^no Vault login path configured for address '{vault.url}/' in {cm}$"):
        await decrypt_data_key(vault_key(vault, address=vault.url + "/"), context)
    # no role for this ServiceAccount
    with pytest.raises(VaultError) as caught:
        await auth.vault_token(vault.url)
    assert str(caught.value) == (
        f"failed to authenticate with Vault '{vault.url}' at login path 'auth/kubernetes/login' as role "
        f"'apps_decryptor': Error making API request.\n\nURL: PUT {vault.url}/v1/auth/kubernetes/login\n"
        "Code: 404. Errors:\n\n* no handler for route \"auth/kubernetes/login\". route entry not found.")
    assert "eyJ" not in str(caught.value)  # the JWT is never shown


async def test_kubernetes_auth_token_and_role_errors(vault: FakeVault) -> None:
    async def failing(audience: str) -> str:
        raise IdentityError("failed to get service account 'apps/decryptor': serviceaccounts \"decryptor\" not found")

    auth = k8s_auth(ConfigMaps(login_config(vault)), failing)
    with pytest.raises(VaultError, match=r"^failed to issue Kubernetes token for Vault authentication: failed to get "
                                         "service account 'apps/decryptor': serviceaccounts \"decryptor\" not found$"):
        await auth.vault_token(vault.url)

    async def opaque(audience: str) -> str:
        return "opaque-token"

    auth = k8s_auth(ConfigMaps(login_config(vault)), opaque)
    with pytest.raises(VaultError, match=r"^failed to derive Vault role for authentication: not a JWT$"):
        await auth.vault_token(vault.url)

    vault.add_role("auth/kubernetes/login", "apps_decryptor",
                   Role(service_account="apps:other", audience=vault.url, policies=()))
    _, issue = issuer()
    auth = k8s_auth(ConfigMaps(login_config(vault)), issue)
    denied = r"(?s)as role 'apps_decryptor': .*Code: 403\. Errors:\n\n\* permission denied$"
    with pytest.raises(VaultError, match=denied):
        await auth.vault_token(vault.url)


def test_parse_login_paths() -> None:
    text = "Instances:\n- Address: https://a:8200\n  LOGINPATH: auth/k8s/login\n- address: https://b\n"
    assert parse_login_paths(text) == {"https://a:8200": "auth/k8s/login", "https://b": ""}
    assert parse_login_paths("") == {}
    with pytest.raises(ValueError):
        parse_login_paths("instances: 3")


async def test_http_proxy_from_the_environment(vault: FakeVault) -> None:
    # the loopback Vault stands in for a forward proxy: it receives the absolute-form request
    address = "http://vault.internal.test:8200"
    key = vault_key(vault, address=address)
    context = KeyServiceContext(credentials=parse_static(ROOT.encode()),
                                environ={"HTTP_PROXY": vault.url, "NO_PROXY": "example.com"})
    assert await decrypt_data_key(key, context) == DATA_KEY
    assert vault.requests[-1].headers["Host"] == "vault.internal.test:8200"


async def test_controller_level_kubernetes_auth_through_workload_identity(vault: FakeVault, tmp_path: Path) -> None:
    """No ServiceAccount chosen: the controller's own ServiceAccount (its token file's subject) asks
    for a token with the Vault address as audience and logs in as <ns>_<name>."""
    from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity, WorkloadIdentityOptions

    from .test_identity import FakeApi

    token_file = tmp_path / "token"
    token_file.write_text(service_account_jwt("flux-system", "kustomize-controller", audience="k8s", exp=2e9))
    vault.add_role("auth/kubernetes/login", "flux-system_kustomize-controller",
                   Role(service_account="flux-system:kustomize-controller", audience=vault.url,
                        policies=("sops/firstkey",)))
    api = FakeApi(configmaps={("flux-system", "vault-config"): login_config(vault)})
    identity = WorkloadIdentity(client=api, cache=None, options=WorkloadIdentityOptions(
        vault_configmap=("flux-system", "vault-config"), controller_token_file=token_file))
    credentials = identity.credentials(name="app", namespace="apps")
    context = KeyServiceContext(credentials=credentials, environ={"VAULT_TOKEN": "not-used"})
    assert await decrypt_data_key(vault_key(vault), context) == DATA_KEY
    assert api.token_requests == [("flux-system/kustomize-controller", [vault.url])]
    assert vault.requests[0].body["role"] == "flux-system_kustomize-controller"


def test_no_token_or_proxy_password_in_the_repr_of_the_client_config(tmp_path: Path) -> None:
    config = VaultClientConfig.from_env(
        {"VAULT_TOKEN": "hvs.ENVTOKEN", "HTTPS_PROXY": "http://user:PR0XYPASS@proxy:3128"}, home=tmp_path)
    assert config.env_token == "hvs.ENVTOKEN"
    assert "ENVTOKEN" not in repr(config) and "PR0XYPASS" not in repr(config)
    assert "ROOTTOKEN" not in repr(StaticVaultToken("ROOTTOKEN"))


async def test_an_answer_that_echoes_the_request_carries_no_token_or_jwt_into_an_error() -> None:
    from aiohttp import web

    from kustomize_controller.kustomize.sops.keys.hcvault import VaultRequestError, vault_write

    async def echo(request: web.Request) -> web.Response:
        echoed = f"{await request.text()} {request.headers.get('X-Vault-Token', '')}"
        return web.json_response({"errors": [echoed]}, status=400)

    async with _put_server(echo) as url:
        with pytest.raises(VaultRequestError) as login:
            await vault_write(VaultClientConfig(), address=url, path="auth/k8s/login",
                              body={"role": "r", "jwt": "eyJ.KUBEJWT.sig"}, token="")
        with pytest.raises(VaultRequestError) as decrypt:
            await vault_write(VaultClientConfig(), address=url, path="sops/decrypt/k",
                              body={"ciphertext": "vault:v1:x"}, token="hvs.S3CRETTOKEN")
    shown = f"{login.value}\n{decrypt.value}"
    assert "[redacted]" in str(login.value) and "[redacted]" in str(decrypt.value)
    assert "KUBEJWT" not in shown and "S3CRETTOKEN" not in shown and "vault:v1:x" in shown


@pytest.mark.parametrize("status", [200, 403])
async def test_an_oversized_answer_is_a_clear_error_without_its_content(status: int) -> None:
    """Vault's answer is read at most to the key services' 1 MiB cap, like every other key service's; the
    error names the request only: neither the answer (a data key, an echoed token) nor the token shows."""
    from aiohttp import web

    from kustomize_controller.kustomize.sops.keys.hcvault import VaultRequestError, vault_write

    plaintext = base64.b64encode(DATA_KEY).decode()

    async def runaway(request: web.Request) -> web.StreamResponse:
        echoed = request.headers.get("X-Vault-Token", "")
        payload = (f'{{"data": {{"plaintext": "{plaintext}"}}, "echo": "{echoed}", "pad": "' + "x" * (2 << 20) + '"}')
        return web.Response(body=payload.encode(), status=status, content_type="application/json")

    async with _put_server(runaway) as url:
        with pytest.raises(VaultRequestError) as caught:
            await vault_write(VaultClientConfig(), address=url, path="sops/decrypt/k",
                              body={"ciphertext": "vault:v1:x"}, token="hvs.S3CRETTOKEN")
        with pytest.raises(VaultError) as decrypting:
            await decrypt_with(vault_key_at(url), VaultClientConfig(), StaticVaultToken("hvs.S3CRETTOKEN"))
    assert str(caught.value) == f'Put "{url}/v1/sops/decrypt/k": the answer is larger than 1048576 bytes'
    assert str(decrypting.value) == (
        "failed to decrypt sops data key from Vault transit backend 'sops/decrypt/firstkey': "
        f'Put "{url}/v1/sops/decrypt/firstkey": the answer is larger than 1048576 bytes'
    )
    for shown in (str(caught.value), str(decrypting.value)):
        assert "S3CRETTOKEN" not in shown and plaintext not in shown and "xxxx" not in shown


def vault_key_at(address: str) -> MasterKey:
    return MasterKey("hc_vault", address, "vault:v1:x",
                     {"engine_path": "sops", "key_name": "firstkey", "created_at": "2024-01-01T00:00:00Z"})


@contextlib.asynccontextmanager
async def _put_server(handler: Callable[[Any], Awaitable[Any]]) -> AsyncIterator[str]:
    """A loopback server answering every PUT with ``handler``; yields its URL."""
    from aiohttp import web

    from tests.loopback import serve

    app = web.Application()
    app.router.add_put("/{tail:.*}", handler)
    runner, url = await serve(app)
    try:
        yield url
    finally:
        await runner.cleanup()
