"""In-process stand-ins for the controllers every real cluster runs next to its API server.

They act synchronously, inside the write that triggers them, each as its own stored write (a new
resourceVersion and a watch event), so clients observe the same sequence as on a cluster whose
controllers are very fast:
- CRD controller: a stored CRD gets ``NamesAccepted``/``Established`` and its kinds are served; a removed
  CRD takes its objects with it.
- namespace controller: a terminating namespace is emptied (objects with finalizers wait) and removed once
  empty.
- garbage collector: dependents of a removed owner are deleted or orphaned (see ``collect_garbage``).
- optional: the default ServiceAccount and ``kube-root-ca.crt`` in new namespaces (``populate_namespaces``)
  and ready workload status (``simulate_workloads``, see workloads.py).
- ``bootstrap``: what a fresh cluster contains.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, Protocol

from . import objects, workloads
from .errors import ApiStatusError
from .kinds import CRD_STORAGE_KEY, NAMESPACE_STORAGE_KEY, ResourceType
from .patch import managed

if TYPE_CHECKING:
    from datetime import datetime

    from .kinds import Registry
    from .storage import Storage


class _WallClock(Protocol):
    def now(self) -> datetime: ...


class ClusterState(Protocol):
    """What the controllers read and write of the cluster (:class:`.cluster.Cluster` is one); a protocol,
    so that this module does not import the one that imports it."""

    @property
    def storage(self) -> Storage: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def clock(self) -> _WallClock: ...

    @property
    def simulate_workloads(self) -> bool: ...

    @property
    def ca_bundle(self) -> str: ...

    def now(self) -> str: ...

    def create(self, rt: ResourceType, namespace: str, body: Any, *, dry_run: bool, manager: str) -> dict[str, Any]: ...

    def delete(self, rt: ResourceType, namespace: str, name: str, options: dict[str, Any] | None, *,
               dry_run: bool) -> tuple[dict[str, Any], bool]: ...


class Controllers:
    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        # Deployment uid → (pod template, revision): the ReplicaSets a Deployment controller would keep
        self._templates: dict[str, tuple[str, int]] = {}

    def populate_namespace(self, namespace: str) -> None:
        """What controllers put in every new namespace: the ``default`` ServiceAccount and the
        ``kube-root-ca.crt`` ConfigMap (so tests meet them here as they will on a real cluster)."""
        now = self.cluster.now()
        defaults: tuple[tuple[str, dict[str, Any]], ...] = (
            ("serviceaccounts", {"metadata": {"name": "default"}}),
            ("configmaps", {"metadata": {"name": "kube-root-ca.crt", "annotations": {
                "kubernetes.io/description": "Contains a CA bundle that can be used to verify the "
                                             "kube-apiserver when using internal endpoints such as the "
                                             "internal service IP or kubernetes.default.svc. No other usage "
                                             "is guaranteed across distributions of Kubernetes clusters."}},
                            "data": {"ca.crt": self.cluster.ca_bundle}}),
        )
        for plural, body in defaults:
            rt = self.cluster.registry.lookup("", "v1", plural)
            assert rt is not None
            if self.cluster.storage.get(rt.storage_key, namespace, body["metadata"]["name"]) is not None:
                continue
            obj = objects.prepare_create(rt, {**body, "metadata": {**body["metadata"], "namespace": namespace}},
                                         now=self.cluster.clock.now())
            managed.record_update(rt, None, obj, manager="kube-controller-manager", subresource="", now=now)
            self.cluster.storage.put(rt.storage_key, obj)

    def simulate(self, rt: ResourceType, stored: dict[str, Any]) -> None:
        """The instant controller's writes after a stored write (when simulation is on): for a Deployment
        whose pod template is new, the ``deployment.kubernetes.io/revision`` annotation (written through
        the ``status`` subresource, as the Deployment controller's ``UpdateStatus`` does: the status
        strategy keeps annotations and never bumps the generation); then the status."""
        if not self.cluster.simulate_workloads:
            return
        if rt.group == "apps" and rt.kind == "Deployment":
            stored = self._deployment_revision(rt, stored)
        self.write_ready_status(rt, stored)

    def _deployment_revision(self, rt: ResourceType, stored: dict[str, Any]) -> dict[str, Any]:
        meta = stored["metadata"]
        if meta.get("deletionTimestamp"):
            return stored
        template = json.dumps((stored.get("spec") or {}).get("template") or {}, sort_keys=True)
        uid = str(meta.get("uid", ""))
        known = self._templates.get(uid)
        annotations = meta.get("annotations") or {}
        if known is not None and known[0] == template and annotations.get(workloads.REVISION_ANNOTATION):
            return stored
        revision = 1 if known is None else known[1] + (known[0] != template)
        self._templates[uid] = (template, revision)
        if annotations.get(workloads.REVISION_ANNOTATION) == str(revision):
            return stored
        updated = copy.deepcopy(stored)
        updated["metadata"].setdefault("annotations", {})[workloads.REVISION_ANNOTATION] = str(revision)
        now = self.cluster.now()
        managed.record_update(rt, stored, updated, manager="kube-controller-manager", subresource="status", now=now)
        # a real server records the annotation in the status writer's entry (it went through /status)
        entries = managed.load(updated)
        identity = ("kube-controller-manager", "Update", "status", rt.api_version)
        entry = managed.find(entries, identity)
        if entry is None:
            entry = managed.Entry("kube-controller-manager", "Update", rt.api_version, "status", now, set())
            entries.append(entry)
        entry.fields.add(("f:metadata", "f:annotations", f"f:{workloads.REVISION_ANNOTATION}"))
        entry.time = now
        managed.store(updated, entries)
        return self.cluster.storage.put(rt.storage_key, updated)

    def resync_workload_status(self, namespace: str | None = None) -> int:
        """Write the status of every simulated workload again (fresh condition times, same content), as
        controllers do whenever pods change; returns how many objects were written."""
        versions = {"apps": "apps/v1", "batch": "batch/v1", "": "v1"}
        written = 0
        for group, kind in sorted(workloads.SIMULATED):
            rt = self.cluster.registry.lookup_kind(versions[group], kind)
            if rt is None:
                continue
            for obj in list(self.cluster.storage.iterate(rt.storage_key, namespace)):
                status = workloads.ready_status(rt, obj, self.cluster.now())
                if status is None or obj["metadata"].get("deletionTimestamp"):
                    continue
                updated = copy.deepcopy(obj)
                updated["status"] = status
                managed.record_update(rt, obj, updated, manager="kube-controller-manager", subresource="status",
                                      now=self.cluster.now())
                self.cluster.storage.put(rt.storage_key, updated)
                written += 1
        return written

    def write_ready_status(self, rt: ResourceType, stored: dict[str, Any]) -> None:
        """The status a healthy workload's controller reports, written through the subresource if it
        differs from the stored one (conditions' times refreshed)."""
        status = workloads.needs_update(rt, stored, self.cluster.now())
        if status is None:
            return
        updated = copy.deepcopy(stored)
        updated["status"] = status
        managed.record_update(rt, stored, updated, manager="kube-controller-manager", subresource="status",
                              now=self.cluster.now())
        self.cluster.storage.put(rt.storage_key, updated)

    def collect_garbage(self, owner_uid: str, policy: str) -> None:
        """The garbage collector, modelled as instant: dependents of a removed owner are deleted
        (Background/Foreground) unless another owner of theirs still exists, in which case — and with
        Orphan — only the reference to the removed owner is dropped. Refused deletes are skipped."""
        for key, namespace, name in self.cluster.storage.dependents(owner_uid):
            dependent = self.cluster.storage.get(key, namespace, name)
            rt = self.cluster.registry.lookup_storage(key)
            if dependent is None or rt is None:
                continue
            refs = dependent["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != owner_uid]
            if policy != "Orphan" and not any(self._owner_exists(r, namespace) for r in others):
                if not dependent["metadata"].get("deletionTimestamp"):
                    try:
                        self.cluster.delete(rt, namespace, name, {"propagationPolicy": policy}, dry_run=False)
                    except ApiStatusError:
                        continue
                continue
            updated = copy.deepcopy(dependent)
            if others:
                updated["metadata"]["ownerReferences"] = others
            else:
                updated["metadata"].pop("ownerReferences", None)
            managed.record_update(rt, dependent, updated, manager="kube-controller-manager", subresource="",
                                  now=self.cluster.now())
            self.cluster.storage.put(key, updated)

    def _owner_exists(self, ref: dict[str, Any], namespace: str) -> bool:
        rt = self.cluster.registry.lookup_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rt is None:
            return False
        owner = self.cluster.storage.get(rt.storage_key, namespace if rt.namespaced else "", str(ref.get("name", "")))
        return owner is not None and owner["metadata"].get("uid") == ref.get("uid")

    def sweep_namespace(self, namespace: str) -> None:
        """The namespace controller's work: delete everything in it (objects refused by a delete hook,
        like a denying webhook, stay and keep the namespace Terminating)."""
        for key in self.cluster.storage.namespaces_in_use(namespace):
            rt = self.cluster.registry.lookup_storage(key)
            if rt is None:
                continue
            for obj in list(self.cluster.storage.iterate(key, namespace)):
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    self.cluster.delete(rt, namespace, obj["metadata"]["name"], None, dry_run=False)
                except ApiStatusError:
                    continue
        self.finish_namespace(namespace)

    def finish_namespace(self, namespace: str) -> None:
        if self.cluster.storage.namespaces_in_use(namespace):
            return
        ns = self.cluster.storage.get(NAMESPACE_STORAGE_KEY, "", namespace)
        if ns is not None:
            self.cluster.storage.remove(NAMESPACE_STORAGE_KEY, ns)

    def establish_crd(self, crd: dict[str, Any]) -> None:
        self.cluster.registry.register_crd(crd)
        if crd["metadata"].get("deletionTimestamp"):
            return
        status = copy.deepcopy(crd.get("status") or {})
        names = copy.deepcopy(crd["spec"].get("names") or {})
        names.setdefault("singular", names.get("kind", "").lower())
        names.setdefault("listKind", names.get("kind", "") + "List")
        now = self.cluster.now()
        wanted = [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted"},
        ]
        existing = {c.get("type"): c for c in status.get("conditions") or []}
        conditions = []
        for cond in wanted:
            old = existing.get(cond["type"])
            if old and old.get("status") == cond["status"]:
                conditions.append(old)
            else:
                conditions.append({**cond, "lastTransitionTime": now})
        storage_versions = [v["name"] for v in crd["spec"].get("versions") or [] if v.get("storage")]
        stored_versions = list(status.get("storedVersions") or [])
        for v in storage_versions:
            if v not in stored_versions:
                stored_versions.append(v)
        new_status = {"conditions": conditions, "acceptedNames": names, "storedVersions": stored_versions}
        if status == new_status:
            return
        updated = copy.deepcopy(crd)
        updated["status"] = new_status
        self.cluster.storage.put(CRD_STORAGE_KEY, updated)

    def drop_crd(self, crd: dict[str, Any]) -> None:
        types = self.cluster.registry.crd_types(crd["metadata"]["name"])
        if types:
            self.cluster.storage.drop_table(types[0].storage_key)
        self.cluster.registry.unregister_crd(crd["metadata"]["name"])

    def bootstrap(self) -> None:
        """The objects a fresh cluster has: the system namespaces and the cluster-admin role."""
        ns_type = self.cluster.registry.lookup("", "v1", "namespaces")
        role_type = self.cluster.registry.lookup("rbac.authorization.k8s.io", "v1", "clusterroles")
        assert ns_type is not None and role_type is not None
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.cluster.create(ns_type, "", {"metadata": {"name": name}}, dry_run=False, manager="kube-apiserver")
        self.cluster.create(role_type, "", {
            "metadata": {"name": "cluster-admin", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}],
        }, dry_run=False, manager="kube-apiserver")
