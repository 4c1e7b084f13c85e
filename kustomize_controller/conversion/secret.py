"""The Secret that holds the webhook's CA and serving certificate, shared by every replica.

Contract:

- ``ensure_certificate`` reads ``<namespace>/<name>`` and returns the certificates to serve with,
  creating the Secret, or updating it (optimistic concurrency on ``resourceVersion``) when
  ``certs.renew`` says so. Two replicas racing get the same result: the loser of a create or update
  re-reads and serves what the winner wrote. Every replica therefore serves a certificate signed by
  a CA in the one ``caBundle`` the CRD carries.
- The Secret is ``kubernetes.io/tls`` (``tls.crt``, ``tls.key``) plus ``ca.crt`` and ``ca.key``, so a
  user can inspect it with the usual tools.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from kustomize_controller.conversion.certs import CertBundle, renew
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import AlreadyExistsError, ConflictError, NotFoundError

__all__ = ["ensure_certificate"]

_ATTEMPTS = 3


async def ensure_certificate(client: KubeClient, *, namespace: str, name: str, hosts: list[str],
                             now: datetime) -> CertBundle:
    last: Exception | None = None
    for _ in range(_ATTEMPTS):
        try:
            secret: dict[str, Any] | None = await client.get("v1", "Secret", name, namespace)
        except NotFoundError:
            secret = None
        current = _bundle_of(secret)
        wanted = renew(current, hosts=hosts, now=now)
        if wanted is None:
            assert current is not None
            return current
        body = _secret(namespace, name, wanted, secret)
        try:
            if secret is None:
                await client.create(body)
            else:
                await client.update(body)
        except (AlreadyExistsError, ConflictError) as err:
            last = err  # another replica wrote first: read again and use (or renew) what it wrote
            continue
        return wanted
    raise RuntimeError(f"Secret/{namespace}/{name}: could not write the webhook certificate: {last}") from last


def _bundle_of(secret: dict[str, Any] | None) -> CertBundle | None:
    if secret is None:
        return None
    try:
        data = {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}
    except ValueError:
        return None
    return CertBundle.from_secret_data(data)


def _secret(namespace: str, name: str, bundle: CertBundle, existing: dict[str, Any] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": {"app.kubernetes.io/component": "conversion-webhook"}}
    if existing is not None:
        metadata = {**existing["metadata"], "labels": {**(existing["metadata"].get("labels") or {}),
                                                       **metadata["labels"]}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": (existing or {}).get("type", "kubernetes.io/tls"),  # the type cannot change
        "data": {key: base64.b64encode(value).decode() for key, value in bundle.as_secret_data().items()},
    }
