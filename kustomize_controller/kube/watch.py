"""``KubeClient``'s ``watch``: a stream of ``WatchEvent`` dicts.

Contract:
- Events (``type``, ``object``) are yielded until the server ends the stream (``timeoutSeconds``) or the
  caller stops iterating; an ``ERROR`` event is raised as its ``ApiError`` (a compacted
  resourceVersion → ``GoneError``). Objects carry ``apiVersion`` and ``kind``.
- The stream has a connect timeout of 10 s, a read timeout of ``timeoutSeconds`` + ``WATCH_READ_MARGIN``
  and an inactivity guard that ends a silent stream with ``TransportError``.
- ``metadata_only=True`` asks for ``PartialObjectMetadata`` and reduces every object (bookmarks aside)
  to ``apiVersion``, ``kind`` and ``metadata``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, TypedDict

from kustomize_controller.kube.errors import TransportError, api_error_from_status
from kustomize_controller.kube.read import to_partial_metadata
from kustomize_controller.kube.request import RequestBase, answer_error, decode_body
from kustomize_controller.kube.transport import Timeout

WATCH_READ_MARGIN = 30.0
METADATA_ACCEPT_WATCH = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json;q=0.9"


class WatchEvent(TypedDict):
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict[str, Any]


class WatchVerb(RequestBase):
    async def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        metadata_only: bool = False,
        inactivity_timeout: float | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Stream watch events; see the module docstring. The stream is closed when the caller stops
        iterating (``aclose()`` or ``break`` inside ``async with contextlib.aclosing(...)``).

        ``inactivity_timeout`` (default ``timeoutSeconds`` + 30 s, or 330 s) ends a stream that
        delivers nothing for that long with ``TransportError`` — a guard against dead TCP streams
        that the socket read timeout might not catch.
        """
        info = await self._info(api_version, kind)
        ns = self._namespace_for(info, namespace, required=False, what="*")
        params: list[tuple[str, str]] = [("watch", "true")]
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if timeout_seconds is not None:
            params.append(("timeoutSeconds", str(int(timeout_seconds))))
        if allow_bookmarks:
            params.append(("allowWatchBookmarks", "true"))
        if label_selector:
            params.append(("labelSelector", label_selector))
        if field_selector:
            params.append(("fieldSelector", field_selector))
        read = float(timeout_seconds if timeout_seconds is not None else 300) + WATCH_READ_MARGIN
        guard = inactivity_timeout if inactivity_timeout is not None else read
        accept = METADATA_ACCEPT_WATCH if metadata_only else "application/json"
        resp = await self._send(
            "GET",
            info.path(namespace=ns),
            params=params,
            accept=accept,
            limits=Timeout(total=None, connect=10.0, read=read),
            stream=True,
        )
        try:
            if resp.status >= 300:
                body = decode_body(await resp.read())
                raise answer_error(resp, body, kind=kind, namespace=ns)
            lines = resp.lines()
            while True:
                try:
                    async with asyncio.timeout(guard):
                        line = await anext(lines, None)
                except TimeoutError as err:
                    raise TransportError(
                        f"{kind} watch: no data for {guard:.0f}s, closing the stream",
                        method="GET",
                        url=info.path(namespace=ns),
                    ) from err
                if line is None:
                    return
                line = line.strip()
                if not line:
                    continue
                event = decode_body(line)
                if not isinstance(event, dict) or "type" not in event:
                    raise TransportError(f"{kind} watch: undecodable event {line[:200]!r}")
                etype = str(event["type"])
                obj = event.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code") or 500) if isinstance(obj, dict) else 500
                    raise api_error_from_status(code, obj, kind=kind, namespace=ns)
                if metadata_only and etype != "BOOKMARK":
                    obj = to_partial_metadata(obj, api_version=api_version, kind=kind)
                elif isinstance(obj, dict):
                    obj.setdefault("apiVersion", api_version)
                    obj.setdefault("kind", kind)
                yield WatchEvent(type=etype, object=obj)
        finally:
            await resp.close()
