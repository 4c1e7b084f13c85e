"""OpenPGP unwrap of sops data keys with the system ``gpg``, in an isolated GNUPGHOME.

Contract:
- ``GnuPGKeyring(keys)`` holds armored private keys (from ``*.asc`` Secret values) in memory.
  On the first ``decrypt_data_key`` it creates a private temporary GNUPGHOME (mode 0700),
  imports every key there and keeps it for later calls; ``close()`` stops that home's
  ``gpg-agent`` and removes the directory. A finalizer does the same if ``close()`` is never
  called, so private keys never outlive the object on disk.
- The user's own keyring and agent are never touched; ``--batch`` and loopback pinentry mean
  gpg never prompts, and every gpg run has a timeout. Passphrase-protected keys are not
  supported (as upstream): they fail at once.
- gpg is run directly rather than through python-gnupg: python-gnupg logs the decrypted output
  at DEBUG level (here: the data key) and has no timeout. Each run goes through
  :func:`~kustomize_controller.runtime.child.run_child` on a private event loop of the calling
  (worker) thread, so the child is killed and reaped on every way out; ``close()`` stops a run still
  in flight (a reconcile cancelled during its decryption) and waits for its child to be reaped before it
  removes the home, so no gpg outlives the reconcile that started it.
- Messages name Secret keys (``'<name>.asc'``) and gpg status keywords, never key material.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from kustomize_controller.kustomize.sops.errors import SopsKeyError
from kustomize_controller.runtime.child import KILL_WAIT, ChildResult, ChildTimedOut, run_child
from kustomize_controller.runtime.clock import RealClock

GPG_TIMEOUT_SECONDS = 30.0
_MAX_GPG_OUTPUT = 1 << 20  # a data key is 32 bytes; an import writes nothing to stdout
_STATUS_PREFIX = b"[GNUPG:] "
# gpg status keywords that explain a failed decryption, most specific first
_FAILURE_KEYWORDS = (
    "NO_SECKEY",
    "MISSING_PASSPHRASE",
    "BAD_PASSPHRASE",
    "KEYEXPIRED",
    "NODATA",
    "BADARMOR",
    "DECRYPTION_FAILED",
    "FAILURE",
    "ERROR",
)


def gpg_binary() -> str | None:
    return shutil.which("gpg")


def _statuses(stream: bytes) -> list[str]:
    return [
        line[len(_STATUS_PREFIX) :].decode("ascii", errors="replace")
        for line in stream.splitlines()
        if line.startswith(_STATUS_PREFIX)
    ]


def _remove_home(home: str) -> None:
    gpgconf = shutil.which("gpgconf")
    if gpgconf is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [gpgconf, "--homedir", home, "--kill", "all"],
                check=False,
                capture_output=True,
                timeout=GPG_TIMEOUT_SECONDS,
            )
    shutil.rmtree(home, ignore_errors=True)


class GnuPGKeyring:
    """Private keys for sops' PGP master keys, materialised lazily in a throwaway GNUPGHOME."""

    def __init__(self, keys: Mapping[str, bytes], *, timeout: float = GPG_TIMEOUT_SECONDS) -> None:
        self._keys = dict(keys)
        self._timeout = timeout
        self._binary: str | None = None
        self._home: str | None = None
        self._finalizer: weakref.finalize[[str], GnuPGKeyring] | None = None
        self._lock = threading.Condition()
        self._running: dict[asyncio.Task[ChildResult], asyncio.AbstractEventLoop] = {}
        self._closed = False

    def __bool__(self) -> bool:
        return bool(self._keys)

    def _gpg(self, args: Sequence[str], stdin: bytes) -> ChildResult:
        assert self._binary is not None and self._home is not None
        argv = [self._binary, "--homedir", self._home, "--batch", "--no-tty", "--quiet", "--status-fd", "2", *args]
        env = {"PATH": os.environ.get("PATH", ""), "GNUPGHOME": self._home, "HOME": self._home, "LC_ALL": "C"}
        run = self._owned(argv, env, stdin)
        try:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # a worker thread (the pipeline's way): a private loop here
                return asyncio.run(run)
            with ThreadPoolExecutor(1) as pool:  # called on a loop's own thread: it waits, as for any sync call
                return pool.submit(asyncio.run, run).result()
        except ChildTimedOut:
            raise SopsKeyError(f"gpg did not finish within {self._timeout:g}s") from None
        except asyncio.CancelledError:
            raise SopsKeyError("gpg was stopped: the keyring was closed") from None
        except OSError as err:
            raise SopsKeyError(f"failed to run gpg: {err.strerror}") from None

    async def _owned(self, argv: list[str], env: dict[str, str], stdin: bytes) -> ChildResult:
        """Run gpg, registered so that :meth:`close` can stop it."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise asyncio.CancelledError
            self._running[task] = loop
        try:
            return await run_child(
                argv, clock=RealClock(), time_limit=self._timeout, env=env, input=stdin, max_output=_MAX_GPG_OUTPUT
            )
        finally:
            with self._lock:
                del self._running[task]
                self._lock.notify_all()

    def _ensure_home(self) -> None:
        if self._closed:  # a thread its reconcile left behind: no new home, no new gpg
            raise SopsKeyError("gpg was stopped: the keyring was closed")
        if self._home is not None:
            return
        binary = gpg_binary()
        if binary is None:
            raise SopsKeyError("failed to decrypt sops data key with PGP: no 'gpg' binary on PATH")
        self._binary = binary
        home = tempfile.mkdtemp(prefix="sops-gnupg-")
        self._home = home
        self._finalizer = weakref.finalize(self, _remove_home, home)
        for name, armored in self._keys.items():
            result = self._gpg(["--import"], armored)
            statuses = _statuses(result.stderr)
            if not any(s.startswith("IMPORT_OK") for s in statuses):
                raise SopsKeyError(f"failed to import '{name}' data: no OpenPGP key found")
            # IMPORT_RES <count> <no_user_id> <imported> <imported_rsa> <unchanged> <n_uids> <n_subk>
            #            <n_sigs> <n_revoc> <sec_read> <sec_imported> <sec_dups> …
            res = next((s.split() for s in statuses if s.startswith("IMPORT_RES")), [])
            if len(res) < 11 or int(res[10]) == 0:
                raise SopsKeyError(f"failed to import '{name}' data: no OpenPGP private key found")

    def decrypt_data_key(self, enc: str, fingerprint: str) -> bytes:
        if not self._keys:
            raise SopsKeyError("failed to decrypt sops data key with PGP: no PGP private key was provided")
        self._ensure_home()
        result = self._gpg(["--pinentry-mode", "loopback", "--decrypt"], enc.encode())
        if result.returncode != 0:
            keywords = [s.split(" ", 1)[0] for s in _statuses(result.stderr)]
            reason = next((k for k in _FAILURE_KEYWORDS if k in keywords), f"exit status {result.returncode}")
            raise SopsKeyError(f"failed to decrypt sops data key with PGP key {fingerprint}: gpg: {reason}")
        return result.stdout

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for task, loop in self._running.items():
                with contextlib.suppress(RuntimeError):  # that loop is closed: its run is over
                    loop.call_soon_threadsafe(task.cancel)
            # Killed, a gpg is reaped at once; the bound only guards against a stuck one.
            self._lock.wait_for(lambda: not self._running, timeout=KILL_WAIT)
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._home = None

    @property
    def home(self) -> str | None:
        """The temporary GNUPGHOME while it exists (tests check it is removed)."""
        return self._home if self._home and os.path.isdir(self._home) else None
