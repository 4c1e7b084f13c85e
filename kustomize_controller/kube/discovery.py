"""Discovery and the REST mapper: ``(apiVersion, kind)`` ↔ resource path and scope.

Contract:
- ``await mapper.resolve(api_version, kind)`` returns a ``ResourceInfo``. Discovery is fetched per
  group-version (``/api/v1`` or ``/apis/<group>/<version>``) on first use and cached.
- A miss (unknown kind in a cached group-version, or a group-version the server did not serve) drops
  that group-version from the cache and fetches it again once, so a CRD installed after start becomes
  usable without a restart. If it is still unknown, ``NoKindMatchError`` is raised.
- Concurrent resolutions of one group-version share one discovery request.
- ``invalidate()`` forgets everything (e.g. after applying CRDs).

Not promised: aggregated discovery, preferred versions, short names or categories; subresources
(``deployments/scale``) are skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kustomize_controller.kube.errors import KubeError, NotFoundError


@dataclass(frozen=True)
class ResourceInfo:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def base_path(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, *, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection (``name=None``) or one object; ``namespace=None`` on a
        namespaced resource means all namespaces (list/watch only)."""
        parts = [self.base_path()]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.resource)
        if name:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


class NoKindMatchError(KubeError):
    """The server does not serve ``kind`` in ``api_version`` (yet): e.g. its CRD is not installed."""

    def __init__(self, api_version: str, kind: str) -> None:
        group, _, version = api_version.rpartition("/")
        super().__init__(f'no matches for kind "{kind}" in version "{api_version}"')
        self.api_version = api_version
        self.group = group
        self.version = version
        self.kind = kind


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` → ``("apps", "v1")``; ``v1`` → ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


Fetch = Callable[[str], Awaitable[Mapping[str, Any]]]


class RestMapper:
    def __init__(self, *, fetch: Fetch) -> None:
        self._fetch = fetch
        self._by_gv: dict[str, dict[str, ResourceInfo]] = {}
        self._inflight: dict[str, asyncio.Future[dict[str, ResourceInfo]]] = {}

    def invalidate(self, api_version: str | None = None) -> None:
        if api_version is None:
            self._by_gv.clear()
        else:
            self._by_gv.pop(api_version, None)

    def cached(self, api_version: str, kind: str) -> ResourceInfo | None:
        return self._by_gv.get(api_version, {}).get(kind)

    async def resolve(self, api_version: str, kind: str) -> ResourceInfo:
        if not api_version or not kind:
            raise ValueError(f"apiVersion and kind are required, got {api_version!r}/{kind!r}")
        known = self._by_gv.get(api_version)
        if known is not None and kind in known:
            return known[kind]
        # a miss on a cached group-version refreshes it once: the kind may have been added since
        self._by_gv.pop(api_version, None)
        kinds = await self._load(api_version)
        info = kinds.get(kind)
        if info is None:
            raise NoKindMatchError(api_version, kind)
        return info

    async def _load(self, api_version: str) -> dict[str, ResourceInfo]:
        pending = self._inflight.get(api_version)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[dict[str, ResourceInfo]] = asyncio.get_running_loop().create_future()
        self._inflight[api_version] = fut
        try:
            kinds = await self._discover(api_version)
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # mark retrieved: waiters re-raise it, the future itself must not warn
            raise
        else:
            fut.set_result(kinds)
            self._by_gv[api_version] = kinds
            return kinds
        finally:
            self._inflight.pop(api_version, None)

    async def _discover(self, api_version: str) -> dict[str, ResourceInfo]:
        group, version = split_api_version(api_version)
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            body = await self._fetch(path)
        except NotFoundError:
            return {}
        kinds: dict[str, ResourceInfo] = {}
        for res in body.get("resources") or []:
            name = str(res.get("name") or "")
            if not name or "/" in name:
                continue
            kind = str(res.get("kind") or "")
            kinds.setdefault(
                kind,
                ResourceInfo(
                    group=group,
                    version=version,
                    resource=name,
                    kind=kind,
                    namespaced=bool(res.get("namespaced")),
                ),
            )
        return kinds
