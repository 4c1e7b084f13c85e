"""The conversion webhook's serving certificate: a private CA and a leaf, issued and rotated by us.

Pure (no I/O): ``renew(current, hosts=..., now=...)`` says what the Secret should hold now; the caller
(``secret.py``) reads and writes it.

Contract:

- The CA is valid ``CA_LIFETIME`` and replaced once less than ``CA_RENEW_BEFORE`` is left; the serving
  certificate is valid ``CERT_LIFETIME`` and re-issued once less than ``CERT_RENEW_BEFORE`` is left, when
  it does not cover every host asked for, or when it was not signed by the current CA.
- Rotating the CA never breaks a running API server: the bundle (``ca.crt``, what goes into the
  CRD's ``caBundle``) holds the new CA *and* the old one until the old one expires, so a serving
  certificate of either is trusted while replicas pick the new one up.
- A re-issued certificate covers the union of the hosts asked for and those it covered before, so
  two replicas asking for different hosts (one in the cluster, one with ``--webhook-url``) do not
  re-issue in turn forever.
- ``renew`` returns ``None`` when nothing has to change (the common case: no write).

Not promised: revocation; keys other than EC P-256.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = [
    "CA_LIFETIME",
    "CA_RENEW_BEFORE",
    "CERT_LIFETIME",
    "CERT_RENEW_BEFORE",
    "CertBundle",
    "renew",
]

CA_LIFETIME: Final = datetime.timedelta(days=5 * 365)
CA_RENEW_BEFORE: Final = datetime.timedelta(days=365)
CERT_LIFETIME: Final = datetime.timedelta(days=365)
CERT_RENEW_BEFORE: Final = datetime.timedelta(days=120)
# clocks of the API server and of this process may differ a little
_BACKDATE: Final = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class CertBundle:
    """PEM texts as the Secret holds them (``ca.crt`` may hold several CAs, newest first)."""

    ca_bundle: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def as_secret_data(self) -> dict[str, bytes]:
        return {"ca.crt": self.ca_bundle, "ca.key": self.ca_key, "tls.crt": self.cert, "tls.key": self.key}

    @classmethod
    def from_secret_data(cls, data: dict[str, bytes]) -> CertBundle | None:
        try:
            return cls(ca_bundle=data["ca.crt"], ca_key=data["ca.key"], cert=data["tls.crt"], key=data["tls.key"])
        except KeyError:
            return None


def renew(current: CertBundle | None, *, hosts: list[str], now: datetime.datetime) -> CertBundle | None:
    """What the Secret must hold at ``now`` to serve ``hosts``; ``None`` when ``current`` will do."""
    parsed = _parse(current)
    if parsed is None:
        ca, ca_key = _new_ca(now)
        return _issue(ca, ca_key, bundle=[ca], hosts=hosts, now=now)
    ca, ca_key, bundle, cert = parsed
    ca_rotated = _expires_within(ca, now, CA_RENEW_BEFORE)
    if ca_rotated:
        old = [c for c in bundle if c.not_valid_after_utc > now]
        ca, ca_key = _new_ca(now)
        bundle = [ca, *old]
    else:
        bundle = [c for c in bundle if c.not_valid_after_utc > now]  # drop CAs that expired
    covered = _hosts_of(cert)
    if (not ca_rotated and set(hosts) <= covered and not _expires_within(cert, now, CERT_RENEW_BEFORE)
            and _signed_by(cert, ca) and len(bundle) == len(_load_all(current.ca_bundle if current else b""))):
        return None
    return _issue(ca, ca_key, bundle=bundle, hosts=sorted(covered | set(hosts)), now=now)


def _parse(current: CertBundle | None
           ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, list[x509.Certificate], x509.Certificate] | None:
    if current is None:
        return None
    try:
        bundle = _load_all(current.ca_bundle)
        cert = x509.load_pem_x509_certificate(current.cert)
        ca_key = serialization.load_pem_private_key(current.ca_key, password=None)
        serialization.load_pem_private_key(current.key, password=None)
    except ValueError:
        return None  # damaged: start over with a new CA
    if not bundle or not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        return None
    return bundle[0], ca_key, bundle, cert


def _load_all(pem: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem) if pem else []
    except ValueError:
        return []


def _expires_within(cert: x509.Certificate, now: datetime.datetime, window: datetime.timedelta) -> bool:
    return cert.not_valid_after_utc - now < window


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _hosts_of(cert: x509.Certificate) -> set[str]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(n) for n in names.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in names.get_values_for_type(x509.IPAddress)}


def _new_ca(now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         f"kustomize-controller-webhook-ca-{now:%Y%m%d%H%M%S}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, *, bundle: list[x509.Certificate],
           hosts: list[str], now: datetime.datetime) -> CertBundle:
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    not_after = min(now + CERT_LIFETIME, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "webhook")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return CertBundle(
        ca_bundle=b"".join(c.public_bytes(pem) for c in bundle),
        ca_key=ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
