"""Point the Kustomization CRD's conversion at this controller: ``caBundle`` and, out of cluster, ``url``.

Contract:

- ``conversion_patch(crd, ca_bundle=..., url=...)`` is pure: the JSON merge patch that makes
  ``spec.conversion`` a Webhook conversion (ConversionReview v1) trusting ``ca_bundle`` and reaching
  ``url`` (when given; it replaces a ``service`` reference) or the ``service`` the manifests declare;
  ``None`` when the CRD already says exactly that, or when it serves v1 alone (upstream's CRD: no
  conversion is needed, and we leave a CRD we did not ship alone).
- ``ensure_crd`` GETs the CRD and PATCHes it when needed; it is idempotent and cheap when nothing
  changed (one GET), so the webhook runs it periodically and repairs a CRD re-applied without
  ``caBundle``.
- ``service_hosts(crd)`` are the DNS names a serving certificate needs for the CRD's ``service``.

Not promised: the ``v1beta1`` ConversionReview (kube-apiserver has sent v1 since 1.16 when asked).
"""

from __future__ import annotations

import base64
from typing import Any, Final

from kustomize_controller.api.crdgen import CONVERSION_PATH, CRD_NAME
from kustomize_controller.kube.client import KubeClient

__all__ = ["conversion_patch", "ensure_crd", "service_hosts"]

_CRD_API_VERSION: Final = "apiextensions.k8s.io/v1"


def service_hosts(crd: dict[str, Any]) -> list[str]:
    service = (((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig", {}
                                                                                         ).get("service")
    if not isinstance(service, dict) or not service.get("name") or not service.get("namespace"):
        return []
    name, namespace = service["name"], service["namespace"]
    return [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]


def conversion_patch(crd: dict[str, Any], *, ca_bundle: bytes, url: str) -> dict[str, Any] | None:
    spec = crd.get("spec") or {}
    if len(spec.get("versions") or []) < 2:
        return None
    current = spec.get("conversion") or {}
    webhook = current.get("webhook") or {}
    client_config = dict(webhook.get("clientConfig") or {})
    wanted = dict(client_config)
    wanted["caBundle"] = base64.b64encode(ca_bundle).decode()
    if url:
        wanted.pop("service", None)
        wanted["url"] = url
    elif "service" not in wanted:
        return None  # neither a URL nor a Service to point at: nothing sensible to write
    if (current.get("strategy") == "Webhook" and client_config == wanted
            and webhook.get("conversionReviewVersions") == ["v1"]):
        return None
    patched_config: dict[str, Any] = dict(wanted)
    for key in client_config:
        if key not in wanted:
            patched_config[key] = None  # merge patch: remove
    return {"spec": {"conversion": {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": patched_config}}}}


async def get_crd(client: KubeClient) -> dict[str, Any]:
    return await client.get(_CRD_API_VERSION, "CustomResourceDefinition", CRD_NAME)


async def ensure_crd(client: KubeClient, *, crd: dict[str, Any], ca_bundle: bytes, url: str) -> bool:
    """Patch ``crd`` (as just read) if its conversion is not what it should be; True when patched."""
    patch = conversion_patch(crd, ca_bundle=ca_bundle, url=url)
    if patch is None:
        return False
    # the resourceVersion makes the patch fail rather than overwrite a CRD changed since the GET
    patch["metadata"] = {"resourceVersion": crd["metadata"]["resourceVersion"]}
    await client.patch(_CRD_API_VERSION, "CustomResourceDefinition", CRD_NAME, None, patch, patch_type="merge")
    return True


def default_url(host: str, port: int) -> str:
    """``https://host:port/convert`` (IPv6 literals bracketed)."""
    shown = f"[{host}]" if ":" in host else host
    return f"https://{shown}:{port}{CONVERSION_PATH}"
