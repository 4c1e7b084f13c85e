from __future__ import annotations

import pytest

from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.metadata import go_rfc3339, parse_metadata

BASE = {"lastmodified": "2024-11-12T13:33:42Z", "mac": "x", "age": [{"recipient": "age1abc", "enc": "E"}]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-11-12T13:33:42Z", "2024-11-12T13:33:42Z"),
        ("2024-11-12T13:33:42.123456Z", "2024-11-12T13:33:42Z"),
        ("2024-11-12T13:33:42+00:00", "2024-11-12T13:33:42Z"),
        ("2024-11-12T15:33:42+02:00", "2024-11-12T15:33:42+02:00"),
        ("2024-11-12T08:03:42-05:30", "2024-11-12T08:03:42-05:30"),
    ],
)
def test_mac_aad_is_go_rfc3339(text: str, expected: str) -> None:
    assert go_rfc3339(text) == expected


def test_default_rule_is_unencrypted_suffix() -> None:
    meta = parse_metadata(BASE)
    assert meta.rules.unencrypted_suffix == "_unencrypted"
    assert meta.key_groups[0][0].kind == "age"


def test_more_than_one_rule_is_refused() -> None:
    with pytest.raises(SopsFormatError, match="Cannot use more than one"):
        parse_metadata({**BASE, "encrypted_regex": "a", "unencrypted_suffix": "b"})


def test_weak_typing() -> None:
    meta = parse_metadata({**BASE, "mac_only_encrypted": "true", "shamir_threshold": "2"})
    assert meta.mac_only_encrypted is True and meta.shamir_threshold == 2


def test_key_groups() -> None:
    meta = parse_metadata(
        {
            "lastmodified": "2024-11-12T13:33:42Z",
            "key_groups": [{"age": [{"recipient": "age1a", "enc": "A"}]}, {"pgp": [{"fp": "F", "enc": "P"}]}],
            "shamir_threshold": 2,
        }
    )
    assert [[k.kind for k in g] for g in meta.key_groups] == [["age"], ["pgp"]]


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"mac": "x", "age": [{"recipient": "r", "enc": "e"}]}, "'lastmodified' is missing"),
        ({**BASE, "lastmodified": "yesterday"}, "not an RFC 3339 timestamp"),
        ({"lastmodified": "2024-11-12T13:33:42Z"}, "no master keys"),
        ({**BASE, "age": "nope"}, "'age' must be a list"),
        ({**BASE, "shamir_threshold": "many"}, "'shamir_threshold' must be an integer"),
    ],
)
def test_malformed_metadata(mapping: dict, message: str) -> None:
    with pytest.raises(SopsFormatError, match=message):
        parse_metadata(mapping)
