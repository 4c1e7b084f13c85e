"""Test support for the fake clouds: the tokens a fake issues, and a self-signed certificate (the loopback
server itself is ``tests.loopback``)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


@dataclass
class Issuer:
    """The bearer tokens a fake hands out (``<prefix>-<n>``), to check what comes back."""

    tokens: set[str] = field(default_factory=set)

    def issue(self, prefix: str) -> str:
        token = f"{prefix}-{len(self.tokens)}"
        self.tokens.add(token)
        return token


def self_signed(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, *, ip: str | None = None) -> x509.Certificate:
    """A one-day self-signed certificate (a CA, with ``ip`` as its subject alternative name)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ip or "sops")])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    )
    if ip:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), False)
    return builder.sign(key, hashes.SHA256())
