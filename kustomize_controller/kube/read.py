"""``KubeClient``'s reads: ``get``, ``list_page``, ``list``.

Contract:
- ``get`` reads one object; a namespaced kind needs a namespace (``ValueError`` otherwise).
- ``list`` follows ``continue`` tokens until the last page (``DEFAULT_PAGE_SIZE`` objects a page); returned
  items carry ``apiVersion`` and ``kind`` (the server omits them in lists).
- ``list_page(..., metadata_only=True)`` asks for ``PartialObjectMetadataList`` and reduces each item to
  ``apiVersion`` (the one asked for), ``kind`` and ``metadata`` (``to_partial_metadata``), whatever the
  server sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kustomize_controller.kube.request import RequestBase

DEFAULT_PAGE_SIZE = 500
METADATA_ACCEPT_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json;q=0.9"


def to_partial_metadata(obj: Mapping[str, Any], *, api_version: str, kind: str) -> dict[str, Any]:
    """Reduce an object to ``apiVersion``, ``kind`` and ``metadata`` (PartialObjectMetadata shape,
    keeping the type of the original resource as controller-runtime's metadata informers do)."""
    return {"apiVersion": api_version, "kind": kind, "metadata": dict(obj.get("metadata") or {})}


class ReadVerbs(RequestBase):
    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        result: dict[str, Any] = await self._request_json(
            "GET", info.path(namespace=ns, name=name), ident=(kind, ns, name)
        )
        return result

    async def list_page(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = DEFAULT_PAGE_SIZE,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """One page: the raw List object (``items``, ``metadata.resourceVersion``, ``metadata.continue``)."""
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=False, what="*")
        params: list[tuple[str, str]] = []
        if label_selector:
            params.append(("labelSelector", label_selector))
        if field_selector:
            params.append(("fieldSelector", field_selector))
        if limit:
            params.append(("limit", str(limit)))
        if continue_token:
            params.append(("continue", continue_token))
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if resource_version_match:
            params.append(("resourceVersionMatch", resource_version_match))
        accept = METADATA_ACCEPT_LIST if metadata_only else "application/json"
        page: dict[str, Any] = await self._request_json(
            "GET", info.path(namespace=ns), params=params, accept=accept, ident=(kind, ns, None)
        )
        items = page.get("items") or []
        if metadata_only:
            page["items"] = [to_partial_metadata(i, api_version=api_version, kind=kind) for i in items]
        else:
            for item in items:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
            page["items"] = items
        return page

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> list[dict[str, Any]]:
        """Every object of a kind (following ``continue`` tokens); ``metadata_only`` as for ``list_page``."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = await self.list_page(
                api_version,
                kind,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                continue_token=token,
                metadata_only=metadata_only,
            )
            items.extend(page["items"])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items
