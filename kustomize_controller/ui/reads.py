"""What a page asks for on demand, read as the user with a timeout per request.

Contract:
- ``inventory_health(client, items)``: each inventory object's kstatus (``apply/kstatus.py``, the rules the
  health checks use) from one GET each, at most ``concurrency`` at once and ``limit`` in all (a page about a
  Kustomization of 5,000 objects does not send 5,000 requests; it says how many it left out). A missing
  object is ``NotFound``; a refusal, a timeout or a malformed object is ``Unknown`` with the error.
- ``object_yaml(client, item)``: the live object as YAML without ``managedFields``. A Secret's ``data`` and
  ``stringData`` values are replaced by ``***`` (the keys stay) and its
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation, which would repeat them, by ``***``:
  the value never leaves the server.
- ``redact_url``: a URL without its ``user:password@`` part (a Git URL may carry credentials).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from kustomize_controller.apply.kstatus import KStatusError, Status, compute
from kustomize_controller.apply.preview import MASK
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.ui.model import InventoryItem

READ_TIMEOUT = 5.0
HEALTH_LIMIT = 500
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class Health:
    status: str  # a kstatus Status value
    message: str


async def inventory_health(client: KubeClient, items: Sequence[InventoryItem], *, clock: Clock,
                           concurrency: int = 8, limit: int = HEALTH_LIMIT,
                           request_timeout: float = READ_TIMEOUT) -> dict[str, Health]:
    """kstatus of the first ``limit`` of ``items`` by inventory id (module contract)."""
    reader = client.with_timeout(request_timeout)
    gate = asyncio.Semaphore(concurrency)

    async def one(item: InventoryItem) -> tuple[str, Health]:
        async with gate:
            try:
                obj = await reader.get(item.api_version, item.kind, item.name, item.namespace or None)
            except NotFoundError:
                return item.id, Health(Status.NOT_FOUND, "not found")
            except (KubeError, NoKindMatchError) as err:
                return item.id, Health(Status.UNKNOWN, str(err))
        try:
            result = compute(obj, now=clock.now())
        except KStatusError as err:
            return item.id, Health(Status.UNKNOWN, str(err))
        return item.id, Health(result.status, result.message)

    return dict(await asyncio.gather(*(one(item) for item in items[:limit])))


def masked(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without managedFields, and with a Secret's values masked (module contract); a new dict."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    if out.get("kind") == "Secret" and out.get("apiVersion") == "v1":
        for field in ("data", "stringData"):
            if isinstance(out.get(field), dict):
                out[field] = dict.fromkeys(out[field], MASK)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            meta["annotations"] = {**annotations, LAST_APPLIED: MASK}
    out["metadata"] = meta
    return out


async def object_yaml(client: KubeClient, item: InventoryItem, *, request_timeout: float = READ_TIMEOUT) -> str:
    obj = await client.with_timeout(request_timeout).get(item.api_version, item.kind, item.name, item.namespace or None)
    return yaml.safe_dump(masked(obj), sort_keys=False, default_flow_style=False, allow_unicode=True)


def redact_url(url: str) -> str:
    """``url`` without the credentials of its authority (module contract)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
