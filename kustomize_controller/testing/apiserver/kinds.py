"""The registry of served kinds: built-in types, kinds registered by CRDs, and discovery documents.

A ``ResourceType`` is one (group, version, resource) the server answers for. Objects of every version of a
group/resource share one storage; a custom resource is kept in its CRD's storage version and requests
for its other versions convert (conversion.py). Lookups are dictionary hits; nothing here scans stored
objects.

Contract: registering a CRD replaces the versions that CRD served before (a version dropped from the CRD
stops being served); built-in kinds cannot be replaced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_RW = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    has_status: bool = False
    # metadata.generation is maintained (set to 1 on create, bumped on spec changes)
    generation: bool = False
    # a change of metadata.annotations bumps generation too (Deployment)
    annotations_bump_generation: bool = False
    custom: bool = False
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = _RW
    # field paths (dotted) that cannot change after create
    immutable: tuple[str, ...] = ()
    # openAPIV3Schema of a CRD version (used for list types in server-side apply)
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # a CRD version: the version its objects are stored in, and the CRD's spec.conversion (conversion.py)
    storage_version: str = ""
    conversion: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # a deprecated CRD version: the Warning every request for it gets
    deprecation_warning: str = ""
    # the group whose storage this resource shares (events.k8s.io Events live in core's; see events.py)
    storage_group: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> tuple[str, str]:
        return (self.group if self.storage_group is None else self.storage_group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_resource(self) -> list[dict[str, Any]]:
        """The discovery entries (resource and, when present, its status subresource)."""
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        entries = [main]
        if self.kind == "Namespace" and not self.group:
            entries.append({"name": "namespaces/finalize", "singularName": "", "namespaced": False,
                            "kind": "Namespace", "verbs": ["update"]})
        if self.has_status:
            entries.append({
                "name": f"{self.plural}/status",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            })
        return entries


def _b(group: str, version: str, kind: str, plural: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType(group=group, version=version, kind=kind, plural=plural, namespaced=namespaced,
                        singular=kind.lower(), **kw)


WORKLOAD: dict[str, Any] = {"has_status": True, "generation": True, "categories": ("all",)}

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _b("", "v1", "Namespace", "namespaces", False, short_names=("ns",), has_status=True,
       verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    _b("", "v1", "ConfigMap", "configmaps", short_names=("cm",)),
    _b("", "v1", "Secret", "secrets"),
    _b("", "v1", "Service", "services", short_names=("svc",), has_status=True, categories=("all",),
       immutable=("spec.clusterIP",)),
    _b("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",)),
    _b("", "v1", "Pod", "pods", short_names=("po",), **WORKLOAD),
    _b("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",), has_status=True),
    _b("", "v1", "PodTemplate", "podtemplates"),
    _b("", "v1", "ReplicationController", "replicationcontrollers", short_names=("rc",), **WORKLOAD),
    _b("", "v1", "Event", "events", short_names=("ev",)),
    _b("events.k8s.io", "v1", "Event", "events", short_names=("ev",), storage_group=""),
    _b("apps", "v1", "Deployment", "deployments", short_names=("deploy",), annotations_bump_generation=True,
       immutable=("spec.selector",), **WORKLOAD),
    _b("apps", "v1", "StatefulSet", "statefulsets", short_names=("sts",), immutable=("spec.selector",),
       **WORKLOAD),
    _b("apps", "v1", "DaemonSet", "daemonsets", short_names=("ds",), immutable=("spec.selector",), **WORKLOAD),
    _b("apps", "v1", "ReplicaSet", "replicasets", short_names=("rs",), immutable=("spec.selector",), **WORKLOAD),
    _b("batch", "v1", "Job", "jobs", immutable=("spec.template", "spec.selector"), **WORKLOAD),
    _b("batch", "v1", "CronJob", "cronjobs", short_names=("cj",), **WORKLOAD),
    _b("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    _b("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", immutable=("roleRef",)),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _b("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False,
       immutable=("roleRef",)),
    _b("coordination.k8s.io", "v1", "Lease", "leases"),
    _b("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", short_names=("netpol",), generation=True),
    _b("networking.k8s.io", "v1", "Ingress", "ingresses", short_names=("ing",), has_status=True,
       generation=True),
    _b("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short_names=("pdb",), has_status=True,
       generation=True),
    _b("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, short_names=("sc",),
       immutable=("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")),
    _b("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, short_names=("pc",),
       immutable=("value",)),
    _b("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False,
       short_names=("crd", "crds"), has_status=True, generation=True),
)

CRD_STORAGE_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE_STORAGE_KEY = ("", "namespaces")


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD serves (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    storage = next((v.get("name", "") for v in spec.get("versions") or [] if v.get("storage")), "")
    conversion = spec.get("conversion") if isinstance(spec.get("conversion"), dict) else None
    result = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        result.append(ResourceType(
            group=group,
            version=version["name"],
            kind=names.get("kind", ""),
            plural=names.get("plural", ""),
            singular=names.get("singular") or names.get("kind", "").lower(),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            has_status="status" in subresources,
            generation=True,
            custom=True,
            schema=schema if isinstance(schema, dict) else None,
            storage_version=storage,
            conversion=conversion,
            deprecation_warning=(version.get("deprecationWarning")
                                 or f"{group}/{version['name']} {names.get('kind', '')} is deprecated")
            if version.get("deprecated") else "",
        ))
    return result


class Registry:
    """Maps (group, version, plural) and (group, version, kind) to served ``ResourceType``s."""

    def __init__(self) -> None:
        self._by_resource: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self._crd_types: dict[str, list[ResourceType]] = {}
        self._group_order: list[str] = []
        # (group, version) -> number of served resources, so routing checks are dict hits
        self._served: dict[tuple[str, str], int] = {}
        for rt in BUILTIN_TYPES:
            self._add(rt)

    def _add(self, rt: ResourceType) -> None:
        self._by_resource[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.group, rt.version, rt.kind)] = rt
        self._served[(rt.group, rt.version)] = self._served.get((rt.group, rt.version), 0) + 1
        if rt.group and rt.group not in self._group_order:
            self._group_order.append(rt.group)

    def _remove(self, rt: ResourceType) -> None:
        if self._by_resource.pop((rt.group, rt.version, rt.plural), None) is None:
            return
        self._by_kind.pop((rt.group, rt.version, rt.kind), None)
        key = (rt.group, rt.version)
        self._served[key] -= 1
        if not self._served[key]:
            del self._served[key]
        if rt.group and not any(g == rt.group for g, _ in self._served):
            self._group_order.remove(rt.group)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_resource.get((group, version, plural))

    def lookup_storage(self, key: tuple[str, str]) -> ResourceType | None:
        """A served type stored under ``key`` (any of its versions)."""
        for rt in self._by_resource.values():
            if rt.storage_key == key:
                return rt
        return None

    def lookup_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return self._by_kind.get((group, version, kind))

    def register_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        name = crd["metadata"]["name"]
        self.unregister_crd(name)
        # a version clashing with a type already served (a built-in, another CRD) is not taken over
        types = [rt for rt in types_from_crd(crd) if (rt.group, rt.version, rt.plural) not in self._by_resource]
        for rt in types:
            self._add(rt)
        self._crd_types[name] = types
        return types

    def unregister_crd(self, name: str) -> None:
        for rt in self._crd_types.pop(name, []):
            self._remove(rt)

    def crd_types(self, name: str) -> list[ResourceType]:
        return list(self._crd_types.get(name, []))

    def types_in(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._by_resource.items() if g == group and v == version]

    def group_versions(self) -> list[tuple[str, str]]:
        return sorted(self._served)

    # discovery -------------------------------------------------------------------------------------

    def _versions(self, group: str) -> list[str]:
        return sorted((v for g, v in self._served if g == group), key=_version_priority)

    def group_exists(self, group: str) -> bool:
        return group in self._group_order

    def version_exists(self, group: str, version: str) -> bool:
        return (group, version) in self._served

    def api_versions(self) -> dict[str, Any]:
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}

    def api_group(self, group: str) -> dict[str, Any]:
        versions = self._versions(group)
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def api_group_list(self) -> dict[str, Any]:
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [self.api_group(g) for g in self._group_order]}

    def resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for (g, v, _), rt in self._by_resource.items():
            if g == group and v == version:
                resources.extend(rt.api_resource())
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version ordering: GA > beta > alpha, higher numbers first, others last by name."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (3, 0, 0, version)
    major = int(match.group(1))
    level = {"beta": 1, "alpha": 2}.get(match.group(2) or "", 0)
    minor = int(match.group(3) or 0)
    return (level, -major, -minor, version)
