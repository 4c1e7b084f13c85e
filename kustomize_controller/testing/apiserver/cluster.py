"""The cluster state and every write operation, independent of HTTP.

``Cluster`` owns the storage, the registry of kinds and the wall clock, and implements create, update,
patch, apply and delete with the real server's rules (see objects.py for metadata/generation, validation.py
for 422s, patch/ for the patch engines). HTTP handlers parse requests and call these methods.

Contract:
- Every write validates fully, then either stores (one new resourceVersion, one watch event) or, with
  ``dry_run``, returns the would-be object and stores nothing (no resourceVersion consumed, no event).
- A write that changes nothing (ignoring managedFields timestamps) stores nothing and returns the stored
  object, as the real server does for no-op updates and applies.
- Deleting an object with finalizers only marks it (``deletionTimestamp``, generation bumped); it goes when
  an update leaves it with no finalizers. Deleting a namespace marks it ``Terminating``; what follows
  (emptying it, CRD establishment, garbage collection) is the work of controllers.py, run inside the
  triggering write.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from . import builtin_schema, crdschema, decoding, errors, events, objects, validation
from .controllers import Controllers
from .errors import ApiStatusError, FieldError
from .kinds import CRD_STORAGE_KEY, NAMESPACE_STORAGE_KEY, Registry, ResourceType
from .patch import managed
from .patch.apply import server_side_apply
from .patch.jsonpatch6902 import json_patch
from .patch.merge import merge_patch
from .patch.strategic import strategic_merge_patch
from .storage import Storage


class WallClock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}

DeleteHook = Callable[[ResourceType, dict[str, Any]], None]
FOREGROUND_FINALIZER = "foregroundDeletion"


class Cluster:
    def __init__(self, *, history_size: int = 10000, clock: WallClock | None = None,
                 watcher_buffer: int = 10000, simulate_workloads: bool = False,
                 populate_namespaces: bool = False) -> None:
        self.storage = Storage(history_size=history_size, watcher_buffer=watcher_buffer)
        self.registry = Registry()
        self.clock: WallClock = clock or SystemClock()
        # called before a delete is carried out (fault injection: an admission webhook that says no)
        self.delete_hooks: list[DeleteHook] = []
        # report workloads ready right after each write (see workloads.py)
        self.simulate_workloads = simulate_workloads
        # give new namespaces the default ServiceAccount and kube-root-ca.crt ConfigMap (see
        # _populate_namespace); the PEM of that ConfigMap is set by the server
        self.populate_namespaces = populate_namespaces
        self.ca_bundle = ""
        self.controllers = Controllers(self)

    def now(self) -> str:
        return objects.timestamp(self.clock.now())

    # reads ----------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.storage.get(rt.storage_key, namespace, name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return objects.with_version(obj, rt)

    # shared checks -------------------------------------------------------------------------------

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        if not rt.namespaced:
            return
        ns = self.storage.get(NAMESPACE_STORAGE_KEY, "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rt.plural, rt.group, name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                  "field": "metadata.namespace"}],
            )

    @staticmethod
    def _check_body(rt: ResourceType, body: Any, namespace: str, name: str | None) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if (rt.custom and kind is not None and kind != rt.kind
                and str(api_version).rpartition("/")[0] == rt.group):
            # the custom resource handler validates the type meta: a 422, not a decoding error
            meta_name = body.get("metadata", {}).get("name") if isinstance(body.get("metadata"), dict) else None
            raise errors.invalid(rt.kind, rt.group, str(meta_name or name or ""), [FieldError(
                "kind", "Invalid value", f"must be {rt.kind}", kind)])
        if (api_version is not None and kind is not None
                and (kind != rt.kind or str(api_version).rpartition("/")[0] != rt.group)):
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})")
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        body_ns = meta.get("namespace")
        if rt.namespaced and body_ns and body_ns != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                     "on the request")
        if name is not None and meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the "
                                     f"URL ({name})")
        if rt.namespaced:
            meta["namespace"] = namespace
        return body

    # create -------------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Any, *, dry_run: bool, manager: str,
               ctx: WriteContext | None = None) -> dict[str, Any]:
        ctx = ctx or WriteContext()
        body = self._check_body(rt, copy.deepcopy(body), namespace, None)
        _typed_decode(rt, body, patched=False)
        if body["metadata"].get("resourceVersion"):
            raise errors.internal_error("resourceVersion should not be set on objects to be created")
        obj = _structural(rt, objects.prepare_create(rt, body, now=self.clock.now()), None, ctx)
        obj = events.to_storage(rt, obj, creating=True)
        objects.normalise(rt, obj, None)
        name = obj["metadata"].get("name") or ""
        validation.validate(rt, obj, None)
        self._check_namespace(rt, namespace, name)
        if self.storage.get(rt.storage_key, namespace if rt.namespaced else "", name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        obj["metadata"].pop("managedFields", None)
        managed.record_update(rt, None, obj, manager=manager, subresource="", now=self.now())
        return self._store_new(rt, obj, dry_run=dry_run)

    def _store_new(self, rt: ResourceType, obj: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
        if rt.kind == "Namespace" and not rt.group:
            # the namespace strategy requires its own finalizer on every new namespace
            spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
            finalizers = list(spec.get("finalizers") or [])
            if "kubernetes" not in finalizers:
                finalizers.append("kubernetes")
            obj["spec"] = {**spec, "finalizers": finalizers}
        if dry_run:
            obj["metadata"].pop("resourceVersion", None)
            return obj
        stored = self.storage.put(rt.storage_key, obj)
        if rt.storage_key == CRD_STORAGE_KEY:
            self.controllers.establish_crd(stored)
            stored = self.storage.get(rt.storage_key, "", stored["metadata"]["name"]) or stored
        self.controllers.simulate(rt, stored)
        if rt.storage_key == NAMESPACE_STORAGE_KEY and self.populate_namespaces:
            self.controllers.populate_namespace(stored["metadata"]["name"])
        return objects.with_version(stored, rt)


    # update / patch ----------------------------------------------------------------------------------

    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, *, subresource: str,
               dry_run: bool, manager: str, ctx: WriteContext | None = None) -> dict[str, Any]:
        ctx = ctx or WriteContext()
        body = self._check_body(rt, copy.deepcopy(body), namespace, name)
        _typed_decode(rt, body, patched=False)
        old = self._live(rt, namespace, name)
        rv = body["metadata"].get("resourceVersion")
        if rv:
            if rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
        elif rt.custom:
            raise errors.invalid(rt.kind, rt.group, name, [FieldError(
                "metadata.resourceVersion", "Invalid value", "must be specified for an update", "0x0")])
        body["metadata"]["name"] = name
        return self._finish_update(rt, old, body, subresource=subresource, dry_run=dry_run, manager=manager,
                                   ctx=ctx)

    def patch(self, rt: ResourceType, namespace: str, name: str, patch: Any, *, patch_type: str,
              subresource: str, dry_run: bool, manager: str | None, force: bool,
              ctx: WriteContext | None = None) -> tuple[dict[str, Any], bool]:
        """Apply a patch; returns (object, created). Apply patches create absent objects."""
        ctx = ctx or WriteContext()
        live = self.storage.get(rt.storage_key, namespace if rt.namespaced else "", name)
        if patch_type == "apply":
            if not manager:
                raise errors.invalid("PatchOptions", "meta.k8s.io", "", [FieldError(
                    "fieldManager", "Required value", "is required for apply patch")])
            return self._apply(rt, namespace, name, live, patch, subresource=subresource, dry_run=dry_run,
                               manager=manager, force=force, ctx=ctx)
        if force:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [FieldError(
                "force", "Forbidden", "may not be specified for non-apply patch", True)])
        if live is None:
            raise errors.not_found(rt.plural, rt.group, name)
        current = objects.with_version(live, rt)
        if patch_type == "merge":
            if not isinstance(patch, dict):
                raise errors.bad_request("merge patch must be a JSON object")
            patched = merge_patch(current, patch)
            _typed_decode(rt, patched, patched=True)
        elif patch_type == "json":
            patched = json_patch(current, patch)
            _typed_decode(rt, patched, patched=True)
        elif patch_type == "strategic":
            if rt.custom:
                raise errors.strategic_merge_unsupported()
            patched = strategic_merge_patch(rt, current, patch)
        else:
            raise errors.unsupported_media_type(patch_type)
        patched = self._check_body(rt, patched, namespace, name)
        patched_rv = patched["metadata"].get("resourceVersion")
        if patched_rv and patched_rv != live["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
        return self._finish_update(rt, live, patched, subresource=subresource, dry_run=dry_run,
                                   manager=manager or "unknown", ctx=ctx), False

    def _apply(self, rt: ResourceType, namespace: str, name: str, live: dict[str, Any] | None, config: Any, *,
               subresource: str, dry_run: bool, manager: str, force: bool, ctx: WriteContext
               ) -> tuple[dict[str, Any], bool]:
        sent_meta = config.get("metadata") if isinstance(config, dict) else None
        sent_meta = sent_meta if isinstance(sent_meta, dict) else {}
        config = self._check_body(rt, copy.deepcopy(config), namespace, name)
        if not config.get("apiVersion") or not config.get("kind"):
            raise errors.bad_request("invalid object: apiVersion and kind must be set in an apply configuration")
        if config["metadata"].get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        if ctx.field_validation != "Ignore":
            unknown: list[str] = []
            _known_fields(rt, config, unknown)
            if unknown:
                # structured-merge-diff's error reaches the client as a plain (non-Status) error: 500,
                # no reason, as kube-apiserver answers it; it names the configuration as sent (the URL's
                # namespace is not in it unless the client wrote it there)
                where = f"{sent_meta.get('namespace') or ''}/{sent_meta.get('name') or ''}"
                gvk = f"{rt.api_version}, Kind={rt.kind}"
                detail = (f".{unknown[0]}: field not declared in schema" if len(unknown) == 1 else
                          "errors:\n" + "\n".join(f"  .{p}: field not declared in schema" for p in unknown))
                raise ApiStatusError(500, "", f"failed to create typed patch object ({where}; {gvk}): {detail}")
        if live is None:
            if subresource:
                raise errors.not_found(rt.plural, rt.group, name)
            config["metadata"]["name"] = name
            if config["metadata"].get("resourceVersion"):
                raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
            applied = server_side_apply(rt, None, config, manager=manager, force=force, subresource="",
                                        now=self.now())
            result = _structural(rt, objects.prepare_create(rt, applied, now=self.clock.now()), None, ctx)
            result = events.to_storage(rt, result, creating=True)
            objects.normalise(rt, result, None)
            validation.validate(rt, result, None)
            self._check_namespace(rt, namespace, name)
            return self._store_new(rt, result, dry_run=dry_run), True
        rv = config["metadata"].get("resourceVersion")
        if rv and rv != live["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name, errors.STALE_OBJECT)
        merged = server_side_apply(rt, objects.with_version(live, rt), config, manager=manager, force=force,
                                   subresource=subresource, now=self.now())
        return self._finish_update(rt, live, merged, subresource=subresource, dry_run=dry_run, manager=None,
                                   ctx=ctx), False

    def _live(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        live = self.storage.get(rt.storage_key, namespace if rt.namespaced else "", name)
        if live is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return live

    def _finish_update(self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, subresource: str,
                       dry_run: bool, manager: str | None, ctx: WriteContext) -> dict[str, Any]:
        if subresource and subresource != "status" and not (subresource == "finalize" and rt.kind == "Namespace"):
            raise errors.page_not_found()
        if subresource == "status" and not rt.has_status:
            raise errors.page_not_found()
        result = _structural(rt, objects.prepare_update(rt, old, new, subresource=subresource or None), old, ctx)
        result = events.to_storage(rt, result, creating=False)
        objects.normalise(rt, result, old)
        validation.validate(rt, result, old)
        if manager is not None:
            managed.record_update(rt, old, result, manager=manager, subresource=subresource, now=self.now())
        meta = result["metadata"]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            if dry_run:
                return objects.with_version(result, rt)
            return self._remove(rt, result)
        if objects.semantically_equal(old, result):
            return objects.with_version(old, rt)
        if dry_run:
            return objects.with_version(result, rt)
        stored = self.storage.put(rt.storage_key, result)
        if rt.storage_key == CRD_STORAGE_KEY:
            self.controllers.establish_crd(stored)
            stored = self.storage.get(rt.storage_key, "", stored["metadata"]["name"]) or stored
        if subresource != "status":  # a client writing status itself is left alone
            self.controllers.simulate(rt, stored)
        return objects.with_version(stored, rt)


    # delete -------------------------------------------------------------------------------------

    def delete(self, rt: ResourceType, namespace: str, name: str, options: dict[str, Any] | None, *,
               dry_run: bool) -> tuple[dict[str, Any], bool]:
        """Delete or mark for deletion; returns (response body, whether it is the object itself)."""
        live = self._live(rt, namespace, name)
        preconditions = (options or {}).get("preconditions") or {}
        # rest.BeforeDelete's words; it names the group and *kind* where other conflicts name the resource
        if preconditions.get("uid") and preconditions["uid"] != live["metadata"]["uid"]:
            raise errors.conflict(rt.kind, rt.group, name, (
                f"the UID in the precondition ({preconditions['uid']}) does not match the UID in record "
                f"({live['metadata']['uid']}). The object might have been deleted and then recreated"))
        if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != live["metadata"][
                "resourceVersion"]:
            raise errors.conflict(rt.kind, rt.group, name, (
                f"the ResourceVersion in the precondition ({preconditions['resourceVersion']}) does not match the "
                f"ResourceVersion in record ({live['metadata']['resourceVersion']}). The object might have been "
                "modified"))
        policy = (options or {}).get("propagationPolicy")
        if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
            raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [FieldError(
                "propagationPolicy", "Unsupported value", 'supported values: "Foreground", "Background", "Orphan"',
                policy)])
        for hook in self.delete_hooks:
            hook(rt, live)
        returns_object = rt.custom or (not rt.group and rt.kind in ("Pod", "Namespace", "ServiceAccount")) or (
            rt.kind in ("CustomResourceDefinition", "StorageClass"))
        meta = live["metadata"]
        if policy == "Foreground" and rt.kind != "Namespace" and not meta.get("deletionTimestamp"):
            return self._delete_foreground(rt, live, dry_run=dry_run), True
        if rt.kind == "Namespace" or meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return objects.with_version(live, rt), True
            marked = copy.deepcopy(live)
            marked["metadata"]["deletionTimestamp"] = self.now()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            if "generation" in marked["metadata"]:
                marked["metadata"]["generation"] += 1
            if rt.kind == "Namespace":
                marked.setdefault("status", {})["phase"] = "Terminating"
            if dry_run:
                return objects.with_version(marked, rt), True
            stored = self.storage.put(rt.storage_key, marked)
            if rt.kind == "Namespace":
                self.controllers.sweep_namespace(name)
            return objects.with_version(stored, rt), True
        if dry_run:
            final = live
        else:
            final = self._remove(rt, live, policy)
        if returns_object:
            return objects.with_version(final, rt), True
        details: dict[str, Any] = {"name": name}
        if rt.group:
            details["group"] = rt.group
        details.update({"kind": rt.plural, "uid": meta["uid"]})
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}, False

    def _delete_foreground(self, rt: ResourceType, live: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
        """Foreground deletion: the object is marked (``deletionTimestamp``, the ``foregroundDeletion``
        finalizer) and answered as it stands; the garbage collector (instant here) then deletes its
        dependents and releases the finalizer, which removes the object unless others remain."""
        marked = copy.deepcopy(live)
        meta = marked["metadata"]
        meta["deletionTimestamp"] = self.now()
        meta["deletionGracePeriodSeconds"] = 0
        if FOREGROUND_FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND_FINALIZER]
        if "generation" in meta:
            meta["generation"] += 1
        if dry_run:
            return objects.with_version(marked, rt)
        stored = self.storage.put(rt.storage_key, marked)
        answer = objects.with_version(stored, rt)
        self.controllers.collect_garbage(meta["uid"], "Foreground")
        current = self.storage.get(rt.storage_key, meta.get("namespace", ""), meta["name"])
        if current is not None and current["metadata"].get("uid") == meta["uid"]:
            released = copy.deepcopy(current)
            released["metadata"]["finalizers"] = [
                f for f in current["metadata"].get("finalizers") or [] if f != FOREGROUND_FINALIZER]
            self._finish_update(rt, current, released, subresource="", dry_run=False,
                                manager="kube-controller-manager", ctx=WriteContext())
        return answer

    def _remove(self, rt: ResourceType, obj: dict[str, Any], policy: str | None = None) -> dict[str, Any]:
        final = self.storage.remove(rt.storage_key, obj)
        self.controllers.collect_garbage(obj["metadata"]["uid"], policy or "Background")
        if rt.storage_key == CRD_STORAGE_KEY:
            self.controllers.drop_crd(obj)
        namespace = obj["metadata"].get("namespace")
        if namespace:
            ns = self.storage.get(NAMESPACE_STORAGE_KEY, "", namespace)
            if ns is not None and ns["metadata"].get("deletionTimestamp"):
                self.controllers.finish_namespace(namespace)
        return objects.with_version(final, rt)


@dataclass
class WriteContext:
    """Per-request write settings and what the write reports back besides the object."""

    field_validation: str = "Warn"  # Ignore, Warn or Strict
    warnings: list[str] = field(default_factory=list)


def _typed_decode(rt: ResourceType, obj: Any, *, patched: bool) -> None:
    """A built-in object goes through its Go type before anything else: what that refuses (decoding.py)
    is a 400 for a body, a 422 quoting the patched object for a JSON or merge patch."""
    problem = None if rt.custom or not isinstance(obj, dict) else decoding.managed_fields_error(obj)
    if problem is None:
        return
    if patched:
        raise errors.undecodable_patch(decoding.go_json(obj), problem)
    raise errors.undecodable(rt.kind, rt.version, problem)


def _known_fields(rt: ResourceType, obj: dict[str, Any], unknown: list[str]) -> dict[str, Any]:
    """``obj`` without the fields its type does not declare (built-in model or CRD schema + ObjectMeta)."""
    if not rt.custom:
        return builtin_schema.prune(rt, obj, unknown)
    if isinstance(obj.get("metadata"), dict):
        obj = {**obj, "metadata": builtin_schema.prune_metadata(obj["metadata"], unknown)}
    if rt.schema:
        return crdschema.prune_and_default(rt.schema, obj, unknown)
    return obj


def _structural(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None,
                ctx: WriteContext) -> dict[str, Any]:
    """Drop undeclared fields (per ``fieldValidation``), default and schema-validate custom resources."""
    unknown: list[str] = []
    result = _known_fields(rt, obj, unknown)
    if unknown and ctx.field_validation == "Strict":
        fields = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise errors.undecodable(rt.kind, rt.version, f"strict decoding error: {fields}")
    if ctx.field_validation == "Warn":
        ctx.warnings.extend(f'unknown field "{p}"' for p in unknown)
    if not rt.custom or not rt.schema:
        return result
    problems = crdschema.validate(rt.schema, result, old)
    if problems:
        raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name") or "", problems)
    return result


def not_allowed_subresource(subresource: str) -> ApiStatusError:
    return errors.page_not_found() if subresource else errors.method_not_allowed()
