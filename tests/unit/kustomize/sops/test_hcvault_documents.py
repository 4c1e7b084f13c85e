"""Whole documents whose data key is held by Vault transit (the loopback Vault), through the
decryptor and the key-service seam: the Secret token, a mixed age + Vault file, key groups with a
Shamir threshold, and the UserError text when Vault refuses."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator

import pyrage
import pytest
import yaml

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsKeyError
from tests.fakes.vault import FakeVault

from .sopsgen import AgeKey, Recipe, armor, encrypt_document
from .test_keys import split

ROOT = "s.root-token"
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "apps"},
          "stringData": {"password": "hunter2"}}


@pytest.fixture
async def vault() -> AsyncIterator[FakeVault]:
    fake = FakeVault()
    fake.add_key("sops", "firstkey")
    fake.add_token(ROOT)
    await fake.start()
    yield fake
    await fake.stop()


def vault_entry(vault: FakeVault, data_key: bytes) -> dict[str, str]:
    return {"vault_address": vault.url, "engine_path": "sops", "key_name": "firstkey",
            "created_at": "2024-11-12T13:33:42Z", "enc": vault.encrypt("sops", "firstkey", data_key)}


async def decrypt(decryptor: SopsDecryptor, document: bytes) -> dict[str, object]:
    obj = yaml.safe_load(document)
    return await asyncio.to_thread(decryptor.decrypt_object, obj)


async def test_vault_key_with_the_secret_token_and_a_mixed_age_file(vault: FakeVault) -> None:
    data_key = os.urandom(32)
    stranger = AgeKey.generate()  # an age recipient this controller has no identity for
    recipe = Recipe(age_recipients=[stranger.recipient], extra_key_entries={"hc_vault": [vault_entry(vault, data_key)]})
    document = encrypt_document(SECRET, "yaml", recipe, key=data_key)
    decryptor = SopsDecryptor.from_secret_data({"sops.vault-token": ROOT.encode()}, loop=asyncio.get_running_loop())
    with decryptor:
        plain = await decrypt(decryptor, document)
    assert plain["stringData"] == {"password": "hunter2"}
    assert [r.path for r in vault.requests] == ["/v1/sops/decrypt/firstkey"]


async def test_key_groups_with_a_threshold(vault: FakeVault) -> None:
    data_key = os.urandom(32)
    age_key = AgeKey.generate()
    parts = split(data_key, 2, 2, random.Random(7))
    groups = [
        {"age": [{"recipient": age_key.recipient,
                  "enc": armor(pyrage.encrypt(parts[0], [pyrage.x25519.Recipient.from_str(age_key.recipient)]))}]},
        {"hc_vault": [vault_entry(vault, parts[1])]},
    ]
    document = encrypt_document(SECRET, "yaml", Recipe(key_groups=groups, shamir_threshold=2), key=data_key)
    decryptor = SopsDecryptor.from_secret_data({**age_key.secret_data, "sops.vault-token": ROOT.encode()},
                                               loop=asyncio.get_running_loop())
    with decryptor:
        assert (await decrypt(decryptor, document))["stringData"] == {"password": "hunter2"}


async def test_refused_token_reads_as_sops_user_error(vault: FakeVault) -> None:
    data_key = os.urandom(32)
    recipe = Recipe(extra_key_entries={"hc_vault": [vault_entry(vault, data_key)]})
    document = encrypt_document(SECRET, "yaml", recipe, key=data_key)
    decryptor = SopsDecryptor.from_secret_data({"sops.vault-token": b"not-the-token"},
                                               loop=asyncio.get_running_loop())
    with decryptor, pytest.raises(SopsKeyError) as caught:
        await decrypt(decryptor, document)
    message = str(caught.value)
    assert f"{vault.url}/v1/sops/keys/firstkey: FAILED" in message
    assert "failed to decrypt sops data key from Vault transit backend" in message
    assert "permission denied" in message
    assert "not-the-token" not in message
