"""The SOPS exception tree. Every message is safe to show: none carries a key or a plaintext.

    DecryptionError (kustomize/errors.py, reason BuildFailed)
    └── SopsError                  anything that stops a document from being decrypted
        ├── SopsFormatError            the input is not a readable SOPS document (bad metadata, bad ENC value)
        ├── SopsIntegrityError         authentication failed: AES-GCM tag, MAC mismatch
        ├── SopsKeyError               no available key could recover the data key
        │   └── CredentialError        (keys/credentials.py) a key service's credentials could not be had
        └── SopsUnsupportedError       the document needs a key kind this controller cannot use
                                       (HuaweiCloud KMS, post-quantum age, age plugins)

All of them are terminal for the reconcile that hit them: retrying with the same inputs gives the
same answer. The build pipeline re-raises them as ``DecryptionError`` with its prefix
(``decryption failed for '<gvk>/<name>': …`` / ``error decrypting sources: …``).
"""

from __future__ import annotations

from kustomize_controller.kustomize.errors import DecryptionError


class SopsError(DecryptionError):
    """A SOPS document could not be decrypted."""


class SopsFormatError(SopsError):
    """The document or one of its values does not follow the SOPS format."""


class SopsIntegrityError(SopsError):
    """An authentication check failed: a value, the data key or the MAC was tampered with."""


class SopsKeyError(SopsError):
    """None of the available keys could recover the data key."""


class SopsUnsupportedError(SopsError):
    """The document can only be decrypted with a key kind this controller does not support."""
