"""``KubeClient``'s writes: ``create``, ``update``, ``patch``, ``apply`` (server-side), ``delete``.

Contract:
- Every write takes ``dry_run`` (``dryRun=All``: validated and admitted, never stored) where the API
  has it, and ``subresource`` (``status``) on ``update``/``patch``/``apply``.
- ``update`` PUTs the whole object: its ``metadata.resourceVersion`` makes it a compare-and-swap.
- ``patch`` sends one of ``PATCH_CONTENT_TYPES``; an ``apply`` patch needs a field manager.
- ``apply`` is server-side apply of the object itself (``application/apply-patch+yaml``; JSON is valid
  YAML), ``force`` by default (the controller owns what it applies).
- ``delete`` returns the object while the server still has it (finalizers pending), else ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from kustomize_controller.kube.request import RequestBase

PatchType = Literal["merge", "json", "strategic", "apply"]

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


def object_identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    """``(apiVersion, kind, name, namespace)`` of an object dict; raises ``ValueError`` when absent."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not api_version or not kind or not name:
        raise ValueError(f"object needs apiVersion, kind and metadata.name, got {api_version!r}/{kind!r}/{name!r}")
    return str(api_version), str(kind), str(name), meta.get("namespace")


def _write_params(*, dry_run: bool = False, field_manager: str | None = None) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    if dry_run:
        params.append(("dryRun", "All"))
    if field_manager:
        params.append(("fieldManager", field_manager))
    return params


class WriteVerbs(RequestBase):
    async def create(
        self, obj: Mapping[str, Any], *, dry_run: bool = False, field_manager: str | None = None
    ) -> dict[str, Any]:
        api_version, kind, name, namespace = object_identity(obj)
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        params = _write_params(dry_run=dry_run, field_manager=field_manager)
        result: dict[str, Any] = await self._request_json(
            "POST", info.path(namespace=ns), params=params, body=obj, ident=(kind, ns, name)
        )
        return result

    async def update(
        self, obj: Mapping[str, Any], *, dry_run: bool = False, subresource: str | None = None
    ) -> dict[str, Any]:
        """PUT the whole object (``metadata.resourceVersion`` makes it a compare-and-swap)."""
        api_version, kind, name, namespace = object_identity(obj)
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        result: dict[str, Any] = await self._request_json(
            "PUT",
            info.path(namespace=ns, name=name, subresource=subresource),
            params=_write_params(dry_run=dry_run),
            body=obj,
            ident=(kind, ns, name),
        )
        return result

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        patch_type: PatchType,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(f"unknown patch type {patch_type!r}; one of {sorted(PATCH_CONTENT_TYPES)}")
        if patch_type == "apply" and not field_manager:
            raise ValueError(f"{kind}/{namespace or ''}/{name}: server-side apply needs a field manager")
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        params = _write_params(dry_run=dry_run, field_manager=field_manager)
        if force is not None and patch_type == "apply":
            params.append(("force", "true" if force else "false"))
        result: dict[str, Any] = await self._request_json(
            "PATCH",
            info.path(namespace=ns, name=name, subresource=subresource),
            params=params,
            body=body,
            content_type=content_type,
            ident=(kind, ns, name),
        )
        return result

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` (``application/apply-patch+yaml``; JSON is valid YAML)."""
        api_version, kind, name, namespace = object_identity(obj)
        return await self.patch(
            api_version,
            kind,
            name,
            namespace,
            obj,
            patch_type="apply",
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
            subresource=subresource,
        )

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any] | None:
        """Delete one object. Returns the object when the server still has it (finalizers pending,
        or it echoes it back), ``None`` when it answers with a success ``Status``."""
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=True, what=name)
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if dry_run:
            options["dryRun"] = ["All"]
        result = await self._request_json(
            "DELETE", info.path(namespace=ns, name=name), body=options, ident=(kind, ns, name)
        )
        if not isinstance(result, dict) or result.get("kind") == "Status":
            return None
        return result
