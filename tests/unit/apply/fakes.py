"""An in-memory ``ApplyClient`` for unit tests: a naive SSA (deep merge), call log and fault injection.

It is not a Kubernetes API server: server-side apply is modelled as a deep merge of the payload onto
the stored object (lists replaced), which is enough to exercise the engine's decisions. The embedded
API server covers real semantics in tests/integration/apply.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import ApiError, NotFoundError

Key = tuple[str, str, str, str]  # group, kind, namespace, name


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base.get(k), v)
        return out
    return copy.deepcopy(patch)


@dataclass
class Call:
    verb: str
    key: Key
    dry_run: bool = False
    body: Any = None


@dataclass
class FakeClient:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    unknown_kinds: set[str] = field(default_factory=set)
    # (verb, name, dry_run) -> exception or a callable returning one (None = no failure this time)
    faults: dict[tuple[str, str, bool], ApiError | Callable[[], ApiError | None]] = field(default_factory=dict)
    # delete leaves the object in place with a deletionTimestamp for this many GETs
    linger_gets: int = 0
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _lingering: dict[Key, int] = field(default_factory=dict)

    # --- helpers -------------------------------------------------------------------------------
    @staticmethod
    def key_of(obj: Mapping[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        return (
            _group(str(obj.get("apiVersion", ""))),
            str(obj.get("kind", "")),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
        )

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta.get('name')}")
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[self.key_of(stored)] = stored
        return stored

    def writes(self) -> list[Call]:
        return [c for c in self.calls if c.verb in ("apply", "patch", "delete") and not c.dry_run]

    def _fault(self, verb: str, name: str, dry_run: bool) -> None:
        fault = self.faults.get((verb, name, dry_run))
        if fault is None:
            return
        err = fault() if callable(fault) else fault
        if err is not None:
            raise err

    def _check_kind(self, api_version: str, kind: str) -> None:
        if kind in self.unknown_kinds:
            raise NoKindMatchError(api_version, kind)

    # --- ApplyClient ---------------------------------------------------------------------------
    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        key = (_group(api_version), kind, namespace or "", name)
        self.calls.append(Call("get", key))
        self._check_kind(api_version, kind)
        self._fault("get", name, False)
        if key in self._lingering:
            self._lingering[key] -= 1
            if self._lingering[key] < 0:
                del self._lingering[key]
                self.objects.pop(key, None)
        if key not in self.objects:
            raise NotFoundError(f'{kind.lower()}s "{name}" not found', status=404, kind=kind, name=name)
        return copy.deepcopy(self.objects[key])

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
        self.calls.append(Call("list", (_group(api_version), kind, namespace or "", "")))
        self._check_kind(api_version, kind)
        self._fault("list", kind, False)
        wanted = dict(p.split("=", 1) for p in (label_selector or "").split(",") if "=" in p)
        out = []
        for (group, k, ns, _), obj in self.objects.items():
            if group != _group(api_version) or k != kind or (namespace and ns != namespace):
                continue
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if all(labels.get(a) == b for a, b in wanted.items()):
                out.append(copy.deepcopy({"apiVersion": api_version, "kind": kind, "metadata": obj["metadata"]}
                                         if metadata_only else obj))
        return out

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        key = self.key_of(obj)
        self.calls.append(Call("apply", key, dry_run, copy.deepcopy(dict(obj))))
        self._check_kind(str(obj.get("apiVersion", "")), key[1])
        self._fault("apply", key[3], dry_run)
        existing = self.objects.get(key)
        merged = _merge(existing or {}, dict(obj))
        meta = merged.setdefault("metadata", {})
        if existing is None:
            meta["uid"] = f"uid-{key[3]}"
            meta["resourceVersion"] = "" if dry_run else str(next(self._rv))
        elif merged != existing and not dry_run:
            meta["resourceVersion"] = str(next(self._rv))
        if not dry_run:
            self.objects[key] = merged
        return copy.deepcopy(merged)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        patch_type: str,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        key = (_group(api_version), kind, namespace or "", name)
        self.calls.append(Call("patch", key, dry_run, copy.deepcopy(body)))
        self._fault("patch", name, dry_run)
        if key not in self.objects:
            raise NotFoundError("not found", status=404, kind=kind, name=name)
        import jsonpatch

        patched = jsonpatch.apply_patch(self.objects[key], body)
        if dry_run:
            return copy.deepcopy(patched)
        patched["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = patched
        return copy.deepcopy(patched)

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
        key = (_group(api_version), kind, namespace or "", name)
        self.calls.append(Call("delete", key, dry_run, propagation_policy))
        self._fault("delete", name, dry_run)
        if key not in self.objects:
            raise NotFoundError("not found", status=404, kind=kind, name=name)
        if dry_run:
            return None
        if self.linger_gets:
            self._lingering[key] = self.linger_gets
            self.objects[key]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            return copy.deepcopy(self.objects[key])
        del self.objects[key]
        return None


def cm(name: str, ns: str = "default", data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, **meta},
        "data": data or {"k": "v"},
    }
