"""AWS KMS master keys against moto (KMS + STS wire protocol) on loopback, and the pieces that
need no server: SigV4, ARN regions, endpoint resolution, ``sops.aws-kms`` parsing."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsError, SopsFormatError, SopsKeyError
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys import aws_credentials, aws_sts, awskms
from kustomize_controller.kustomize.sops.keys.aws_sigv4 import sign
from kustomize_controller.kustomize.sops.keys.credentials import AwsCredentials, KeyServiceContext

from .aws_moto import PLAIN, REGION, STATIC_SECRET, STATIC_SECRET_YAML, Moto
from .sopsgen import AgeKey, Recipe, encrypt_document, flat

NO_AMBIENT = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "HOME": "/nonexistent",
}


def decrypt(doc: bytes, *, secret: dict[str, bytes] | None = None, environ: dict[str, str]) -> dict:
    with SopsDecryptor.from_secret_data(secret or {}, environ={**NO_AMBIENT, **environ}) as dec:
        return yaml.safe_load(dec._decrypt_file(doc, Format.YAML))


@pytest.fixture
def sts_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records the STS operations the key service makes (moto answers them without checks)."""
    calls: list[str] = []
    real_call = aws_credentials.http.call

    async def spy(method: str, url: str, **kwargs: object) -> object:
        body = kwargs.get("body") or b""
        assert isinstance(body, bytes)
        for action in (b"Action=AssumeRoleWithWebIdentity", b"Action=AssumeRole&"):
            if action in body:
                calls.append(action.decode().split("=")[1].rstrip("&"))
        return await real_call(method, url, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(aws_credentials.http, "call", spy)
    yield calls


# -- against moto ---------------------------------------------------------------------------------


def test_static_credentials_with_encryption_context(moto_server: Moto) -> None:
    arn = moto_server.create_key()
    doc = moto_server.document(arn, context={"app": "flux", "env": "prod"})
    out = decrypt(doc, secret={"sops.aws-kms": STATIC_SECRET_YAML}, environ={"AWS_ENDPOINT_URL": moto_server.url})
    assert out["stringData"] == {"key": "kms-value"}


def test_wrong_encryption_context_fails_as_upstream_and_leaks_nothing(moto_server: Moto) -> None:
    arn = moto_server.create_key()
    doc = moto_server.document(arn, context={"app": "flux"})
    doc = doc.replace(b"app: flux", b"app: other")
    with pytest.raises(SopsKeyError) as info:
        decrypt(doc, secret={"sops.aws-kms": STATIC_SECRET_YAML}, environ={"AWS_ENDPOINT_URL_KMS": moto_server.url})
    message = str(info.value)
    assert f"\n  {arn}|app:other: FAILED\n" in message
    assert (
        "failed to decrypt sops data key with AWS KMS: operation error KMS: Decrypt, https response error "
        "StatusCode: 400, RequestID: "
    ) in flat(message)
    assert "InvalidCiphertextException" in message
    assert STATIC_SECRET not in message and STATIC_SECRET[:12] not in flat(message).replace(" ", "")


def test_wrong_key_is_access_denied(moto_server: Moto) -> None:
    arn, other = moto_server.create_key(), moto_server.create_key()
    doc = moto_server.document(arn).replace(arn.encode(), other.encode())
    with pytest.raises(SopsKeyError) as info:
        decrypt(doc, secret={"sops.aws-kms": STATIC_SECRET_YAML}, environ={"AWS_ENDPOINT_URL": moto_server.url})
    assert "api error AccessDeniedException" in flat(str(info.value))


def test_role_is_assumed_with_the_static_credentials(moto_server: Moto, sts_calls: list[str]) -> None:
    arn = moto_server.create_key()
    doc = moto_server.document(arn, role="arn:aws:iam::123456789012:role/sops")
    out = decrypt(doc, secret={"sops.aws-kms": STATIC_SECRET_YAML}, environ={"AWS_ENDPOINT_URL": moto_server.url})
    assert out["stringData"] == {"key": "kms-value"}
    assert sts_calls == ["AssumeRole"]


def test_controller_web_identity(moto_server: Moto, sts_calls: list[str], tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.SIGNATURE\n")
    arn = moto_server.create_key()
    environ = {
        "AWS_ENDPOINT_URL_KMS": moto_server.url,
        "AWS_ENDPOINT_URL_STS": moto_server.url,
        "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/irsa",
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token),
    }
    assert decrypt(moto_server.document(arn), environ=environ)["stringData"] == {"key": "kms-value"}
    assert sts_calls == ["AssumeRoleWithWebIdentity"]


def test_controller_environment_keys(moto_server: Moto, sts_calls: list[str]) -> None:
    arn = moto_server.create_key()
    environ = {"AWS_ENDPOINT_URL": moto_server.url, "AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env"}
    assert decrypt(moto_server.document(arn), environ=environ)["stringData"] == {"key": "kms-value"}
    assert sts_calls == []


def test_shared_credentials_file_profile(moto_server: Moto, tmp_path: Path) -> None:
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = AKIAFILE\naws_secret_access_key = file\n")
    arn = moto_server.create_key()
    environ = {"AWS_ENDPOINT_URL": moto_server.url, "AWS_SHARED_CREDENTIALS_FILE": str(creds)}
    assert decrypt(moto_server.document(arn), environ=environ)["stringData"] == {"key": "kms-value"}


def test_no_controller_credentials_is_a_clear_error(moto_server: Moto) -> None:
    arn = moto_server.create_key()
    with pytest.raises(SopsKeyError) as info:
        decrypt(moto_server.document(arn), environ={"AWS_ENDPOINT_URL": moto_server.url})
    assert "failed to create provider access token for the controller: no AWS credentials found" in flat(
        str(info.value)
    )


def test_empty_static_credentials_fail_at_use(moto_server: Moto) -> None:
    arn = moto_server.create_key()
    with pytest.raises(SopsKeyError) as info:
        decrypt(
            moto_server.document(arn),
            secret={"sops.aws-kms": b"foo: bar\n"},
            environ={"AWS_ENDPOINT_URL": moto_server.url},
        )
    assert "static credentials are empty" in flat(str(info.value))


def test_age_and_kms_in_one_file_and_key_groups_with_threshold(moto_server: Moto) -> None:
    import os

    arn = moto_server.create_key()
    age = AgeKey.generate()
    data_key = os.urandom(32)
    entry = moto_server.kms_entry(arn, data_key, {"env": "prod"})
    doc = encrypt_document(
        PLAIN, "yaml", Recipe(age_recipients=[age.recipient], extra_key_entries={"kms": [entry]}), key=data_key
    )
    environ = {"AWS_ENDPOINT_URL": moto_server.url}
    # age alone (no AWS credentials at all), then KMS alone
    assert decrypt(doc, secret={"a.agekey": age.identity.encode()}, environ=environ)["stringData"]["key"] == "kms-value"
    assert (
        decrypt(doc, secret={"sops.aws-kms": STATIC_SECRET_YAML}, environ=environ)["stringData"]["key"] == "kms-value"
    )

    # two groups (age | kms), threshold 2: both are needed, and both are attempted
    parts = _split(data_key)
    kms_part = moto_server.kms_entry(arn, parts[1])
    import pyrage

    from .sopsgen import armor

    age_part = {
        "recipient": age.recipient,
        "enc": armor(pyrage.encrypt(parts[0], [pyrage.x25519.Recipient.from_str(age.recipient)])),
    }
    grouped = encrypt_document(
        PLAIN,
        "yaml",
        Recipe(key_groups=[{"age": [age_part]}, {"kms": [kms_part]}], shamir_threshold=2),
        key=data_key,
    )
    both = {"a.agekey": age.identity.encode(), "sops.aws-kms": STATIC_SECRET_YAML}
    assert decrypt(grouped, secret=both, environ=environ)["stringData"]["key"] == "kms-value"
    with pytest.raises(SopsKeyError) as info:
        decrypt(grouped, secret={"a.agekey": age.identity.encode()}, environ=environ)
    message = str(info.value)
    assert "Group 0: SUCCESS" in message and "Group 1: FAILED" in message
    assert "Shamir threshold of\n2, but only 1 part(s)" in message


def _split(secret: bytes) -> list[bytes]:
    """Two Shamir shares (threshold 2) of ``secret``, in sops' layout (y bytes + x)."""
    import os

    from kustomize_controller.kustomize.sops.keys.shamir import _mult

    coefficients = os.urandom(len(secret))
    shares = []
    for x in (1, 2):
        ys = bytes(s ^ _mult(c, x) for s, c in zip(secret, coefficients, strict=True))
        shares.append(ys + bytes([x]))
    return shares


async def test_kms_that_does_not_answer_fails_the_build_not_the_worker() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections, never answers
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    doc = encrypt_document(
        PLAIN,
        "yaml",
        Recipe(extra_key_entries={"kms": [{"arn": f"arn:aws:kms:{REGION}:123456789012:key/x", "enc": "AQID"}]}),
    )
    try:
        with SopsDecryptor.from_secret_data(
            {"sops.aws-kms": STATIC_SECRET_YAML},
            environ={**NO_AMBIENT, "AWS_ENDPOINT_URL": url},
            loop=asyncio.get_running_loop(),
        ) as dec:
            services = dec._keyring._services
            services.context = KeyServiceContext(
                credentials=services.context.credentials, environ=services.context.environ, timeout=0.2, deadline=5.0
            )
            with pytest.raises(SopsError) as info:
                await asyncio.to_thread(dec.decrypt_object, yaml.safe_load(doc))
    finally:
        listener.close()
    assert "POST http://127.0.0.1" in flat(str(info.value)) and "no answer within 0.2s" in flat(str(info.value))


# -- without a server -------------------------------------------------------------------------------


def test_sigv4_matches_the_aws_test_suite_vector() -> None:
    headers = sign(
        method="GET",
        url="https://example.amazonaws.com/",
        headers={},
        body=b"",
        credentials=AwsCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        region="us-east-1",
        service="service",
        now=datetime(2015, 8, 30, 12, 36, tzinfo=UTC),
    )
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


def test_sigv4_agrees_with_botocore() -> None:
    botocore = pytest.importorskip("botocore.auth")
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    body = b'{"KeyId": "k"}'
    base = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "TrentService.Decrypt"}
    request = AWSRequest(method="POST", url="http://127.0.0.1:5000/", data=body, headers=dict(base))
    botocore.SigV4Auth(Credentials("AK", "SK", "TOKEN"), "kms", REGION).add_auth(request)
    when = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    ours = sign(
        method="POST",
        url="http://127.0.0.1:5000/",
        headers=base,
        body=body,
        credentials=AwsCredentials("AK", "SK", "TOKEN"),
        region=REGION,
        service="kms",
        now=when,
    )
    assert ours["Authorization"] == request.headers["Authorization"]
    assert ours["X-Amz-Security-Token"] == "TOKEN"


