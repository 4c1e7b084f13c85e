"""List with selectors and pagination, as the real server answers it.

Contract:
- Items come in etcd key order (namespace, then name). ``metadata.resourceVersion`` of the list is the
  global resourceVersion when the first page was read.
- ``limit`` returns at most that many matching items and a ``continue`` token when more keys remain
  (possibly with no further match, as on a real server); ``remainingItemCount`` only when no selector is
  used. A token issued before the last history compaction answers 410 Expired, as etcd compaction does.
- A ``metadata.name`` field selector is answered by a direct lookup; otherwise the cost is linear in the
  number of objects in the listed namespace (or resource, for a cluster-wide list).
- Built-in list items carry no ``apiVersion``/``kind`` (as a real server serialises typed lists); custom
  resource items do.

- Pages after the first are served from a snapshot at the first page's resourceVersion (rebuilt from the
  watch history), as etcd serves a continue token; ``remainingItemCount`` then counts current keys.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any

from . import errors
from .cluster import Cluster
from .kinds import ResourceType
from .objects import with_version
from .selectors import FieldSelector, LabelSelector
from .storage import Key, Storage

_CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of "
    "the results. Continuing with the provided token results in an inconsistent list - objects that were "
    "created, modified, or deleted between the time the first chunk was returned and now may show up in the "
    "list."
)


def encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}\x00"}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        ns, _, name = str(data["start"]).rstrip("\x00").partition("/")
        rv = int(data["rv"])
    except (ValueError, KeyError, TypeError, binascii.Error) as err:
        raise errors.bad_request(f"continue key is not valid: {err}") from err
    if data.get("v") != "meta.k8s.io/v1":
        raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                                 "(version meta.k8s.io/v1)")
    return rv, (ns, name)


def list_objects(cluster: Cluster, rt: ResourceType, namespace: str | None, *, labels: LabelSelector,
                 fields: FieldSelector, limit: int | None, continue_token: str | None,
                 exact_resource_version: int | None = None) -> dict[str, Any]:
    """One page of a list. ``exact_resource_version`` (``resourceVersionMatch=Exact``) lists the state
    at that version: 410 when the history no longer reaches it, 504 when it is in the future."""
    storage = cluster.storage
    list_rv = storage.resource_version
    after: tuple[str, str] | None = None
    if continue_token:
        list_rv, after = decode_continue(continue_token)
        if list_rv < storage.oldest_watchable:
            raise errors.gone_expired(_CONTINUE_TOO_OLD)
    elif exact_resource_version is not None:
        if exact_resource_version < storage.oldest_watchable:
            raise errors.gone_expired("The resourceVersion for the provided list is too old.")
        if exact_resource_version > storage.resource_version:
            raise errors.ApiStatusError(504, "Timeout", f"Too large resource version: {exact_resource_version}, "
                                        f"current: {storage.resource_version}",
                                        {"causes": [{"reason": "ResourceVersionTooLarge",
                                                     "message": "Too large resource version"}],
                                         "retryAfterSeconds": 1})
        list_rv = exact_resource_version
    scope_ns = namespace
    pinned_ns = fields.single_value("metadata.namespace")
    if scope_ns is None and pinned_ns is not None and rt.namespaced:
        scope_ns = pinned_ns
    items: list[dict[str, Any]] = []
    next_token: str | None = None
    remaining: int | None = None
    candidates: Iterator[dict[str, Any]]
    pinned_name = fields.single_value("metadata.name")
    if (pinned_name is not None and (scope_ns is not None or not rt.namespaced) and after is None
            and list_rv == storage.resource_version):
        obj = storage.get(rt.storage_key, scope_ns or "", pinned_name)
        candidates = iter([obj] if obj is not None else [])
    elif list_rv < storage.resource_version:
        candidates = snapshot(storage, rt, scope_ns, after, list_rv)
    else:
        candidates = storage.iterate(rt.storage_key, scope_ns, after)
    last_key: tuple[str, str] | None = None
    for obj in candidates:
        if limit is not None and len(items) >= limit:
            next_token = encode_continue(list_rv, last_key) if last_key else None
            if labels.empty and fields.empty and last_key is not None:
                remaining = storage.remaining_after(rt.storage_key, scope_ns, last_key)
            break
        meta = obj["metadata"]
        last_key = (meta.get("namespace", ""), meta["name"])
        if not labels.matches(meta.get("labels")) or not fields.matches(obj):
            continue
        items.append(_item(obj, rt))
    list_meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
    if next_token:
        list_meta["continue"] = next_token
        if remaining:
            list_meta["remainingItemCount"] = remaining
    return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": list_meta, "items": items}


def snapshot(storage: Storage, rt: ResourceType, namespace: str | None, after: Key | None, rv: int
              ) -> Iterator[dict[str, Any]]:
    """Objects after ``after`` as they were at ``rv`` (what etcd serves a continue token): the current
    objects, with every key written since ``rv`` replaced by its state before that first write."""
    then: dict[Key, dict[str, Any] | None] = {}
    for event in storage.events_after(rv, rt.storage_key):
        meta = event.obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if key not in then:
            then[key] = event.old
    # keys gone since rv (or changed), in key order, with the state they had then
    revived = sorted((k, old) for k, old in then.items()
                     if old is not None and (after is None or k > after)
                     and (namespace is None or k[0] == namespace))
    position = 0
    for obj in storage.iterate(rt.storage_key, namespace, after):
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        while position < len(revived) and revived[position][0] < key:
            yield revived[position][1]
            position += 1
        if position < len(revived) and revived[position][0] == key:
            yield revived[position][1]
            position += 1
        elif key not in then:
            yield obj
    for _, old in revived[position:]:
        yield old


def _item(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    if rt.custom:
        return with_version(obj, rt)
    item = dict(with_version(obj, rt))  # same dict unless another API's shape (events.k8s.io Events)
    item.pop("apiVersion", None)
    item.pop("kind", None)
    return item
