"""moto in server mode on loopback: a real AWS KMS/STS wire protocol for the key service tests
(unit and integration). Keys are created and data keys encrypted against the live server (moto's
ciphertexts embed its key ids, they cannot be pre-baked); documents are written by sopsgen."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kustomize_controller.kustomize.sops.tree import EncryptionRules

from .sopsgen import Recipe, encrypt_document

REGION = "eu-west-1"
PLAIN = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kms"}, "stringData": {"key": "kms-value"}}
# moto accepts any credentials; these stand for a user's static keys (and must never leak)
STATIC_ID = "AKIAEXAMPLESTATIC01"
STATIC_SECRET = "STATICSECRETnever/leak+0123456789abcdef"
STATIC_SECRET_YAML = f"aws_access_key_id: {STATIC_ID}\naws_secret_access_key: {STATIC_SECRET}\n".encode()


@dataclass
class Moto:
    url: str

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def create_key(self) -> str:
        arn: str = self.client("kms").create_key()["KeyMetadata"]["Arn"]
        return arn

    def kms_entry(self, arn: str, data_key: bytes, context: dict[str, str] | None = None, **extra: str) -> dict:
        kwargs: dict[str, Any] = {"KeyId": arn, "Plaintext": data_key}
        if context:
            kwargs["EncryptionContext"] = context
        blob = self.client("kms").encrypt(**kwargs)["CiphertextBlob"]
        entry: dict[str, Any] = {"arn": arn, "role": extra.pop("role", "")}
        if context:
            entry["context"] = context
        entry.update(created_at="2024-11-12T13:33:42Z", enc=base64.b64encode(blob).decode(), aws_profile="", **extra)
        return entry

    def document(self, arn: str, *, context: dict[str, str] | None = None, fmt: str = "yaml", **extra: str) -> bytes:
        data_key = os.urandom(32)
        entry = self.kms_entry(arn, data_key, context, **extra)
        return encrypt_document(PLAIN, fmt, recipe(extra_key_entries={"kms": [entry]}), key=data_key)


def recipe(**kwargs: Any) -> Recipe:
    """Only ``data``/``stringData`` encrypted, as Flux users configure sops: kustomize must be able
    to read the kind and name of the document before it is decrypted."""
    return Recipe(rules=EncryptionRules(encrypted_regex="^(data|stringData)$"), **kwargs)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Moto]:
    pytest.importorskip("moto", reason="moto is a dev dependency")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield Moto(f"http://{host}:{port}")
    finally:
        server.stop()
