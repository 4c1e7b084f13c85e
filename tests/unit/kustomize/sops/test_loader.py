from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from kustomize_controller.kube.errors import ForbiddenError, NotFoundError
from kustomize_controller.kustomize.errors import DecryptionError
from kustomize_controller.kustomize.sops import SopsKeyError
from kustomize_controller.kustomize.sops.loader import load_decryptor

from .sopsgen import fixture, flat


class FakeSecrets:
    def __init__(self, secrets: dict[tuple[str, str], dict[str, bytes]]) -> None:
        self.secrets = secrets
        self.calls: list[tuple[str, str]] = []

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert (api_version, kind) == ("v1", "Secret")
        assert namespace is not None
        self.calls.append((namespace, name))
        if name == "forbidden":
            raise ForbiddenError(
                'secrets "forbidden" is forbidden', status=403, kind="Secret", namespace=namespace, name=name
            )
        if (namespace, name) not in self.secrets:
            raise NotFoundError(
                f'secrets "{name}" not found', status=404, kind="Secret", namespace=namespace, name=name
            )
        data = self.secrets[(namespace, name)]
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }


AGE_OBJ = yaml.safe_load(fixture("algorithms/age.yaml"))
GLOBAL_OBJ = yaml.safe_load(fixture("global/secret.yaml"))


async def test_secret_ref_is_used_and_global_ignored() -> None:
    client = FakeSecrets(
        {
            ("apps", "sops-keys"): {"age.agekey": fixture("keys/age.txt")},
            ("flux-system", "global"): {"g.agekey": fixture("keys/age-global.txt")},
        }
    )
    with await load_decryptor(
        client=client, namespace="apps", secret_name="sops-keys", global_age_secret=("flux-system", "global")
    ) as dec:
        assert dec.decrypt_object(AGE_OBJ)["stringData"] == {"key": "value"}
        with pytest.raises(SopsKeyError):
            dec.decrypt_object(GLOBAL_OBJ)
    assert client.calls == [("apps", "sops-keys")]


async def test_global_age_secret_without_secret_ref() -> None:
    client = FakeSecrets(
        {("flux-system", "global"): {"g.agekey": fixture("keys/age-global.txt"), "p.asc": fixture("keys/pgp.asc")}}
    )
    with await load_decryptor(
        client=client, namespace="apps", secret_name=None, global_age_secret=("flux-system", "global")
    ) as dec:
        assert dec.decrypt_object(GLOBAL_OBJ)["stringData"] == {"key": "global-value"}
        with pytest.raises(SopsKeyError) as info:
            dec.decrypt_object(yaml.safe_load(fixture("algorithms/pgp.yaml")))
        assert "no PGP private key was provided" in flat(str(info.value))


async def test_no_keys_at_all() -> None:
    dec = await load_decryptor(client=FakeSecrets({}), namespace="apps", secret_name=None)
    with dec, pytest.raises(SopsKeyError, match="no age identity was provided"):
        dec.decrypt_object(AGE_OBJ)


async def test_missing_secret_gives_the_api_message() -> None:
    with pytest.raises(DecryptionError) as info:
        await load_decryptor(client=FakeSecrets({}), namespace="apps", secret_name="nope")
    assert str(info.value) == 'secrets "nope" not found'
    assert info.value.reason == "BuildFailed"


async def test_other_api_errors_name_the_secret() -> None:
    with pytest.raises(DecryptionError) as info:
        await load_decryptor(client=FakeSecrets({}), namespace="apps", secret_name="forbidden")
    assert str(info.value).startswith("cannot get sops decryption Secret 'apps/forbidden': ")


async def test_bad_age_key_names_secret_and_key() -> None:
    client = FakeSecrets({("apps", "k"): {"bad.agekey": b"AGE-SECRET-KEY-1BROKEN"}})
    with pytest.raises(DecryptionError) as info:
        await load_decryptor(client=client, namespace="apps", secret_name="k")
    assert str(info.value) == (
        "failed to import 'bad.agekey' data from sops decryption Secret 'apps/k': "
        "failed to parse and add to age identities: malformed secret key"
    )
    client = FakeSecrets({("flux-system", "g"): {"bad.agekey": b"junk"}})
    with pytest.raises(DecryptionError, match="from sops SOPS age decryption Secret 'flux-system/g'"):
        await load_decryptor(client=client, namespace="apps", secret_name=None, global_age_secret=("flux-system", "g"))