@pytest.mark.parametrize(
    ("arn", "region"),
    [
        ("arn:aws:kms:eu-west-1:111122223333:key/abc", "eu-west-1"),
        ("arn:aws-us-gov:kms:us-gov-west-1:111122223333:alias/sops", "us-gov-west-1"),
        ("arn:aws-cn:kms:cn-north-1:111122223333:key/abc", "cn-north-1"),
    ],
)
def test_region_comes_from_the_arn(arn: str, region: str) -> None:
    assert awskms.region_of(arn) == region


def test_invalid_arn() -> None:
    with pytest.raises(SopsKeyError, match="no valid ARN found in 'alias/sops'"):
        awskms.region_of("alias/sops")


def test_endpoints() -> None:
    env = {"AWS_ENDPOINT_URL": "http://all:1", "AWS_ENDPOINT_URL_KMS": "http://kms:2/"}
    assert aws_sts.endpoint("kms", "eu-west-1", env) == "http://kms:2/"
    assert aws_sts.endpoint("sts", "eu-west-1", env) == "http://all:1/"
    assert aws_sts.endpoint("sts", "eu-west-1", {**env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}) == (
        "https://sts.eu-west-1.amazonaws.com/"
    )
    assert aws_sts.endpoint("kms", "cn-north-1", {}) == "https://kms.cn-north-1.amazonaws.com.cn/"


