"""The webhook certificate: issued once, kept while good, re-issued and rotated in time, never flapping."""

from __future__ import annotations

import contextlib
import datetime
import ssl
import tempfile
from pathlib import Path

from cryptography import x509

from kustomize_controller.conversion.certs import (
    CA_LIFETIME,
    CA_RENEW_BEFORE,
    CERT_LIFETIME,
    CERT_RENEW_BEFORE,
    CertBundle,
    renew,
)

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
HOSTS = ["kustomize-controller-webhook.flux-system.svc"]


def _cas(bundle: CertBundle) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle.ca_bundle)


def _cert(bundle: CertBundle) -> x509.Certificate:
    return x509.load_pem_x509_certificate(bundle.cert)


def _sans(bundle: CertBundle) -> set[str]:
    ext = _cert(bundle).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(v) for v in ext.get_values_for_type(x509.DNSName)} | {
        str(v) for v in ext.get_values_for_type(x509.IPAddress)}


def _trusted(bundle: CertBundle, host: str) -> None:
    """A TLS client trusting only the bundle accepts the serving certificate for ``host``."""
    client = ssl.create_default_context(cadata=bundle.ca_bundle.decode())
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp, "c"), Path(tmp, "k")
        cert.write_bytes(bundle.cert)
        key.write_bytes(bundle.key)
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(cert, key)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(incoming, outgoing, server_hostname=host)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (c, s):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(outgoing.read())
        incoming.write(s_out.read())
    c.do_handshake()  # raises SSLCertVerificationError if not trusted


def test_first_issue_serves_the_hosts_and_is_trusted_by_the_bundle() -> None:
    bundle = renew(None, hosts=[*HOSTS, "127.0.0.1"], now=NOW)
    assert bundle is not None
    assert _sans(bundle) == {*HOSTS, "127.0.0.1"}
    _trusted(bundle, HOSTS[0])
    _trusted(bundle, "127.0.0.1")


def test_a_good_certificate_is_kept() -> None:
    bundle = renew(None, hosts=HOSTS, now=NOW)
    assert bundle is not None
    assert renew(bundle, hosts=HOSTS, now=NOW + datetime.timedelta(days=30)) is None


def test_serving_certificate_is_reissued_before_it_expires_under_the_same_ca() -> None:
    bundle = renew(None, hosts=HOSTS, now=NOW)
    assert bundle is not None
    later = NOW + CERT_LIFETIME - CERT_RENEW_BEFORE + datetime.timedelta(days=1)
    renewed = renew(bundle, hosts=HOSTS, now=later)
    assert renewed is not None
    assert renewed.ca_bundle == bundle.ca_bundle  # the CRD's caBundle does not change
    assert _cert(renewed).not_valid_after_utc > _cert(bundle).not_valid_after_utc


def test_a_new_host_reissues_covering_old_and_new_hosts() -> None:
    bundle = renew(None, hosts=HOSTS, now=NOW)
    assert bundle is not None
    renewed = renew(bundle, hosts=["127.0.0.1"], now=NOW)
    assert renewed is not None and _sans(renewed) == {*HOSTS, "127.0.0.1"}
    # and the replica asking for the first hosts again is satisfied: no flapping
    assert renew(renewed, hosts=HOSTS, now=NOW) is None


def test_ca_rotation_keeps_the_old_ca_in_the_bundle_until_it_expires() -> None:
    bundle = renew(None, hosts=HOSTS, now=NOW)
    assert bundle is not None
    near_end = NOW + CA_LIFETIME - CA_RENEW_BEFORE + datetime.timedelta(days=1)
    rotated = renew(bundle, hosts=HOSTS, now=near_end)
    assert rotated is not None
    cas = _cas(rotated)
    assert len(cas) == 2 and cas[1] == _cas(bundle)[0]
    _cert(rotated).verify_directly_issued_by(cas[0])  # (a TLS check would run at today's date)
    assert renew(rotated, hosts=HOSTS, now=near_end) is None
    # once the old CA has expired it leaves the bundle
    after = _cas(bundle)[0].not_valid_after_utc + datetime.timedelta(days=1)
    pruned = renew(rotated, hosts=HOSTS, now=after)
    assert pruned is not None and len(_cas(pruned)) == 1


def test_a_damaged_secret_starts_over() -> None:
    damaged = CertBundle(ca_bundle=b"junk", ca_key=b"junk", cert=b"junk", key=b"junk")
    fresh = renew(damaged, hosts=HOSTS, now=NOW)
    assert fresh is not None
    _trusted(fresh, HOSTS[0])


def test_secret_data_round_trip() -> None:
    bundle = renew(None, hosts=HOSTS, now=NOW)
    assert bundle is not None
    assert CertBundle.from_secret_data(bundle.as_secret_data()) == bundle
    assert CertBundle.from_secret_data({"tls.crt": b""}) is None
