"""GCP Cloud KMS master keys against a loopback Google (fake_google.py): every credential form of
``sops.gcp-kms``, the controller's ADC, errors as upstream words them, nothing secret in them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import yaml

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys import gcpkms

from .aws_moto import PLAIN, recipe
from .fake_google import CLIENT_SECRET, KEY, REFRESH_TOKEN, SA_EMAIL, FakeGoogle
from .sopsgen import encrypt_document, flat

NO_AMBIENT = {"HOME": "/nonexistent", "GCE_METADATA_HOST": "127.0.0.1:9"}


def document(google: FakeGoogle, name: str = KEY) -> bytes:
    data_key = os.urandom(32)
    entry = {"resource_id": name, "created_at": "2024-11-12T13:33:42Z", "enc": google.encrypt(name, data_key)}
    return encrypt_document(PLAIN, "yaml", recipe(extra_key_entries={"gcp_kms": [entry]}), key=data_key)


async def decrypt(google: FakeGoogle, doc: bytes, *, secret: dict[str, bytes] | None = None, **env: str) -> dict:
    environ = {**NO_AMBIENT, "SOPS_GCP_KMS_ENDPOINT": google.url, **env}
    with SopsDecryptor.from_secret_data(secret or {}, environ=environ, loop=asyncio.get_running_loop()) as dec:
        out = await asyncio.to_thread(dec._decrypt_file, doc, Format.YAML)
    return yaml.safe_load(out)


def _decrypt_calls(google: FakeGoogle) -> list[dict]:
    return [r for r in google.requests if r["path"].endswith(":decrypt")]


async def test_service_account_key(fake_google: FakeGoogle) -> None:
    out = await decrypt(fake_google, document(fake_google), secret={"sops.gcp-kms": fake_google.service_account_json()})
    assert out["stringData"] == {"key": "kms-value"}
    (call,) = _decrypt_calls(fake_google)
    assert call["path"] == f"/v1/{KEY}:decrypt" and call["auth"].startswith("Bearer sa-")


async def test_authorized_user(fake_google: FakeGoogle) -> None:
    secret = {"sops.gcp-kms": b"\n" + fake_google.authorized_user_json() + b"\n"}
    assert (await decrypt(fake_google, document(fake_google), secret=secret))["stringData"]["key"] == "kms-value"
    assert _decrypt_calls(fake_google)[0]["auth"].startswith("Bearer user-")


async def test_external_account_with_impersonation(fake_google: FakeGoogle, tmp_path: Path) -> None:
    subject = tmp_path / "token"
    subject.write_text(json.dumps({"id_token": "external-subject-token"}))
    config = {
        "type": "external_account",
        "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": f"{fake_google.url}/token",
        "credential_source": {"file": str(subject), "format": {"type": "json", "subject_token_field_name": "id_token"}},
        "service_account_impersonation_url": (
            f"{fake_google.url}/v1/projects/-/serviceAccounts/{SA_EMAIL}:generateAccessToken"
        ),
    }
    secret = {"sops.gcp-kms": json.dumps(config).encode()}
    assert (await decrypt(fake_google, document(fake_google), secret=secret))["stringData"]["key"] == "kms-value"
    assert _decrypt_calls(fake_google)[0]["auth"].startswith("Bearer impersonated-")
    (exchange,) = [r for r in fake_google.requests if r["path"] == "/token"]
    assert exchange["form"]["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"


async def test_external_account_authorized_user(fake_google: FakeGoogle) -> None:
    config = {
        "type": "external_account_authorized_user",
        "audience": "//iam.googleapis.com/locations/global/workforcePools/p/providers/k",
        "client_id": "cid",
        "client_secret": CLIENT_SECRET,
        "refresh_token": REFRESH_TOKEN,
        "token_url": f"{fake_google.url}/token",
    }
    secret = {"sops.gcp-kms": json.dumps(config).encode()}
    assert (await decrypt(fake_google, document(fake_google), secret=secret))["stringData"]["key"] == "kms-value"
    (request,) = [r for r in fake_google.requests if r["path"] == "/token"]
    assert request["form"]["_basic_auth"] == "yes" and request["form"]["grant_type"] == "refresh_token"


async def test_impersonated_service_account(fake_google: FakeGoogle) -> None:
    config = {
        "type": "impersonated_service_account",
        "service_account_impersonation_url": (
            f"{fake_google.url}/v1/projects/-/serviceAccounts/{SA_EMAIL}:generateAccessToken"
        ),
        "source_credentials": json.loads(fake_google.authorized_user_json()),
    }
    secret = {"sops.gcp-kms": json.dumps(config).encode()}
    assert (await decrypt(fake_google, document(fake_google), secret=secret))["stringData"]["key"] == "kms-value"


async def test_controller_application_credentials_file(fake_google: FakeGoogle, tmp_path: Path) -> None:
    path = tmp_path / "sa.json"
    path.write_bytes(fake_google.service_account_json())
    out = await decrypt(fake_google, document(fake_google), GOOGLE_APPLICATION_CREDENTIALS=str(path))
    assert out["stringData"]["key"] == "kms-value"


async def test_controller_metadata_server(fake_google: FakeGoogle) -> None:
    out = await decrypt(fake_google, document(fake_google), GCE_METADATA_HOST=fake_google.url.removeprefix("http://"))
    assert out["stringData"]["key"] == "kms-value"
    assert _decrypt_calls(fake_google)[0]["auth"].startswith("Bearer gce-")


async def test_permission_denied_as_upstream_and_no_secret_leaks(fake_google: FakeGoogle) -> None:
    fake_google.allowed = {"nobody"}
    for secret in (fake_google.service_account_json(), fake_google.authorized_user_json()):
        with pytest.raises(SopsKeyError) as info:
            await decrypt(fake_google, document(fake_google), secret={"sops.gcp-kms": secret})
        message = flat(str(info.value))
        assert (
            f"failed to decrypt sops data key with GCP KMS key: rpc error: code = PermissionDenied desc = "
            f"Permission 'cloudkms.cryptoKeyVersions.useToDecrypt' denied on resource '{KEY}'"
        ) in message
        for secret_part in (REFRESH_TOKEN, CLIENT_SECRET, "PRIVATE KEY", "Bearer"):
            assert secret_part not in str(info.value)


async def test_rejected_credentials_say_so_without_the_secret(fake_google: FakeGoogle) -> None:
    config = json.loads(fake_google.authorized_user_json())
    config["refresh_token"] = "1//WRONG-refresh-token"
    with pytest.raises(SopsKeyError) as info:
        await decrypt(fake_google, document(fake_google), secret={"sops.gcp-kms": json.dumps(config).encode()})
    message = flat(str(info.value))
    assert "rpc error: code = Unauthenticated desc = token request to" in message
    assert "answered 400: invalid_grant: Bad Request" in message
    assert "WRONG-refresh-token" not in message and CLIENT_SECRET not in message


async def test_no_controller_credentials(fake_google: FakeGoogle) -> None:
    with pytest.raises(SopsKeyError) as info:
        await decrypt(fake_google, document(fake_google))
    assert (
        "rpc error: code = Unauthenticated desc = failed to create provider access token for the controller: "
        "GET http://127.0.0.1:9/computeMetadata/v1/instance/service-accounts/default/token: cannot connect"
    ) in flat(str(info.value))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"{not json", "invalid credentials JSON at line 1 column 2"),
        (b'{"type": "nope"}', 'unknown credential type: "nope"'),
        (b'{"type": "gdch_service_account"}', "not supported: credential type 'gdch_service_account'"),
        (b'{"type": "external_account_authorized_user"}', "need 'refresh_token' and 'token_url'"),
        (b'{"type": "external_account", "credential_source": {"environment_id": "aws1"}}', "not supported"),
    ],
)
def test_unusable_credentials_fail_at_import(value: bytes, message: str) -> None:
    with pytest.raises(SopsFormatError) as info:
        SopsDecryptor.from_secret_data({"sops.gcp-kms": value}, secret_label="sops decryption Secret 'ns/keys'")
    assert str(info.value).startswith("failed to import 'sops.gcp-kms' data from sops decryption Secret 'ns/keys': ")
    assert message in str(info.value)


async def test_invalid_resource_id() -> None:
    from kustomize_controller.kustomize.sops.keys.credentials import KeyServiceContext
    from kustomize_controller.kustomize.sops.metadata import MasterKey

    with pytest.raises(SopsKeyError, match='no valid resource ID found in "projects/p/keys/k"'):
        await gcpkms.decrypt_data_key(MasterKey("gcp_kms", "projects/p/keys/k", "AQID"), KeyServiceContext())


def test_endpoints() -> None:
    assert gcpkms.endpoint({}) == "https://cloudkms.googleapis.com"
    assert gcpkms.endpoint({"SOPS_GCP_KMS_ENDPOINT": "kms.internal:443"}) == "https://kms.internal:443"
    assert gcpkms.endpoint({"SOPS_GCP_KMS_ENDPOINT": "http://127.0.0.1:1/"}) == "http://127.0.0.1:1"
    assert gcpkms.endpoint({"SOPS_GCP_KMS_UNIVERSE_DOMAIN": "example.com"}) == "https://cloudkms.example.com"
    assert gcpkms.grpc_code("PERMISSION_DENIED") == "PermissionDenied"


async def test_one_token_per_reconcile_for_many_data_keys(fake_google: FakeGoogle) -> None:
    docs = [document(fake_google), document(fake_google)]
    secret = {"sops.gcp-kms": fake_google.service_account_json()}
    environ = {**NO_AMBIENT, "SOPS_GCP_KMS_ENDPOINT": fake_google.url}
    with SopsDecryptor.from_secret_data(secret, environ=environ, loop=asyncio.get_running_loop()) as dec:
        for doc in docs:
            await asyncio.to_thread(dec._decrypt_file, doc, Format.YAML)
    assert len(_decrypt_calls(fake_google)) == 2
    assert len([r for r in fake_google.requests if r["path"] == "/token"]) == 1