def test_session_name_is_sanitised_like_sops() -> None:
    assert awskms.session_name("my-host_1.example") == "sops@myhost_1.example"
    assert len(awskms.session_name("h" * 100)) == 64


def test_static_secret_formats() -> None:
    creds = aws_credentials.parse_static(b'{"AWS_ACCESS_KEY_ID": "a", "aws_secret_access_key": "s", "x": 1}')
    assert creds.aws is not None
    got = asyncio.run(creds.aws.aws_credentials(region=REGION))
    assert (got.access_key_id, got.secret_access_key, got.session_token) == ("a", "s", "")
    with pytest.raises(SopsFormatError, match="failed to unmarshal AWS credentials file"):
        aws_credentials.parse_static(b"- a list")


def test_malformed_static_secret_names_the_entry_not_its_content() -> None:
    with pytest.raises(SopsFormatError) as info:
        SopsDecryptor.from_secret_data(
            {"sops.aws-kms": f"[{STATIC_SECRET}".encode()}, secret_label="sops decryption Secret 'ns/keys'"
        )
    assert str(info.value).startswith(
        "failed to import 'sops.aws-kms' data from sops decryption Secret 'ns/keys': "
        "failed to unmarshal AWS credentials file"
    )
    assert STATIC_SECRET not in str(info.value)


def test_generator_sources_and_secret_fields_in_every_store(moto_server: Moto, tmp_path: Path) -> None:
    """The same pipeline as age: a dotenv and an INI generator source (their metadata flattened,
    the encryption context too) decrypted in place, and a SOPS document inside a Secret's data."""
    import base64
    import os

    arn = moto_server.create_key()

    def encrypted(plain: object, fmt: str) -> bytes:
        data_key = os.urandom(32)
        entry = moto_server.kms_entry(arn, data_key, {"app": "flux", "env": "prod"})
        return encrypt_document(plain, fmt, Recipe(extra_key_entries={"kms": [entry]}), key=data_key)

    (tmp_path / "app.env").write_bytes(encrypted({"PASSWORD": "env-secret"}, "dotenv"))
    (tmp_path / "app.ini").write_bytes(encrypted({"db": {"password": "ini-secret"}}, "ini"))
    (tmp_path / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  envs: [app.env]\n  files: [app.ini]\n")
    inner = encrypted({"token": "json-secret"}, "json")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "x"},
        "data": {"config.json": base64.b64encode(inner).decode()},
    }
    environ = {**NO_AMBIENT, "AWS_ENDPOINT_URL": moto_server.url}
    with SopsDecryptor.from_secret_data({"sops.aws-kms": STATIC_SECRET_YAML}, environ=environ) as dec:
        dec.decrypt_sources(tmp_path, tmp_path)
        out = dec.decrypt_object(secret)
    assert (tmp_path / "app.env").read_text().strip() == "PASSWORD=env-secret"
    assert "password = ini-secret" in (tmp_path / "app.ini").read_text()
    assert b"json-secret" in base64.b64decode(out["data"]["config.json"])
