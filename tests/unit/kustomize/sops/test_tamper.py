"""Property: any change to an encrypted value's ciphertext, IV or tag, or to the stored MAC, is
detected (never silently decrypted to something else)."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kustomize_controller.kustomize.sops import SopsError
from kustomize_controller.kustomize.sops.document import decrypt_bytes
from kustomize_controller.kustomize.sops.formats import Format
from kustomize_controller.kustomize.sops.keys.keyring import KeyRing

from .sopsgen import fixture

ENC_RE = re.compile(rb"ENC\[AES256_GCM,data:([^,]*),iv:([^,]*),tag:([^,]*),type:[a-z]+\]")
DOCS = {
    "algorithms/age.yaml": Format.YAML,
    "envs/env.env": Format.DOTENV,
    "files/file.txt": Format.JSON,
}
_RING = KeyRing.from_secret_data({"age.agekey": fixture("keys/age.txt")})


def _values(data: bytes) -> list[re.Match[bytes]]:
    return list(ENC_RE.finditer(data))


@st.composite
def tampered_documents(draw: st.DrawFn) -> tuple[str, bytes]:
    rel = draw(st.sampled_from(sorted(DOCS)))
    data = fixture(rel)
    matches = _values(data)
    match = draw(st.sampled_from(matches))  # the last one is the MAC
    part = draw(st.sampled_from([1, 2, 3]))  # data, iv, tag
    raw = bytearray(base64.b64decode(match.group(part)))
    mode = draw(st.sampled_from(["flip", "truncate", "extend"]))
    if mode == "flip" and raw:
        index = draw(st.integers(0, len(raw) - 1))
        raw[index] ^= draw(st.integers(1, 255))
    elif mode == "truncate" and raw:
        del raw[draw(st.integers(0, len(raw) - 1))]
    else:
        raw.append(draw(st.integers(0, 255)))
    start, end = match.span(part)
    return rel, data[:start] + base64.b64encode(bytes(raw)) + data[end:]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tampered_documents())
def test_tampering_is_always_detected(case: tuple[str, bytes]) -> None:
    rel, data = case
    assert data != fixture(rel)
    with pytest.raises(SopsError):
        decrypt_bytes(data, DOCS[rel], DOCS[rel], keyring=_RING)


def test_the_mac_is_the_last_value_of_each_fixture() -> None:
    for rel in DOCS:
        data = fixture(rel)
        last = _values(data)[-1].group(0)
        assert (b"mac: " + last) in data or (b'"mac": "' + last) in data or (b"sops_mac=" + last) in data
