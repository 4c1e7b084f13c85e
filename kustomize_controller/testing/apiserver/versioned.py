"""Requests for a custom resource's non-storage version: convert in, store as the storage version, convert out.

What kube-apiserver does for such a request, in its order:

- writes (create, update, patch): the object in the request version is pruned, defaulted and validated
  by *that* version's schema (unknown fields warned about or refused per ``fieldValidation``), then
  converted to the storage version (``conversion.py``) and handed to ``Cluster`` as a write of the
  storage version (its schema, metadata rules, managed fields, status-subresource rules apply there);
- patches are applied to the live object *as the request version* (converted first) and the result
  goes the write path above; a concurrent change between the read and the write is retried, as the
  real server retries a patch on a resourceVersion conflict;
- server-side apply converts the apply configuration itself to the storage version and applies that;
- reads (get, list, watch, and the object a write returns) are converted from the storage version.

Any conversion failure fails the whole request with the converter's error and stores nothing.

Not promised: ``managedFields`` of an old-version apply name the storage version's fields; validation
of an update in the request version does not see the old object (CEL transition rules run in the
storage version only).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

from . import errors
from .cluster import Cluster, WriteContext, _structural
from .conversion import Converter
from .errors import ApiStatusError
from .kinds import ResourceType
from .patch.jsonpatch6902 import json_patch
from .patch.merge import merge_patch

_PATCH_ATTEMPTS = 5


class VersionedRequests:
    def __init__(self, cluster: Cluster, converter: Converter) -> None:
        self._cluster = cluster
        self._converter = converter

    def applies(self, rt: ResourceType) -> bool:
        return self._converter.needed(rt)

    # reads ----------------------------------------------------------------------------------------

    async def out(self, rt: ResourceType, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Stored objects as ``rt``'s version."""
        return await self._converter.convert(objects, source=self._converter.storage_type(rt), target=rt)

    async def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        stored = self._cluster.get(self._converter.storage_type(rt), namespace, name)
        return (await self.out(rt, [stored]))[0]

    async def list(self, rt: ResourceType, listed: dict[str, Any]) -> dict[str, Any]:
        """A list read through ``rt`` (items as stored) with its items converted."""
        return {**listed, "items": await self.out(rt, listed["items"])}

    def watch_converter(self, rt: ResourceType) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def convert(obj: dict[str, Any]) -> dict[str, Any]:
            return (await self.out(rt, [obj]))[0]
        return convert

    # writes ---------------------------------------------------------------------------------------

    async def _to_storage(self, rt: ResourceType, obj: dict[str, Any], ctx: WriteContext) -> dict[str, Any]:
        admitted = _structural(rt, obj, None, ctx)
        stored_as = self._converter.storage_type(rt)
        return (await self._converter.convert([admitted], source=rt, target=stored_as))[0]

    async def create(self, rt: ResourceType, namespace: str, body: Any, *, dry_run: bool, manager: str,
                     ctx: WriteContext) -> dict[str, Any]:
        body = Cluster._check_body(rt, copy.deepcopy(body), namespace, None)
        converted = await self._to_storage(rt, body, ctx)
        created = self._cluster.create(self._converter.storage_type(rt), namespace, converted, dry_run=dry_run,
                                       manager=manager, ctx=ctx)
        return (await self.out(rt, [created]))[0]

    async def update(self, rt: ResourceType, namespace: str, name: str, body: Any, *, subresource: str,
                     dry_run: bool, manager: str, ctx: WriteContext) -> dict[str, Any]:
        body = Cluster._check_body(rt, copy.deepcopy(body), namespace, name)
        converted = await self._to_storage(rt, body, ctx)
        updated = self._cluster.update(self._converter.storage_type(rt), namespace, name, converted,
                                       subresource=subresource, dry_run=dry_run, manager=manager, ctx=ctx)
        return (await self.out(rt, [updated]))[0]

    async def patch(self, rt: ResourceType, namespace: str, name: str, patch: Any, *, patch_type: str,
                    subresource: str, dry_run: bool, manager: str | None, force: bool,
                    ctx: WriteContext) -> tuple[dict[str, Any], bool]:
        stored_as = self._converter.storage_type(rt)
        if patch_type == "apply":
            config = Cluster._check_body(rt, copy.deepcopy(patch), namespace, name)
            if not config.get("apiVersion") or not config.get("kind"):
                raise errors.bad_request("invalid object: apiVersion and kind must be set in an apply "
                                         "configuration")
            converted = (await self._converter.convert([config], source=rt, target=stored_as))[0]
            result, created = self._cluster.patch(stored_as, namespace, name, converted, patch_type="apply",
                                                  subresource=subresource, dry_run=dry_run, manager=manager,
                                                  force=force, ctx=ctx)
            return (await self.out(rt, [result]))[0], created
        if patch_type not in ("merge", "json"):
            raise errors.unsupported_media_type(
                "application/strategic-merge-patch+json" if patch_type == "strategic" else patch_type)
        if force:
            return self._cluster.patch(rt, namespace, name, patch, patch_type=patch_type, subresource=subresource,
                                       dry_run=dry_run, manager=manager, force=force, ctx=ctx)
        for attempt in range(_PATCH_ATTEMPTS):
            live = self._cluster.storage.get(stored_as.storage_key, namespace if rt.namespaced else "", name)
            if live is None:
                raise errors.not_found(rt.plural, rt.group, name)
            current = (await self.out(rt, [live]))[0]
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    raise errors.bad_request("merge patch must be a JSON object")
                patched = merge_patch(current, patch)
            else:
                patched = json_patch(current, patch)
            patched = Cluster._check_body(rt, patched, namespace, name)
            asked_rv = patched["metadata"].get("resourceVersion")
            if asked_rv and asked_rv != live["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
            patched["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
            converted = await self._to_storage(rt, patched, ctx)
            try:
                updated = self._cluster.update(stored_as, namespace, name, converted, subresource=subresource,
                                               dry_run=dry_run, manager=manager or "unknown", ctx=ctx)
            except ApiStatusError as err:
                # changed while the webhook converted: patch the new state (unless the patch pinned one)
                if err.code == 409 and not asked_rv and attempt + 1 < _PATCH_ATTEMPTS:
                    continue
                raise
            return (await self.out(rt, [updated]))[0], False
        raise AssertionError("unreachable")

    async def delete(self, rt: ResourceType, namespace: str, name: str, options: dict[str, Any] | None, *,
                     dry_run: bool) -> tuple[dict[str, Any], bool]:
        body, is_object = self._cluster.delete(self._converter.storage_type(rt), namespace, name, options,
                                               dry_run=dry_run)
        if is_object:
            body = (await self.out(rt, [body]))[0]
        return body, is_object
