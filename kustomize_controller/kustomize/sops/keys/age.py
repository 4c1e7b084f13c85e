"""age identities from ``*.agekey`` Secret values, and the age unwrap of a sops data key.

Contract:
- ``parse_identities(text)`` reads an age identity file like sops does: one identity per line,
  empty lines and ``#`` lines ignored. ``AGE-SECRET-KEY-1…`` (X25519) is usable;
  ``AGE-SECRET-KEY-PQ-1…`` (post-quantum hybrid) and ``AGE-PLUGIN-…`` identities are recorded as
  unusable (pyrage cannot decrypt with them) so that an error can name them. As an extension a
  value holding an unencrypted OpenSSH private key (ed25519/RSA) is read as an age-ssh identity.
- ``decrypt_data_key(enc, identities)`` unwraps the armored age file sops stores in ``enc``.
- No message contains a secret key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyrage

from kustomize_controller.kustomize.sops.errors import SopsError, SopsFormatError, SopsKeyError

PQ_IDENTITY_PREFIX = "AGE-SECRET-KEY-PQ-1"
X25519_IDENTITY_PREFIX = "AGE-SECRET-KEY-1"
PLUGIN_IDENTITY_PREFIX = "AGE-PLUGIN-"
PQ_RECIPIENT_PREFIX = "age1pq1"
_SSH_PRIVATE_KEY_MARKERS = ("-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----")


@dataclass
class AgeIdentities:
    usable: list[Any] = field(default_factory=list)  # pyrage identities (x25519, ssh)
    post_quantum: int = 0
    plugins: list[str] = field(default_factory=list)  # plugin names, e.g. "yubikey"

    def extend(self, other: AgeIdentities) -> None:
        self.usable.extend(other.usable)
        self.post_quantum += other.post_quantum
        self.plugins.extend(other.plugins)


def parse_identities(text: str) -> AgeIdentities:
    """Parse an identity file; raises ``SopsFormatError`` (no key material in the message)."""
    result = AgeIdentities()
    stripped = text.strip()
    if stripped.startswith(_SSH_PRIVATE_KEY_MARKERS):
        try:
            result.usable.append(pyrage.ssh.Identity.from_buffer(stripped.encode()))
        except Exception:  # pyrage raises its own and ValueError variants
            raise SopsFormatError(
                "failed to parse and add to age identities: invalid or passphrase-protected SSH private key"
            ) from None
        return result
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(PQ_IDENTITY_PREFIX):
            result.post_quantum += 1
        elif line.startswith(PLUGIN_IDENTITY_PREFIX):
            name = line[len(PLUGIN_IDENTITY_PREFIX) :].split("-", 1)[0].lower() or "unknown"
            result.plugins.append(name)
        elif line.startswith(X25519_IDENTITY_PREFIX):
            try:
                result.usable.append(pyrage.x25519.Identity.from_str(line))
            except Exception:
                raise SopsFormatError("failed to parse and add to age identities: malformed secret key") from None
        else:
            raise SopsFormatError("failed to parse and add to age identities: unknown identity type")
    return result


def is_post_quantum(recipient: str, enc: str) -> bool:
    """True when the data key was wrapped for a post-quantum (ML-KEM-768 + X25519) recipient."""
    if recipient.startswith(PQ_RECIPIENT_PREFIX):
        return True
    body = "".join(line for line in enc.strip().splitlines() if not line.startswith("-----"))
    try:
        header = base64.b64decode(body, validate=False)
    except (binascii.Error, ValueError):
        return False
    return b"\n-> mlkem768x25519 " in header


def plugin_name(recipient: str) -> str | None:
    """The plugin of an ``age1<plugin>1…`` recipient (bech32 data never holds a ``1``)."""
    if recipient.startswith("age1") and "1" in recipient[4:]:
        return recipient[4:].split("1", 1)[0]
    return None


_RAGE_NO_MATCH = "No matching keys found"


def _age_error(rage: str, identities: int) -> str:
    """Go age's words for rage's: no identity opened a stanza (``NoIdentityMatchError`` names the one
    identity's ``ErrIncorrectIdentity`` when there was one identity)."""
    if rage != _RAGE_NO_MATCH:
        return rage
    if identities == 1:
        return "identity did not match any of the recipients: incorrect identity for recipient block"
    return "no identity matched any of the recipients"


def decrypt_data_key(enc: str, identities: Sequence[Any]) -> bytes:
    if not identities:
        raise SopsKeyError("failed to load age identities: no age identity was provided")
    try:
        return bytes(pyrage.decrypt(enc.encode(), list(identities)))
    except pyrage.DecryptError as err:
        raise SopsKeyError(f"failed to create reader for decrypting sops data key with age: "
                           f"{_age_error(str(err), len(identities))}") from None
    except SopsError:
        raise
    except Exception as err:  # malformed armor, header
        raise SopsKeyError(
            f"failed to create reader for decrypting sops data key with age: {type(err).__name__}"
        ) from None
