"""OpenPGP specifics: isolation of the temporary GNUPGHOME, keys gpg cannot use."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kustomize_controller.kustomize.sops import SopsDecryptor, SopsKeyError

from .conftest import requires_gpg
from .sopsgen import fixture, flat

pytestmark = requires_gpg


def _gpg(home: Path, *args: str, data: bytes | None = None) -> bytes:
    result = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", *args],
        input=data,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return result.stdout


@pytest.fixture
def protected_key(tmp_path: Path) -> tuple[bytes, str]:
    """A passphrase-protected key pair; returns (armored secret key, armored PGP message)."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    try:
        _gpg(
            home, "--passphrase", "pw", "--quick-gen-key", "Test <t@example.com>", "future-default", "default", "never"
        )
        secret = _gpg(home, "--passphrase", "pw", "--armor", "--export-secret-keys", "t@example.com")
        message = _gpg(
            home, "--armor", "--trust-model", "always", "--encrypt", "-r", "t@example.com", data=os.urandom(32)
        )
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, timeout=30)
    return secret, message.decode()


def test_passphrase_protected_key_fails_fast_without_prompt(protected_key: tuple[bytes, str]) -> None:
    secret, message = protected_key
    doc = yaml.safe_load(fixture("algorithms/pgp.yaml"))
    doc["sops"]["pgp"][0]["enc"] = message
    with SopsDecryptor.from_secret_data({"p.asc": secret}) as dec, pytest.raises(SopsKeyError) as info:
        dec.decrypt_object(doc)
    assert "failed to decrypt sops data key with PGP key" in str(info.value)
    assert "PRIVATE KEY" not in str(info.value)


def test_public_key_only_is_a_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    try:
        _gpg(home, "--import", data=fixture("keys/pgp.asc"))
        public = _gpg(home, "--armor", "--export", "35C1A64CD7FC0AB6EB66756B2445463C3234ECE1")
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False, timeout=30)
    assert b"PUBLIC KEY BLOCK" in public
    with SopsDecryptor.from_secret_data({"pub.asc": public}) as dec, pytest.raises(SopsKeyError) as info:
        dec.decrypt_object(yaml.safe_load(fixture("algorithms/pgp.yaml")))
    assert "failed to import 'pub.asc' data: no OpenPGP private key found" in flat(str(info.value))


def test_garbage_key_is_a_clear_error() -> None:
    with SopsDecryptor.from_secret_data({"pub.asc": b"not a key at all"}) as dec, pytest.raises(SopsKeyError) as info:
        dec.decrypt_object(yaml.safe_load(fixture("algorithms/pgp.yaml")))
    assert "failed to import 'pub.asc' data: no OpenPGP key found" in str(info.value)


def test_gnupg_home_is_private_and_removed_on_close() -> None:
    dec = SopsDecryptor.from_secret_data({"pgp.asc": fixture("keys/pgp.asc")})
    assert dec.gnupg_home is None  # created lazily
    dec.decrypt_object(yaml.safe_load(fixture("algorithms/pgp.yaml")))
    home = dec.gnupg_home
    assert home is not None and os.stat(home).st_mode & 0o777 == 0o700
    assert home != os.environ.get("GNUPGHOME")
    dec.close()
    assert not os.path.exists(home)
    dec.close()  # idempotent


def test_gnupg_home_is_removed_when_the_decryptor_is_dropped() -> None:
    import gc

    dec = SopsDecryptor.from_secret_data({"pgp.asc": fixture("keys/pgp.asc")})
    dec.decrypt_object(yaml.safe_load(fixture("algorithms/pgp.yaml")))
    home = dec.gnupg_home
    assert home is not None
    del dec
    gc.collect()
    assert not os.path.exists(home)


def test_gpg_missing_from_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with (
        SopsDecryptor.from_secret_data({"pgp.asc": fixture("keys/pgp.asc")}) as dec,
        pytest.raises(SopsKeyError) as info,
    ):
        dec.decrypt_object(yaml.safe_load(fixture("algorithms/pgp.yaml")))
    assert "no 'gpg' binary on PATH" in flat(str(info.value))


def test_a_hanging_gpg_is_stopped_by_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kustomize_controller.kustomize.sops.keys.pgp import GnuPGKeyring

    fake = tmp_path / "bin" / "gpg"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ.get('PATH', '')}")
    ring = GnuPGKeyring({"k.asc": fixture("keys/pgp.asc")}, timeout=0.5)
    try:
        with pytest.raises(SopsKeyError, match=r"gpg did not finish within 0\.5s"):
            ring.decrypt_data_key("-----BEGIN PGP MESSAGE-----", "FP")
    finally:
        ring.close()


async def test_closing_the_keyring_stops_a_gpg_still_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconcile cancelled during its decryption closes its keyring while a worker thread still waits
    for gpg: close() kills and reaps that gpg before it removes the home, and no later call of the
    abandoned thread starts another."""
    import asyncio

    from kustomize_controller.kustomize.sops.keys.pgp import GnuPGKeyring
    from tests.child_leaks import assert_nothing_left, children

    started = tmp_path / "started"
    fake = tmp_path / "bin" / "gpg"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ.get('PATH', '')}")
    before = children()
    ring = GnuPGKeyring({"k.asc": fixture("keys/pgp.asc")})
    work = asyncio.ensure_future(asyncio.to_thread(ring.decrypt_data_key, "-----BEGIN PGP MESSAGE-----", "FP"))
    while not started.exists():
        await asyncio.wait([work], timeout=0.01)
    home = ring.home
    ring.close()
    assert children() - before == set()
    assert home is not None and not Path(home).exists()  # noqa: ASYNC240
    with pytest.raises(SopsKeyError, match="gpg was stopped: the keyring was closed"):
        await work
    with pytest.raises(SopsKeyError, match="gpg was stopped"):
        await asyncio.to_thread(ring.decrypt_data_key, "-----BEGIN PGP MESSAGE-----", "FP")
    assert ring.home is None
    assert_nothing_left(before)
