"""Point the Kustomization CRD's conversion at this controller: the controller owns ``spec.conversion``.

Why the controller, not the manifests: the API server wants exactly one of ``clientConfig.url`` (out of
cluster, ``--webhook-url``) and ``clientConfig.service`` (in cluster). Server-side apply never removes a
field its applier does not own, so if ``manifests/crd`` declared ``service`` and the controller had
written ``url``, every re-apply of the manifests would put ``service`` back beside ``url`` and be
refused ("exactly one of url or service is required"). The manifests' CRD therefore declares no
conversion (as upstream's), and the controller writes all of it, so a re-apply — forced or not, by
kubectl or by a Flux Kustomization — leaves it as the controller wrote it.

Contract:

- ``conversion_patch(crd, ca_bundle=..., target=...)`` is pure: the JSON merge patch that makes
  ``spec.conversion`` a Webhook conversion (ConversionReview v1) reaching ``target`` (``{"url": ...}``
  or ``{"service": ...}``; the other member is removed in the same write, so the CRD is valid before
  and after) and trusting ``ca_bundle`` (``None``: leave ``caBundle`` to someone else, e.g.
  cert-manager's CA injector). ``target=None`` keeps the CRD's current url or service (a stand-by in
  url mode) and only repairs the rest. ``None`` when the CRD already says exactly that, when there is
  nothing to point at, or when the CRD serves v1 alone (upstream's: nothing to convert, and we leave
  a CRD we did not ship alone).
- ``ensure_crd`` PATCHes the CRD as just read when needed, as field manager ``FIELD_MANAGER``, with a
  merge patch (an Update, which removes the other member whoever applied it), then server-side
  applies the result once under the same manager so that we co-own it (``claimed``): an applier that
  stops declaring those fields cannot remove them. The name must not start with
  ``kustomize-controller`` or ``kubectl``: Flux (and our apply) take over such managers' Update
  fields when a Kustomization applies this CRD, and would then drop them at its next apply.
- ``service_reference``/``service_hosts``: the in-cluster target and the DNS names its certificate needs.

Not promised: the ``v1beta1`` ConversionReview (kube-apiserver has sent v1 since 1.16 when asked).
"""

from __future__ import annotations

import base64
from typing import Any, Final

from kustomize_controller.api.crdgen import CONVERSION_PATH, CRD_NAME
from kustomize_controller.kube.client import KubeClient

__all__ = ["FIELD_MANAGER", "claimed", "conversion_patch", "ensure_crd", "service_hosts", "service_reference"]

_CRD_API_VERSION: Final = "apiextensions.k8s.io/v1"
#: the field manager of the controller's writes to the CRD's ``spec.conversion`` (see the module doc)
FIELD_MANAGER: Final = "kustomize-conversion-webhook"
_TARGETS: Final = ("url", "service")


def service_reference(name: str, namespace: str) -> dict[str, Any]:
    """``clientConfig.service`` for the Service ``namespace/name`` of manifests/webhook (port 443)."""
    return {"name": name, "namespace": namespace, "path": CONVERSION_PATH, "port": 443}


def service_hosts(service: dict[str, Any]) -> list[str]:
    name, namespace = service.get("name"), service.get("namespace")
    if not name or not namespace:
        return []
    return [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]


def conversion_patch(crd: dict[str, Any], *, ca_bundle: bytes | None, target: dict[str, Any] | None
                     ) -> dict[str, Any] | None:
    spec = crd.get("spec") or {}
    if len(spec.get("versions") or []) < 2:
        return None
    current = spec.get("conversion") or {}
    webhook = current.get("webhook") or {}
    client_config = dict(webhook.get("clientConfig") or {})
    wanted = dict(client_config)
    if ca_bundle is not None:
        wanted["caBundle"] = base64.b64encode(ca_bundle).decode()
    if target is not None:
        (member,) = target  # exactly one of url, service
        assert member in _TARGETS, member
        for key in _TARGETS:
            wanted.pop(key, None)
        wanted.update(target)
    if not any(wanted.get(key) for key in _TARGETS):
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


def claimed(crd: dict[str, Any], *, with_ca_bundle: bool) -> bool:
    """Whether ``FIELD_MANAGER`` applied (co-owns) the conversion as it is: strategy, review versions, the
    url or service there, and ``caBundle`` unless cert-manager keeps it."""
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    config = (conversion.get("webhook") or {}).get("clientConfig") or {}
    wanted = {"f:strategy", "f:webhook.f:conversionReviewVersions"}
    wanted |= {f"f:webhook.f:clientConfig.f:{key}" for key in _TARGETS if key in config}
    if with_ca_bundle:
        wanted.add("f:webhook.f:clientConfig.f:caBundle")
    for entry in (crd.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply":
            owned = ((entry.get("fieldsV1") or {}).get("f:spec") or {}).get("f:conversion") or {}
            return wanted <= set(_paths(owned))
    return False


def _paths(fields: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, sub in fields.items():
        if key.startswith("f:"):
            paths.append(prefix + key)
            paths += _paths(sub or {}, prefix + key + ".")
    return paths


async def ensure_crd(client: KubeClient, *, crd: dict[str, Any], ca_bundle: bytes | None,
                     target: dict[str, Any] | None) -> bool:
    """Make ``crd``'s (as just read) conversion what it should be, owned by us; True when written.

    Two writes, each guarded by the resourceVersion (a conflict fails rather than overwrites a CRD
    changed since it was read): the merge patch that changes the conversion (and removes the other of
    url and service, whoever applied it), then, unless done before, a server-side apply of the result
    under ``FIELD_MANAGER``. That apply makes us a co-owner of every field we wrote, so an applier that
    declared them once (the manifests did, before this module owned the conversion) and stops declaring
    them releases nothing that would break the CRD.
    """
    patch = conversion_patch(crd, ca_bundle=ca_bundle, target=target)
    if patch is not None:
        patch["metadata"] = {"resourceVersion": crd["metadata"]["resourceVersion"]}
        crd = await client.patch(_CRD_API_VERSION, "CustomResourceDefinition", CRD_NAME, None, patch,
                                 patch_type="merge", field_manager=FIELD_MANAGER)
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook" or claimed(crd, with_ca_bundle=ca_bundle is not None):
        return patch is not None
    webhook = conversion.get("webhook") or {}
    config = webhook.get("clientConfig") or {}
    keys = (*_TARGETS, "caBundle") if ca_bundle is not None else _TARGETS
    await client.apply({
        "apiVersion": _CRD_API_VERSION, "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "resourceVersion": crd["metadata"]["resourceVersion"]},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": webhook.get("conversionReviewVersions") or ["v1"],
            "clientConfig": {key: config[key] for key in keys if key in config}}}},
    }, field_manager=FIELD_MANAGER, force=True)
    return True


def default_url(host: str, port: int) -> str:
    """``https://host:port/convert`` (IPv6 literals bracketed)."""
    shown = f"[{host}]" if ":" in host else host
    return f"https://{shown}:{port}{CONVERSION_PATH}"
