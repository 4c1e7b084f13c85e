"""CRD version conversion, as kube-apiserver does it (``spec.conversion``).

A custom resource is stored in its CRD's storage version. A request for another served version has
its object converted to the storage version before it is stored, and every object it reads (get,
list, watch, the response of a write) converted back; requests for the storage version need no
conversion at all, so they keep working when a webhook is down.

Contract:

- Strategy ``None``: only ``apiVersion`` changes; the result is then pruned by the target version's
  schema, so a field the other version lacks is dropped without a word (observed on kube-apiserver
  v1.36: a v1beta2 ``patchesStrategicMerge`` is gone when read back as v1 or v1beta2).
- Strategy ``Webhook``: one ``ConversionReview`` (``apiextensions.k8s.io/v1``) per call, POSTed to
  ``clientConfig.url`` over HTTPS, the server verified with ``clientConfig.caBundle`` (the system trust
  store without one), 30 s timeout. The response must echo the uid, return as many objects in the
  desired version, and change nothing of their metadata but labels and annotations. Its objects are
  pruned and defaulted by the target version's schema.
- Failures (unreachable, a non-200 answer, ``result.status: Failure``, a malformed response) fail the
  request with kube-apiserver's error: HTTP 500, no reason, ``conversion webhook for
  <group>/<version>, Kind=<Kind> failed: <why>``; nothing is stored.
- ``clientConfig.service`` cannot be reached from here (no cluster network): such a webhook fails
  every conversion, with a message that says so.
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from typing import Any, Final

import aiohttp

from . import crdschema
from .errors import ApiStatusError
from .kinds import Registry, ResourceType

__all__ = ["ConversionFailed", "Converter"]

WEBHOOK_TIMEOUT: Final = 30.0
_REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"


class ConversionFailed(ApiStatusError):
    """What the client sees: 500 without reason, the webhook's error as the message."""

    def __init__(self, message: str) -> None:
        super().__init__(500, "", message)


class Converter:
    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def needed(self, rt: ResourceType) -> bool:
        """Whether requests through ``rt`` convert (a custom resource's non-storage version)."""
        return rt.custom and bool(rt.storage_version) and rt.version != rt.storage_version

    def storage_type(self, rt: ResourceType) -> ResourceType:
        stored = self._registry.lookup(rt.group, rt.storage_version, rt.plural)
        if stored is None:  # the storage version is not served: read and write its objects anyway
            stored = _unserved(rt)
        return stored

    async def convert(self, objects: list[dict[str, Any]], *, source: ResourceType, target: ResourceType
                      ) -> list[dict[str, Any]]:
        """``objects`` (all stored through ``source``'s version) as ``target``'s version."""
        if not objects:
            return []
        marked = [{**obj, "apiVersion": source.api_version} for obj in objects]
        if source.version == target.version:
            return marked
        conversion = target.conversion or {}
        if conversion.get("strategy", "None") == "Webhook":
            converted = await self._webhook(marked, source=source, target=target,
                                            webhook=conversion.get("webhook") or {})
        else:
            converted = [{**obj, "apiVersion": target.api_version} for obj in marked]
        if target.schema:
            converted = [crdschema.prune_and_default(target.schema, obj) for obj in converted]
        return converted

    async def _webhook(self, objects: list[dict[str, Any]], *, source: ResourceType, target: ResourceType,
                       webhook: dict[str, Any]) -> list[dict[str, Any]]:
        what = f"conversion webhook for {source.api_version}, Kind={source.kind}"
        config = webhook.get("clientConfig") or {}
        url = config.get("url")
        if not url:
            service = config.get("service") or {}
            raise ConversionFailed(
                f"{what} failed: the embedded API server cannot reach service "
                f"{service.get('namespace', '')}/{service.get('name', '')}; set spec.conversion.webhook."
                f"clientConfig.url (the controller does with --webhook-url)")
        uid = str(uuid.uuid4())
        review = {"apiVersion": _REVIEW_API_VERSION, "kind": "ConversionReview",
                  "request": {"uid": uid, "desiredAPIVersion": target.api_version, "objects": objects}}
        try:
            context = _ssl_context(config.get("caBundle"))
            async with aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(ssl=context),
                    timeout=aiohttp.ClientTimeout(total=WEBHOOK_TIMEOUT)) as http, \
                    http.post(f"{url}{'&' if '?' in url else '?'}timeout={int(WEBHOOK_TIMEOUT)}s",
                              json=review) as resp:
                text = await resp.text()
                if resp.status != 200:
                    raise ConversionFailed(f"{what} failed: conversion webhook returned {resp.status}: {text[:200]}")
                body = json.loads(text)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as err:
            raise ConversionFailed(f'{what} failed: Post "{url}": {_reason(err)}') from err
        return _checked(body, uid=uid, objects=objects, target=target, what=what)


def _checked(body: Any, *, uid: str, objects: list[dict[str, Any]], target: ResourceType, what: str
             ) -> list[dict[str, Any]]:
    response = body.get("response") if isinstance(body, dict) else None
    if not isinstance(response, dict):
        raise ConversionFailed(f"{what} failed: no response provided")
    if response.get("uid") != uid:
        raise ConversionFailed(f"{what} failed: expected response uid {uid!r}, got {response.get('uid')!r}")
    result = response.get("result") or {}
    if result.get("status") != "Success":
        message = result.get("message")
        raise ConversionFailed(f"{what} failed: {message}" if message else f"{what} failed")
    converted = response.get("convertedObjects")
    if not isinstance(converted, list) or len(converted) != len(objects):
        count = len(converted) if isinstance(converted, list) else 0
        raise ConversionFailed(f"{what} failed: expected {len(objects)} converted objects, got {count}")
    for original, obj in zip(objects, converted, strict=True):
        if not isinstance(obj, dict) or obj.get("apiVersion") != target.api_version:
            raise ConversionFailed(f"{what} failed: invalid converted object: apiVersion is not "
                                   f"{target.api_version}")
        before = {k: v for k, v in (original.get("metadata") or {}).items() if k not in ("labels", "annotations")}
        after = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("labels", "annotations")}
        if before != after:
            raise ConversionFailed(f"{what} failed: invalid metadata in converted object: only labels and "
                                   f"annotations may change")
    return converted


def _ssl_context(ca_bundle: Any) -> ssl.SSLContext:
    if not ca_bundle:
        return ssl.create_default_context()
    return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())


def _reason(err: BaseException) -> str:
    if isinstance(err, TimeoutError):
        return "context deadline exceeded"
    return str(err) or type(err).__name__


def _unserved(rt: ResourceType) -> ResourceType:
    from dataclasses import replace

    return replace(rt, version=rt.storage_version, schema=None)
