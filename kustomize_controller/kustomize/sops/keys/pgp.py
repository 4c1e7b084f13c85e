"""OpenPGP unwrap of sops data keys with the system ``gpg``, in an isolated GNUPGHOME.

Contract:
- ``GnuPGKeyring(keys)`` holds armored private keys (from ``*.asc`` Secret values) in memory.
  On the first ``decrypt_data_key`` it creates a private temporary GNUPGHOME (mode 0700),
  imports every key there and keeps it for later calls; ``close()`` stops that home's
  ``gpg-agent`` and removes the directory. A finalizer does the same if ``close()`` is never
  called, so private keys never outlive the object on disk.
- The user's own keyring and agent are never touched; ``--batch`` and loopback pinentry mean
  gpg never prompts. Passphrase-protected keys are not supported (as upstream).
- Messages name Secret keys (``'<name>.asc'``), never key material.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Mapping

import gnupg

from kustomize_controller.kustomize.sops.errors import SopsKeyError

_GPGCONF_TIMEOUT_SECONDS = 10.0

# python-gnupg logs gpg's stderr at DEBUG; keep it quiet whatever the root level is.
logging.getLogger("gnupg").setLevel(logging.WARNING)


def gpg_binary() -> str | None:
    return shutil.which("gpg")


def _remove_home(home: str) -> None:
    gpgconf = shutil.which("gpgconf")
    if gpgconf is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [gpgconf, "--homedir", home, "--kill", "all"],
                check=False,
                capture_output=True,
                timeout=_GPGCONF_TIMEOUT_SECONDS,
            )
    shutil.rmtree(home, ignore_errors=True)


class GnuPGKeyring:
    """Private keys for sops' PGP master keys, materialised lazily in a throwaway GNUPGHOME."""

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        self._keys = dict(keys)
        self._gpg: gnupg.GPG | None = None
        self._home: str | None = None
        self._finalizer: weakref.finalize[[str], GnuPGKeyring] | None = None

    def __bool__(self) -> bool:
        return bool(self._keys)

    def _session(self) -> gnupg.GPG:
        if self._gpg is not None:
            return self._gpg
        binary = gpg_binary()
        if binary is None:
            raise SopsKeyError("failed to decrypt sops data key with PGP: no 'gpg' binary on PATH")
        home = tempfile.mkdtemp(prefix="sops-gnupg-")
        self._home = home
        self._finalizer = weakref.finalize(self, _remove_home, home)
        try:
            gpg = gnupg.GPG(gpgbinary=binary, gnupghome=home, options=["--batch", "--no-tty"])
        except (OSError, ValueError) as err:
            raise SopsKeyError(f"failed to start gpg: {type(err).__name__}") from None
        for name, armored in self._keys.items():
            result = gpg.import_keys(armored)
            if not result.count:
                raise SopsKeyError(f"failed to import '{name}' data: no OpenPGP key found")
            if not result.sec_imported:
                raise SopsKeyError(f"failed to import '{name}' data: no OpenPGP private key found")
        self._gpg = gpg
        return gpg

    def decrypt_data_key(self, enc: str, fingerprint: str) -> bytes:
        if not self._keys:
            raise SopsKeyError("failed to decrypt sops data key with PGP: no PGP private key was provided")
        gpg = self._session()
        result = gpg.decrypt(enc, extra_args=["--pinentry-mode", "loopback"])
        if not result.ok:
            status = result.status or "unknown error"
            raise SopsKeyError(f"failed to decrypt sops data key with PGP key {fingerprint}: gpg: {status}")
        return bytes(result.data)

    def close(self) -> None:
        self._gpg = None
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._home = None

    @property
    def home(self) -> str | None:
        """The temporary GNUPGHOME while it exists (tests check it is removed)."""
        return self._home if self._home and os.path.isdir(self._home) else None
