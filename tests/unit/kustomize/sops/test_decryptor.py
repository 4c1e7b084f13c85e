"""``SopsDecryptor.decrypt_object``: whole objects, Secret fields, the decrypt-disabled annotation."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
import yaml

from kustomize_controller.kustomize.errors import DecryptionError
from kustomize_controller.kustomize.sops import (
    SopsDecryptor,
    SopsIntegrityError,
    gvk_string,
    is_decryption_disabled,
    is_encrypted_secret,
)
from kustomize_controller.kustomize.sops.tree import Branch, EncryptionRules

from .conftest import requires_gpg
from .sopsgen import AgeKey, Recipe, encrypt_document, fixture

SECRET_PLAINTEXT = "s3cr3t-Plaintext-Value"


def load(rel: str) -> dict[str, Any]:
    return yaml.safe_load(fixture(rel))


def test_whole_object_decrypts_and_drops_sops_block(decryptor: SopsDecryptor) -> None:
    obj = load("algorithms/age.yaml")
    before = copy.deepcopy(obj)
    out = decryptor.decrypt_object(obj)
    assert out == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "age"}, "stringData": {"key": "value"}}
    assert obj == before  # input untouched


@requires_gpg
def test_whole_object_pgp(decryptor: SopsDecryptor) -> None:
    assert decryptor.decrypt_object(load("algorithms/pgp.yaml"))["stringData"] == {"key": "value"}


def test_global_age_key_is_used(decryptor: SopsDecryptor) -> None:
    assert decryptor.decrypt_object(load("global/secret.yaml"))["stringData"] == {"key": "global-value"}


def test_built_object_with_changed_names_still_decrypts(decryptor: SopsDecryptor) -> None:
    # kustomize rewrites names/namespaces and reorders keys: the MAC cannot match, values are
    # still authenticated one by one.
    obj = load("algorithms/age.yaml")
    obj["metadata"] = {"name": "sops-algo-age", "namespace": "tenant", "labels": {"a": "b"}}
    reordered = dict(sorted(obj.items()))
    assert decryptor.decrypt_object(reordered)["stringData"] == {"key": "value"}


def test_moved_encrypted_value_is_detected(decryptor: SopsDecryptor) -> None:
    obj = load("algorithms/age.yaml")
    obj["stringData"] = {"other": obj["stringData"]["key"]}  # AAD is the key path
    with pytest.raises(SopsIntegrityError) as info:
        decryptor.decrypt_object(obj)
    assert str(info.value).startswith(
        "failed to decrypt and format '/age' Secret data: "
        "error decrypting sops tree: Error walking tree: Could not decrypt value: "
    )


def test_tampered_stored_mac_is_detected_on_objects(decryptor: SopsDecryptor) -> None:
    obj = load("algorithms/age.yaml")
    obj["sops"]["lastmodified"] = "2024-11-12T13:33:43Z"  # MAC's AAD
    with pytest.raises(SopsIntegrityError, match="failed to verify sops data integrity"):
        decryptor.decrypt_object(obj)


def test_inside_fixture_secret_data_binary(decryptor: SopsDecryptor) -> None:
    out = decryptor.decrypt_object(load("inside/secret.yaml"))
    assert base64.b64decode(out["data"]["key"]) == b"value"


@pytest.mark.parametrize("annotation", ["disabled", "Disabled", "DISABLED"])
def test_decrypt_disabled_annotation_skips(decryptor: SopsDecryptor, annotation: str) -> None:
    obj = load("algorithms/age.yaml")
    obj["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/decrypt": annotation}
    assert decryptor.decrypt_object(obj) is obj
    assert is_decryption_disabled(obj)
    assert is_encrypted_secret(obj)


def test_plain_objects_pass_through(decryptor: SopsDecryptor) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "ENC[not really]"}}
    assert decryptor.decrypt_object(cm) == cm
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "x"},
        "data": {"a": "!!notbase64", "b": "YQ=="},
    }
    assert decryptor.decrypt_object(secret) == secret


PLAIN_DOC = {"user": "admin", "password": SECRET_PLAINTEXT, "port": 5432, "ratio": 0.25, "enabled": True}


def _embedded(fmt: str, recipient: str) -> bytes:
    if fmt == "ini":
        plain = Branch([("db", Branch([("user", "admin"), ("password", SECRET_PLAINTEXT)]))])
        return encrypt_document(plain, "ini", Recipe(age_recipients=[recipient]))
    if fmt == "dotenv":
        plain = Branch([("USER", "admin"), ("PASSWORD", SECRET_PLAINTEXT)])
        return encrypt_document(plain, "dotenv", Recipe(age_recipients=[recipient]))
    if fmt == "binary":
        return encrypt_document({"data": f"line1\n{SECRET_PLAINTEXT}\n"}, "binary", Recipe(age_recipients=[recipient]))
    return encrypt_document(dict(PLAIN_DOC), fmt, Recipe(age_recipients=[recipient]))


def _check(key: str, plain: bytes) -> None:
    if key.endswith((".yaml", ".yml")):
        assert yaml.safe_load(plain) == PLAIN_DOC
    elif key.endswith(".json"):
        assert json.loads(plain) == PLAIN_DOC
    elif key.endswith(".env"):
        assert plain == f"USER=admin\nPASSWORD={SECRET_PLAINTEXT}\n".encode()
    elif key.endswith(".ini"):
        assert b"[db]" in plain and f"password = {SECRET_PLAINTEXT}".encode() in plain
    else:
        assert plain == f"line1\n{SECRET_PLAINTEXT}\n".encode()


@pytest.mark.parametrize(
    ("key", "fmt"),
    [
        ("config.yaml", "yaml"),
        ("config.yml", "yaml"),
        ("config.json", "json"),
        ("app.env", "dotenv"),
        ("app.ini", "ini"),
        ("id_rsa", "binary"),
    ],
)
@pytest.mark.parametrize("field", ["data", "stringData"])
def test_secret_fields_holding_sops_documents(key: str, fmt: str, field: str) -> None:
    age_key = AgeKey.generate()
    doc = _embedded(fmt, age_key.recipient)
    value = base64.b64encode(doc).decode() if field == "data" else doc.decode()
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns"},
        field: {key: value, "plain": "eA==" if field == "data" else "x"},
    }
    with SopsDecryptor.from_secret_data(age_key.secret_data) as dec:
        out = dec.decrypt_object(obj)
    got = out[field][key]
    _check(key, base64.b64decode(got) if field == "data" else got.encode())
    assert out[field]["plain"] == obj[field]["plain"]


def test_secret_field_yaml_document_written_as_json_when_key_says_so() -> None:
    age_key = AgeKey.generate()
    doc = encrypt_document(dict(PLAIN_DOC), "yaml", Recipe(age_recipients=[age_key.recipient]))
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"c.json": base64.b64encode(doc).decode()},
    }
    with SopsDecryptor.from_secret_data(age_key.secret_data) as dec:
        out = dec.decrypt_object(obj)
    assert json.loads(base64.b64decode(out["data"]["c.json"])) == PLAIN_DOC


def test_secret_field_error_names_object_and_field() -> None:
    age_key, other = AgeKey.generate(), AgeKey.generate()
    doc = encrypt_document(dict(PLAIN_DOC), "yaml", Recipe(age_recipients=[age_key.recipient]))
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns"},
        "data": {"c.yaml": base64.b64encode(doc).decode()},
    }
    with SopsDecryptor.from_secret_data(other.secret_data) as dec, pytest.raises(DecryptionError) as info:
        dec.decrypt_object(obj)
    message = str(info.value)
    assert message.startswith("failed to decrypt and format 'ns/s' Secret field 'c.yaml': cannot get sops data key: ")
    assert info.value.reason == "BuildFailed"


def test_embedded_document_size_limit() -> None:
    age_key = AgeKey.generate()
    doc = encrypt_document({"data": "x" * 4096}, "binary", Recipe(age_recipients=[age_key.recipient]))
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"blob": base64.b64encode(doc).decode()},
    }
    with (
        SopsDecryptor.from_secret_data(age_key.secret_data, max_file_size=1024) as dec,
        pytest.raises(DecryptionError, match=r"exceeding limit \(1024\)"),
    ):
        dec.decrypt_object(obj)


def test_embedded_document_mac_is_verified() -> None:
    age_key = AgeKey.generate()
    recipe = Recipe(age_recipients=[age_key.recipient], rules=EncryptionRules(encrypted_regex="^password$"))
    doc = encrypt_document(dict(PLAIN_DOC), "yaml", recipe)
    tampered = doc.replace(b"user: admin", b"user: root")
    assert tampered != doc
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"c.yaml": base64.b64encode(tampered).decode()},
    }
    with (
        SopsDecryptor.from_secret_data(age_key.secret_data) as dec,
        pytest.raises(SopsIntegrityError, match="MAC mismatch"),
    ):
        dec.decrypt_object(obj)


def test_no_plaintext_or_key_material_in_any_error() -> None:
    age_key, other = AgeKey.generate(), AgeKey.generate()
    recipe = Recipe(age_recipients=[age_key.recipient], rules=EncryptionRules(encrypted_regex="^password$"))
    doc = yaml.safe_load(encrypt_document(dict(PLAIN_DOC), "yaml", recipe))
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, **doc}
    messages: list[str] = []

    def attempt(dec: SopsDecryptor, o: dict[str, Any]) -> None:
        try:
            dec.decrypt_object(o)
        except DecryptionError as err:
            chain: BaseException | None = err
            while chain is not None:
                messages.append(str(chain))
                chain = chain.__cause__ or chain.__context__
        else:
            raise AssertionError("expected a failure")

    with SopsDecryptor.from_secret_data(other.secret_data) as dec:
        attempt(dec, obj)  # wrong key
    with SopsDecryptor.from_secret_data(age_key.secret_data) as dec:
        plain_pw = copy.deepcopy(obj)
        plain_pw["password"] = SECRET_PLAINTEXT  # a value that should be encrypted is in clear
        attempt(dec, plain_pw)
        bad_type = copy.deepcopy(obj)
        bad_type["password"] = bad_type["password"].replace("type:str", "type:int")
        attempt(dec, bad_type)  # decrypts, then fails type restoration
    assert len(messages) >= 3
    for message in messages:
        assert SECRET_PLAINTEXT not in message
        assert age_key.identity not in message and other.identity not in message
        assert "AGE-SECRET-KEY" not in message


def test_gvk_string_matches_kustomize() -> None:
    assert gvk_string({"apiVersion": "v1", "kind": "Secret"}) == "Secret.v1.[noGrp]"
    assert gvk_string({"apiVersion": "apps/v1", "kind": "Deployment"}) == "Deployment.v1.apps"
    assert gvk_string({}) == "[noKind].[noVer].[noGrp]"


def test_is_encrypted_secret() -> None:
    assert is_encrypted_secret({"apiVersion": "v1", "kind": "Secret", "sops": {}})
    assert not is_encrypted_secret({"apiVersion": "v1", "kind": "ConfigMap", "sops": {}})
    assert not is_encrypted_secret({"apiVersion": "v1", "kind": "Secret"})


def test_objects_with_dates_from_a_yaml11_parser(decryptor: SopsDecryptor) -> None:
    import datetime

    obj = load("algorithms/age.yaml")
    obj["metadata"]["annotations"] = {"when": datetime.date(2024, 1, 1)}
    out = decryptor.decrypt_object(obj)
    assert out["stringData"] == {"key": "value"}
    assert out["metadata"]["annotations"] == {"when": datetime.date(2024, 1, 1)}
