from __future__ import annotations

import pytest

from kustomize_controller.kustomize.sops.cipher import Comment
from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.formats import Format, detect_format, format_for_path
from kustomize_controller.kustomize.sops.stores import dotenv, ini, json, load_encrypted, yaml
from kustomize_controller.kustomize.sops.stores.flatten import unflatten
from kustomize_controller.kustomize.sops.tree import Branch

from .sopsgen import fixture


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("a.yaml", Format.YAML),
        ("a.yml", Format.YAML),
        ("a.json", Format.JSON),
        ("a.env", Format.DOTENV),
        ("a.ini", Format.INI),
        ("a.txt", Format.BINARY),
        ("key", Format.BINARY),
        ("A.YAML", Format.BINARY),
        (".dockerconfigjson", Format.JSON),
    ],
)
def test_format_for_path(path: str, fmt: Format) -> None:
    assert format_for_path(path) is fmt


def test_detect_format() -> None:
    assert detect_format(fixture("algorithms/age.yaml")) is Format.YAML
    assert detect_format(fixture("files/file.txt")) is Format.JSON
    assert detect_format(fixture("envs/env.env")) is Format.DOTENV
    assert detect_format(b"[sops]\nmac = x") is Format.INI
    assert detect_format(b"plain") is None


def test_unflatten() -> None:
    out = unflatten([("age__list_0__map_enc", "E"), ("age__list_0__map_recipient", "R"), ("version", "3")])
    assert out == {"age": [{"enc": "E", "recipient": "R"}], "version": "3"}
    with pytest.raises(SopsFormatError, match="missing entries"):
        unflatten([("age__list_1__map_enc", "E")])


def test_dotenv_metadata_extracted() -> None:
    branches, meta = load_encrypted(fixture("envs/env.env"), Format.DOTENV)
    assert [k for k, _ in branches[0]] == ["key"]
    assert meta["age"][0]["enc"].startswith("-----BEGIN AGE ENCRYPTED FILE-----\n")


def test_dotenv_round_trip() -> None:
    branches = dotenv.load(b"#comment\nA=1\nB=multi\\nline\n\nC==x\n")
    assert branches[0] == Branch([(Comment("comment"), None), ("A", "1"), ("B", "multi\nline"), ("C", "=x")])
    assert dotenv.emit(branches) == b"#comment\nA=1\nB=multi\\nline\nC==x\n"
    with pytest.raises(SopsFormatError, match="line 1"):
        dotenv.load(b"novalue\n")


def test_ini_load_and_emit() -> None:
    text = b'; top\n[db]\nuser = admin\n; about pw\npassword: "a;b"\nplain = v ; trailing\n[sops]\nversion = 3\n'
    branches = ini.load(text)
    sections = dict((k, v) for k, v in branches[0])
    assert sections["DEFAULT"] == Branch()
    assert sections["db"][0] == (Comment("top"), None)
    assert list(sections["db"])[1:] == [
        ("user", "admin"),
        ("password", "a;b"),
        (Comment("about pw"), None),
        ("plain", "v"),
    ]
    out = ini.emit(branches)
    assert b'password = "a;b"' in out and b"[db]" in out and b"DEFAULT" not in out
    with pytest.raises(SopsFormatError, match="delimiter"):
        ini.load(b"[s]\nbare\n")


def test_yaml_keeps_yaml12_and_timestamps_as_strings() -> None:
    branches = yaml.load(
        b"a: yes\nb: 2024-01-01\nc: 010\nd: 1.0\ne: 0x1F\nf: 08\ng: on\nh: True\ni: ~\nj: -0o17\nk: .inf\n---\nz: f\n"
    )
    assert branches[0] == Branch(
        [
            ("a", "yes"),
            ("b", "2024-01-01"),
            ("c", 8),  # Go ParseInt base 0: leading zero is octal
            ("d", 1.0),
            ("e", 31),
            ("f", 8.0),  # not octal, so Go falls through to ParseFloat
            ("g", "on"),
            ("h", True),
            ("i", None),
            ("j", -15),
            ("k", float("inf")),
        ]
    )
    assert len(branches) == 2
    assert yaml.emit([Branch([("a", "yes"), ("b", "010"), ("c", 1)])]) == b"a: 'yes'\nb: '010'\nc: 1\n"
    with pytest.raises(SopsFormatError, match="sequences are not supported"):
        yaml.load(b"- a\n")


def test_yaml_parse_error_does_not_echo_content() -> None:
    with pytest.raises(SopsFormatError) as info:
        yaml.load(b"password: [unclosed-secret-value\n")
    assert "unclosed-secret-value" not in str(info.value)


def test_json_numbers_like_go() -> None:
    branch = json.load(b'{"i": 1, "f": 1.0, "big": 18446744073709551616, "o": {"x": [1, "a"]}}')[0]
    values = dict(branch)
    assert values["i"] == 1 and isinstance(values["i"], int)
    assert isinstance(values["f"], float) and isinstance(values["big"], float)
    with pytest.raises(SopsFormatError, match="not a JSON object"):
        json.load(b"[1]")


def test_duplicate_sops_block_is_refused() -> None:
    with pytest.raises(SopsFormatError, match="sops metadata not found"):
        load_encrypted(b'{"a": 1}', Format.JSON)
    with pytest.raises(SopsFormatError, match="not a mapping"):
        load_encrypted(b'{"sops": 1}', Format.JSON)


def test_ini_explicit_default_section() -> None:
    branches = ini.load(b"[DEFAULT]\na = 1\n[s]\nb = 2\n")
    assert [name for name, _ in branches[0]] == ["DEFAULT", "s"]
    assert ini.emit(branches) == b"[DEFAULT]\na = 1\n\n[s]\nb = 2\n"
