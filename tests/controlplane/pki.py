"""The certificates and keys a throw-away control plane needs, made fresh for every start.

- a CA that signs the API server's serving certificate (``127.0.0.1``, ``localhost`` and the in-cluster
  names) and the controller manager's client certificate, and that the API server trusts for client
  certificates (``--client-ca-file``);
- the front proxy's client certificate (``--proxy-client-cert-file``; ``--requestheader-client-ca-file`` is
  the same CA, limited to that name), as a kubeadm cluster has for aggregated APIs;
- the service-account signing key pair (``--service-account-signing-key-file`` / ``--service-account-key-file``
  on the API server, ``--service-account-private-key-file`` on the controller manager): TokenRequest works;
- a static bearer token for the admin (group ``system:masters``), as the embedded server hands out: tests and
  tools that want a token get one; and one for each of ``users`` (also ``system:masters``), so that two
  clients with the same powers are told apart in the audit log (the bench's side-by-side runs).

Everything is written under one directory with owner-only permissions; nothing here is secret beyond the
life of the control plane.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ADMIN_USER = "kube-admin"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
FRONT_PROXY_USER = "front-proxy-client"
_VALID = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    kcm_cert: Path
    kcm_key: Path
    proxy_cert: Path  # the front proxy's client certificate (aggregated APIs)
    proxy_key: Path
    sa_key: Path  # private, PEM (PKCS#8)
    sa_pub: Path
    token_file: Path  # --token-auth-file
    admin_token: str
    user_tokens: dict[str, str]  # the extra users' static tokens (``make_pki(users=...)``)

    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()


def _name(common: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _sign(subject: x509.Name, public: ec.EllipticCurvePublicKey, *, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, usage: list[x509.ObjectIdentifier],
          sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usage), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path, *, service_ip: str = "10.0.0.1", users: tuple[str, ...] = ()) -> Pki:
    """Write a fresh CA, serving and client certificates, the service-account keys and a token file (the
    admin's token and one for each of ``users``, all of them ``system:masters``)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kustomize-controller-test-ca")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALID)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM

    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"), x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"), x509.DNSName("kubernetes.default.svc.cluster.local"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address(service_ip)),
    ]
    serving = _sign(_name("kube-apiserver"), serving_key.public_key(), issuer=ca_name, issuer_key=ca_key,
                    usage=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans)
    kcm_key = ec.generate_private_key(ec.SECP256R1())
    kcm = _sign(_name(CONTROLLER_MANAGER_USER), kcm_key.public_key(), issuer=ca_name, issuer_key=ca_key,
                usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    proxy_key = ec.generate_private_key(ec.SECP256R1())
    proxy = _sign(_name(FRONT_PROXY_USER), proxy_key.public_key(), issuer=ca_name, issuer_key=ca_key,
                  usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = secrets.token_urlsafe(32)
    user_tokens = {user: secrets.token_urlsafe(32) for user in users if user != ADMIN_USER}
    tokens = "".join(f'{secret},{user},{user}-uid,"system:masters"\n' for user, secret in
                     {ADMIN_USER: token, **user_tokens}.items())
    return Pki(
        directory=directory,
        ca_cert=_write(directory / "ca.crt", ca.public_bytes(pem)),
        serving_cert=_write(directory / "apiserver.crt", serving.public_bytes(pem) + ca.public_bytes(pem)),
        serving_key=_write(directory / "apiserver.key", _pem_key(serving_key)),
        kcm_cert=_write(directory / "kcm.crt", kcm.public_bytes(pem)),
        kcm_key=_write(directory / "kcm.key", _pem_key(kcm_key)),
        proxy_cert=_write(directory / "front-proxy.crt", proxy.public_bytes(pem)),
        proxy_key=_write(directory / "front-proxy.key", _pem_key(proxy_key)),
        sa_key=_write(directory / "sa.key", _pem_key(sa_key)),
        sa_pub=_write(directory / "sa.pub", sa_key.public_key().public_bytes(
            pem, serialization.PublicFormat.SubjectPublicKeyInfo)),
        token_file=_write(directory / "tokens.csv", tokens.encode()),
        admin_token=token,
        user_tokens=user_tokens,
    )
