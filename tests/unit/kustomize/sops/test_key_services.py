"""The seam of the remote key services: metadata of every kind, sops' key order and error text,
the dispatch, and the worker-thread → event-loop bridge."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from kustomize_controller.kustomize.sops.errors import SopsFormatError, SopsKeyError, SopsUnsupportedError
from kustomize_controller.kustomize.sops.keys import services
from kustomize_controller.kustomize.sops.keys.credentials import (
    AccessToken,
    AwsCredentials,
    Credentials,
    KeyServiceContext,
)
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing
from kustomize_controller.kustomize.sops.keys.usererror import GroupResult, KeyFailure, data_key_error_text, wrap
from kustomize_controller.kustomize.sops.metadata import MasterKey, parse_metadata

from .sopsgen import flat

ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

ALL_KINDS = {
    "lastmodified": "2024-11-12T13:33:42Z",
    "hc_vault": [{"vault_address": "https://vault:8200", "engine_path": "a/b", "key_name": "k", "enc": "vault:v1:x"}],
    "azure_kv": [{"vault_url": "https://v.vault.azure.net", "name": "n", "version": "1", "enc": "x"}],
    "hckms": [{"key_id": "tr-west-1:abc", "enc": "x"}],
    "gcp_kms": [{"resource_id": "projects/p/locations/l/keyRings/r/cryptoKeys/k", "enc": "x"}],
    "kms": [
        {
            "arn": ARN,
            "role": "arn:aws:iam::111122223333:role/sops",
            "context": {"b": "2", "a": "1"},
            "aws_profile": "dev",
            "created_at": "2024-11-12T13:33:42Z",
            "enc": "AQID",
            "unknown_field": ["ignored"],
        }
    ],
    "pgp": [{"fp": "FPR", "enc": "x"}],
    "age": [{"recipient": "age1abc", "enc": "x"}],
}


def test_every_kind_parsed_in_sops_decryption_order_with_its_fields() -> None:
    (group,) = parse_metadata(ALL_KINDS).key_groups
    assert [k.kind for k in group] == ["age", "pgp", "kms", "gcp_kms", "hckms", "azure_kv", "hc_vault"]
    kms = group[2]
    assert kms.context == {"b": "2", "a": "1"}
    assert kms.attr("role") == "arn:aws:iam::111122223333:role/sops" and kms.attr("aws_profile") == "dev"
    assert [k.to_string() for k in group] == [
        "age1abc",
        "FPR",
        f"{ARN}+arn:aws:iam::111122223333:role/sops|a:1,b:2|dev",
        "projects/p/locations/l/keyRings/r/cryptoKeys/k",
        "tr-west-1:abc",
        "https://v.vault.azure.net/keys/n/1",
        "https://vault:8200/v1/a/b/keys/k",
    ]


def test_kms_to_string_without_optional_parts() -> None:
    assert MasterKey("kms", ARN, "e").to_string() == ARN


def test_kms_context_must_be_a_mapping() -> None:
    with pytest.raises(SopsFormatError, match=r"'kms\[0\]\.context' must be a mapping of strings"):
        parse_metadata({**ALL_KINDS, "kms": [{"arn": ARN, "enc": "x", "context": "a:b"}]})


def test_user_error_text_is_sops_layout() -> None:
    long_error = "failed to decrypt sops data key with AWS KMS: " + "word " * 14 + "end"
    text = data_key_error_text(
        [
            GroupResult((KeyFailure("age1abc", "no identity"), KeyFailure(ARN, long_error)), succeeded=False),
            GroupResult((), succeeded=True),
        ],
        threshold=2,
    )
    expected = (
        "Failed to get the data key required to decrypt the SOPS file.\n"
        "\n"
        "Group 0: FAILED\n"
        "  age1abc: FAILED\n"
        "    - | no identity\n"
        "  \n"
        f"  {ARN}: FAILED\n"
        "    - | failed to decrypt sops data key with AWS KMS: word word word\n"
        "      | word word word word word word word word word word word end\n"
        "\n"
        "Group 1: SUCCESS\n"
        "\n"
        "Recovery failed because the file was encrypted with a Shamir threshold of\n"
        "2, but only 1 part(s) were successfully recovered, one for each successful\n"
        "key group. In order for SOPS to recover the file, at least 2 groups have to\n"
        "be successful. In order for a group to be successful, decryption has to\n"
        "succeed with any of the keys in that key group."
    )
    assert text == expected


def test_wrap_never_splits_words_and_keeps_line_breaks() -> None:
    assert wrap("a " + "x" * 70 + " b\nc", 60) == "a\n" + "x" * 70 + "\nb\nc"


def test_not_implemented_kinds_are_unsupported() -> None:
    with pytest.raises(SopsUnsupportedError, match="not supported: HuaweiCloud KMS"):
        services.service_for("hckms")


@pytest.fixture
def fake_service(monkeypatch: pytest.MonkeyPatch) -> list[tuple[MasterKey, KeyServiceContext]]:
    """A key service module for kind ``kms`` that records its calls."""
    calls: list[tuple[MasterKey, KeyServiceContext]] = []
    module = types.ModuleType("fake_kms_service")

    async def decrypt_data_key(key: MasterKey, context: KeyServiceContext) -> bytes:
        calls.append((key, context))
        if key.enc == "slow":
            await asyncio.sleep(30)
        if key.enc == "bad":
            raise SopsKeyError("failed to decrypt sops data key with AWS KMS: denied")
        return bytes(32)

    module.decrypt_data_key = decrypt_data_key  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_kms_service", module)
    monkeypatch.setitem(services.KEY_SERVICES, "kms", "fake_kms_service")
    return calls


def _meta(*encs: str) -> dict:
    return {"lastmodified": "2024-11-12T13:33:42Z", "kms": [{"arn": ARN, "enc": e} for e in encs]}


def test_dispatch_tries_keys_in_order_and_caches(fake_service: list) -> None:
    ring = KeyRing.from_secret_data({})
    metadata = parse_metadata(_meta("bad", "good"))
    assert ring.data_key(metadata) == bytes(32)
    assert ring.data_key(metadata) == bytes(32)
    assert [k.enc for k, _ in fake_service] == ["bad", "good"]  # answers, failures too, are cached


def test_failed_remote_key_is_in_the_error_chain(fake_service: list) -> None:
    ring = KeyRing.from_secret_data({})
    with pytest.raises(SopsKeyError) as info:
        ring.data_key(parse_metadata(_meta("bad")))
    assert f"  {ARN}: FAILED\n    - | failed to decrypt sops data key with AWS KMS: denied" in str(info.value)


async def test_bridge_runs_on_the_loop_from_a_worker_thread(fake_service: list) -> None:
    loop = asyncio.get_running_loop()
    workload = Credentials(aws=_StaticAws())
    ring = KeyRing.from_secret_data({}, workload=workload, environ={"AWS_REGION": "x"}, loop=loop)
    assert await asyncio.to_thread(ring.data_key, parse_metadata(_meta("good"))) == bytes(32)
    (_, context) = fake_service[0]
    assert context.credentials.aws is workload.aws and context.environ == {"AWS_REGION": "x"}


async def test_bridge_refuses_the_loop_thread(fake_service: list) -> None:
    ring = KeyRing.from_secret_data({}, loop=asyncio.get_running_loop())
    with pytest.raises(SopsKeyError) as info:
        ring.data_key(parse_metadata(_meta("good")))
    assert "cannot be called on the event loop thread" in flat(str(info.value))


async def test_a_key_service_that_does_not_answer_fails_the_key(fake_service: list) -> None:
    context = KeyServiceContext(deadline=0.05)
    ring = KeyRing(
        age_identities=__import__("kustomize_controller.kustomize.sops.keys.age", fromlist=["x"]).AgeIdentities(),
        pgp_keys={},
        services=services.KeyServices(context, loop=asyncio.get_running_loop()),
    )
    with pytest.raises(SopsKeyError) as info:
        await asyncio.to_thread(ring.data_key, parse_metadata(_meta("slow")))
    assert "AWS KMS did not answer within 0.05s" in str(info.value)


def test_credentials_precedence_and_no_secret_in_repr() -> None:
    static = Credentials(gcp=_Gcp())
    workload = Credentials(aws=_StaticAws(), gcp=_Gcp())
    merged = static.with_fallback(workload)
    assert merged.gcp is static.gcp and merged.aws is workload.aws
    creds = AwsCredentials("AKID", "SECRETKEY", "SESSIONTOKEN")
    assert "SECRETKEY" not in repr(creds) and "SESSIONTOKEN" not in repr(creds)
    assert "TOKEN123" not in repr(AccessToken("TOKEN123"))


class _StaticAws:
    async def aws_credentials(self, *, region: str) -> AwsCredentials:
        return AwsCredentials("AKID", "secret")


class _Gcp:
    async def gcp_token(self) -> AccessToken:
        return AccessToken("t")


def test_workload_identity_enters_the_build_cache_identity() -> None:
    from kustomize_controller.kustomize.sops import SopsDecryptor

    plain = SopsDecryptor.from_secret_data({}).cache_identity
    alice = SopsDecryptor.from_secret_data({}, workload=Credentials(aws=_StaticAws(), identity="sa:a/x")).cache_identity
    bob = SopsDecryptor.from_secret_data({}, workload=Credentials(aws=_StaticAws(), identity="sa:b/x")).cache_identity
    anonymous = SopsDecryptor.from_secret_data({}, workload=Credentials(aws=_StaticAws())).cache_identity
    assert len({plain, alice, bob}) == 3 and anonymous is None
    assert SopsDecryptor.from_secret_data({}, workload=Credentials()).cache_identity == plain


@pytest.mark.parametrize(
    ("url", "environ", "expected"),
    [
        ("https://kms.eu-west-1.amazonaws.com/", {"HTTPS_PROXY": "proxy:3128"}, "http://proxy:3128"),
        (
            "https://kms.eu-west-1.amazonaws.com/",
            {"https_proxy": "http://p:1", "HTTP_PROXY": "http://h:2"},
            "http://p:1",
        ),
        ("http://169.254.169.254/latest", {"HTTPS_PROXY": "http://p:1"}, None),
        ("http://169.254.169.254/latest", {"HTTP_PROXY": "http://h:2", "NO_PROXY": "169.254.0.0/16"}, None),
        ("https://v.vault.azure.net/keys", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "a.com, .azure.net"}, None),
        ("https://vault.azure.net/keys", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "vault.azure.net"}, None),
        ("https://notazure.net/", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "azure.net"}, "http://p:1"),
        ("https://x.example:8443/", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "x.example:443"}, "http://p:1"),
        ("https://x.example/", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
        ("http://127.0.0.1:8200/", {"HTTP_PROXY": "http://p:1"}, None),
    ],
)
def test_proxy_from_the_environment_as_go(url: str, environ: dict, expected: str | None) -> None:
    from kustomize_controller.kustomize.sops.keys.http import proxy_for

    assert proxy_for(url, environ) == expected


def test_no_secret_in_the_repr_of_any_parsed_credential() -> None:
    """A credential object or its context that reaches a log line or an error by ``repr`` shows no secret."""
    import json

    from kustomize_controller.kustomize.sops.keys import azure_credentials, gcp_credentials

    context = KeyServiceContext(environ={"AWS_SECRET_ACCESS_KEY": "ENV-SECRET", "AWS_SESSION_TOKEN": "ENV-TOKEN"})
    azure = azure_credentials.parse_static(b"tenantId: t\nclientId: c\nclientSecret: AZ-SECRET\n", context)
    user = gcp_credentials.parse_static(json.dumps({
        "type": "authorized_user", "client_id": "c", "client_secret": "G-SECRET", "refresh_token": "G-REFRESH",
    }).encode(), context)
    external = gcp_credentials.parse_static(json.dumps({
        "type": "external_account", "audience": "a", "subject_token_type": "t", "token_url": "https://sts/",
        "credential_source": {"url": "http://m/", "headers": {"Authorization": "Bearer G-HEADER"}},
    }).encode(), context)
    shown = " ".join(repr(x) for x in (context, azure, azure.azure, user.gcp, external.gcp))
    for secret in ("ENV-SECRET", "ENV-TOKEN", "AZ-SECRET", "G-SECRET", "G-REFRESH", "G-HEADER"):
        assert secret not in shown


def test_a_loop_closing_under_the_bridge_fails_the_key_and_leaks_no_coroutine(fake_service: list) -> None:
    """The controller's loop closes between the bridge's check and its hand-off (shutdown): the key fails
    with a SopsKeyError (not a RuntimeError the build would report as a bug) and no coroutine is left
    never awaited."""
    import gc
    import warnings

    class ClosingLoop(asyncio.SelectorEventLoop):
        racing = True

        def is_closed(self) -> bool:
            return not self.racing and super().is_closed()  # as when the check ran just before the close

    loop = ClosingLoop()
    loop.close()
    ring = KeyRing.from_secret_data({}, loop=loop)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with pytest.raises(SopsKeyError) as info:
                ring.data_key(parse_metadata(_meta("good")))
        finally:
            loop.racing = False
        gc.collect()
    assert "the request was cancelled" in flat(str(info.value))
    assert not [w for w in caught if "never awaited" in str(w.message)]
