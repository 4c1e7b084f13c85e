"""Azure Key Vault master keys against a loopback Azure (fake_azure.py): every ``sops.azure-kv``
form, the controller's chain (environment, workload identity, managed identity), the bearer
challenge, errors as upstream words them and nothing secret in them."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys import azkv

from .aws_moto import PLAIN, recipe
from .fake_azure import CLIENT_ID, CLIENT_SECRET, FEDERATED_TOKEN, TENANT, FakeAzure
from .sopsgen import encrypt_document, flat

NO_AMBIENT = {"HOME": "/nonexistent", "AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:9"}


def document(azure: FakeAzure, name: str = "sops") -> bytes:
    data_key = os.urandom(32)
    return encrypt_document(
        PLAIN, "yaml", recipe(extra_key_entries={"azure_kv": [azure.entry(data_key, name)]}), key=data_key
    )


async def decrypt(doc: bytes, *, secret: dict[str, bytes] | None = None, **env: str) -> dict:
    environ = {**NO_AMBIENT, **env}
    with SopsDecryptor.from_secret_data(secret or {}, environ=environ, loop=asyncio.get_running_loop()) as dec:
        return yaml.safe_load(await asyncio.to_thread(dec._decrypt_file, doc, Format.YAML))


def secret_json(azure: FakeAzure, **fields: object) -> dict[str, bytes]:
    return {"sops.azure-kv": json.dumps({"authorityHost": azure.url, **fields}).encode()}


async def test_client_secret(fake_azure: FakeAzure) -> None:
    secret = secret_json(fake_azure, tenantId=TENANT, clientId=CLIENT_ID, clientSecret=CLIENT_SECRET)
    assert (await decrypt(document(fake_azure), secret=secret))["stringData"]["key"] == "kms-value"
    challenge, token, call = fake_azure.requests
    assert challenge["auth"] == "" and token["form"]["scope"] == "https://127.0.0.1/.default"
    assert call["auth"].startswith("Bearer secret-") and call["query"]["api-version"] == "7.5"


async def test_az_cli_output_in_yaml_utf16(fake_azure: FakeAzure) -> None:
    text = f"appId: {CLIENT_ID}\ndisplayName: x\npassword: {CLIENT_SECRET}\ntenant: {TENANT}\n"
    text += f"authorityHost: {fake_azure.url}\n"
    secret = {"sops.azure-kv": text.encode("utf-16")}  # with a BOM
    assert (await decrypt(document(fake_azure), secret=secret))["stringData"]["key"] == "kms-value"


@pytest.mark.parametrize("form", ["pem", "pkcs12"])
async def test_client_certificate(fake_azure: FakeAzure, form: str) -> None:
    if form == "pem":
        data = fake_azure.certificate_pem()
    else:
        key, cert = fake_azure.client_cert
        data = base64.b64encode(
            pkcs12.serialize_key_and_certificates(
                b"sops", key, cert, None, serialization.BestAvailableEncryption(b"pw")
            )
        ).decode()
    secret = secret_json(
        fake_azure, tenantId=TENANT, clientId=CLIENT_ID, clientCertificate=data, clientCertificatePassword="pw"
    )
    assert (await decrypt(document(fake_azure), secret=secret))["stringData"]["key"] == "kms-value"
    assert fake_azure.requests[-1]["auth"].startswith("Bearer cert-")


async def test_client_id_alone_is_managed_identity(fake_azure: FakeAzure) -> None:
    secret = {"sops.azure-kv": f"clientId: {CLIENT_ID}\n".encode()}
    out = await decrypt(document(fake_azure), secret=secret, AZURE_POD_IDENTITY_AUTHORITY_HOST=fake_azure.url)
    assert out["stringData"]["key"] == "kms-value"
    (imds,) = [r for r in fake_azure.requests if r["path"].startswith("/metadata")]
    assert imds["query"]["client_id"] == CLIENT_ID


async def test_controller_workload_identity(fake_azure: FakeAzure, tmp_path: Path) -> None:
    token = tmp_path / "azure-identity-token"
    token.write_text(FEDERATED_TOKEN)
    env = {
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_TENANT_ID": TENANT,
        "AZURE_FEDERATED_TOKEN_FILE": str(token),
        "AZURE_AUTHORITY_HOST": fake_azure.url + "/",
    }
    assert (await decrypt(document(fake_azure), **env))["stringData"]["key"] == "kms-value"
    assert fake_azure.requests[-1]["auth"].startswith("Bearer federated-")


async def test_controller_environment_secret(fake_azure: FakeAzure) -> None:
    env = {
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
        "AZURE_AUTHORITY_HOST": fake_azure.url,
    }
    assert (await decrypt(document(fake_azure), **env))["stringData"]["key"] == "kms-value"


async def test_controller_managed_identity(fake_azure: FakeAzure) -> None:
    out = await decrypt(document(fake_azure), AZURE_POD_IDENTITY_AUTHORITY_HOST=fake_azure.url)
    assert out["stringData"]["key"] == "kms-value"


async def test_forbidden_as_upstream_without_secrets(fake_azure: FakeAzure) -> None:
    fake_azure.forbidden = True
    secret = secret_json(fake_azure, tenantId=TENANT, clientId=CLIENT_ID, clientSecret=CLIENT_SECRET)
    with pytest.raises(SopsKeyError) as info:
        await decrypt(document(fake_azure), secret=secret)
    message = str(info.value)
    key = f"{fake_azure.url}/keys/sops/0123456789abcdef"
    assert f"failed to decrypt sops data key with Azure Key Vault key '{key}':" in flat(message)
    assert "RESPONSE 403" in message and "ERROR CODE: Forbidden" in message and "ForbiddenByRbac" in message
    assert CLIENT_SECRET not in message and "Bearer" not in message


async def test_wrong_client_secret(fake_azure: FakeAzure) -> None:
    secret = secret_json(fake_azure, tenantId=TENANT, clientId=CLIENT_ID, clientSecret="WRONG-secret-value")
    with pytest.raises(SopsKeyError) as info:
        await decrypt(document(fake_azure), secret=secret)
    assert "answered 400: invalid_client: AADSTS7000215: Invalid client secret provided." in flat(str(info.value))
    assert "WRONG-secret-value" not in str(info.value)


async def test_bearer_never_sent_over_plain_http_to_a_remote_host() -> None:
    from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
    from kustomize_controller.kustomize.sops.metadata import MasterKey

    key = MasterKey("azure_kv", "http://vault.example.com", "AQID", {"name": "k", "version": "1"})
    with pytest.raises(SopsKeyError, match="not permitted for non-TLS protected"):
        await azkv.decrypt_data_key(key, KeyServiceContext())


def test_challenge_resource_must_match_the_vault() -> None:
    vault = "https://myvault.vault.azure.net"
    assert azkv.challenge_scope('Bearer authorization="x", resource="https://vault.azure.net"', vault) == (
        "https://vault.azure.net/.default"
    )
    with pytest.raises(SopsKeyError, match=r"challenge resource 'evil\.example' doesn't match"):
        azkv.challenge_scope('Bearer authorization="x", resource="https://evil.example"', vault)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"tenantId: t\n", "invalid data: requires a 'clientId' field"),
        (b"[1, 2", "failed to unmarshal Azure authentication file"),
        (b"\xff\xfe\x00\xd8", "failed to decode Azure authentication file bytes"),
    ],
)
def test_unusable_secret_fails_at_import(value: bytes, message: str) -> None:
    with pytest.raises(SopsFormatError) as info:
        SopsDecryptor.from_secret_data({"sops.azure-kv": value}, secret_label="sops decryption Secret 'ns/keys'")
    assert str(info.value).startswith("failed to import 'sops.azure-kv' data from sops decryption Secret 'ns/keys': ")
    assert message in str(info.value)


async def test_bad_enc() -> None:
    from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
    from kustomize_controller.kustomize.sops.metadata import MasterKey

    key = MasterKey("azure_kv", "https://v.vault.azure.net", "AQ==", {"name": "k", "version": "1"})
    with pytest.raises(SopsKeyError, match="failed to base64 decode Azure Key Vault encrypted key"):
        await azkv.decrypt_data_key(key, KeyServiceContext())


async def test_controller_environment_certificate_file_pkcs12(fake_azure: FakeAzure, tmp_path: Path) -> None:
    key, cert = fake_azure.client_cert
    pfx = tmp_path / "client.pfx"
    pfx.write_bytes(
        pkcs12.serialize_key_and_certificates(b"sops", key, cert, None, serialization.BestAvailableEncryption(b"pw"))
    )
    env = {
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_CERTIFICATE_PATH": str(pfx),
        "AZURE_CLIENT_CERTIFICATE_PASSWORD": "pw",
        "AZURE_AUTHORITY_HOST": fake_azure.url,
    }
    assert (await decrypt(document(fake_azure), **env))["stringData"]["key"] == "kms-value"
    assert fake_azure.requests[-1]["auth"].startswith("Bearer cert-")
