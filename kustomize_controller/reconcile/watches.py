"""What events reconcile which Kustomizations (upstream ``SetupWithManager``, indexers, predicates).

Pure functions over plain objects; the application wires them to informers and the workqueue.

- **Kustomization events**: a create always enqueues; an update enqueues when ``metadata.generation``
  changed, the ``reconcile.fluxcd.io/requestedAt`` annotation changed, or deletion started
  (``deletionTimestamp`` appeared — the API server bumps generation then, but we do not rely on it).
  Status-only and label-only updates do not. Beyond upstream: a change of the
  ``kustomize.toolkit.fluxcd.io/drift-detection`` annotation also enqueues (it stands in for a spec
  field, docs/drift.md), so switching back to ``enabled`` corrects drift at once; so does a change of
  the change-management annotations (``approval``, ``approved-plan``, ``sync-windows``), so an
  approval is applied at once (docs/change-management.md).
- **Source events**: Kustomizations are indexed by ``<kind>`` → ``<sourceNamespace>/<sourceName>``
  (the source namespace defaults to the Kustomization's). A source update passes when its artifact
  appeared or its revision changed; creates and deletes pass. Mapping: no artifact → nothing; else
  the indexed Kustomizations, minus those that are Ready or Reconciling and already attempted this
  revision, sorted dependencies-first.
- **ConfigMap/Secret events** (label-selected, metadata only): indexed by the ConfigMaps/Secrets a
  Kustomization references (``kubeConfig``, ``postBuild.substituteFrom`` incl. optional ones,
  ``decryption.secretRef``); an update passes when the resourceVersion changed. Mapped the same way
  without the revision filter.
- A dependency cycle among the mapped Kustomizations is logged by the caller and nothing is
  enqueued (upstream behaviour).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kustomize_controller.api.changes import GATE_ANNOTATIONS
from kustomize_controller.api.drift import DRIFT_DETECTION_ANNOTATION
from kustomize_controller.api.meta import RECONCILE_REQUEST_ANNOTATION
from kustomize_controller.reconcile.ordering import ObjectKey, dependent_of, sort_dependents

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _requested_at(obj: Obj) -> str | None:
    annotations = _meta(obj).get("annotations") or {}
    value = annotations.get(RECONCILE_REQUEST_ANNOTATION)
    return value if isinstance(value, str) else None


def _annotation(obj: Obj, key: str) -> Any:
    return (_meta(obj).get("annotations") or {}).get(key)


def kustomization_update_passes(old: Obj, new: Obj) -> bool:
    if _meta(old).get("generation") != _meta(new).get("generation"):
        return True
    if _requested_at(old) != _requested_at(new):
        return True
    if any(_annotation(old, key) != _annotation(new, key) for key in (DRIFT_DETECTION_ANNOTATION, *GATE_ANNOTATIONS)):
        return True
    return _meta(old).get("deletionTimestamp") is None and _meta(new).get("deletionTimestamp") is not None


def source_index_key(ks: Obj, kind: str) -> str | None:
    """The index value of a Kustomization for source kind ``kind`` (None when it uses another kind)."""
    ref = _spec(ks).get("sourceRef") or {}
    if ref.get("kind") != kind:
        return None
    namespace = ref.get("namespace") or _meta(ks).get("namespace", "")
    return f"{namespace}/{ref.get('name', '')}"


def _artifact_revision(source: Obj) -> str | None:
    status = source.get("status") or {}
    artifact = status.get("artifact") if isinstance(status, Mapping) else None
    if not isinstance(artifact, Mapping):
        return None
    revision = artifact.get("revision")
    return revision if isinstance(revision, str) else ""


def source_update_passes(old: Obj, new: Obj) -> bool:
    old_rev, new_rev = _artifact_revision(old), _artifact_revision(new)
    if new_rev is None:
        return False
    return old_rev is None or old_rev != new_rev


def _condition_true(ks: Obj, type_: str) -> bool:
    status = ks.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == type_:
            return bool(condition.get("status") == "True")
    return False


def requests_for_source(source: Obj, indexed: Iterable[Obj]) -> list[ObjectKey]:
    """Kustomizations to enqueue for a source event (raises CircularDependencyError)."""
    revision = _artifact_revision(source)
    if revision is None:
        return []
    candidates = []
    for ks in indexed:
        attempted = (ks.get("status") or {}).get("lastAttemptedRevision")
        busy_or_ready = _condition_true(ks, "Ready") or _condition_true(ks, "Reconciling")
        if busy_or_ready and attempted == revision:
            continue
        candidates.append(dependent_of(ks))
    return sort_dependents(candidates)


def config_update_passes(old: Obj, new: Obj) -> bool:
    return _meta(old).get("resourceVersion") != _meta(new).get("resourceVersion")


def config_map_index_keys(ks: Obj) -> list[str]:
    """``<namespace>/<name>`` of every ConfigMap a Kustomization reads."""
    namespace = _meta(ks).get("namespace", "")
    spec = _spec(ks)
    keys: list[str] = []
    kube_config = spec.get("kubeConfig") or {}
    if (kube_config.get("configMapRef") or {}).get("name"):
        keys.append(f"{namespace}/{kube_config['configMapRef']['name']}")
    for ref in (spec.get("postBuild") or {}).get("substituteFrom") or []:
        if ref.get("kind") == "ConfigMap" and ref.get("name"):
            keys.append(f"{namespace}/{ref['name']}")
    return keys


def secret_index_keys(ks: Obj) -> list[str]:
    """``<namespace>/<name>`` of every Secret a Kustomization reads."""
    namespace = _meta(ks).get("namespace", "")
    spec = _spec(ks)
    keys: list[str] = []
    decryption = spec.get("decryption") or {}
    if (decryption.get("secretRef") or {}).get("name"):
        keys.append(f"{namespace}/{decryption['secretRef']['name']}")
    kube_config = spec.get("kubeConfig") or {}
    if (kube_config.get("secretRef") or {}).get("name"):
        keys.append(f"{namespace}/{kube_config['secretRef']['name']}")
    for ref in (spec.get("postBuild") or {}).get("substituteFrom") or []:
        if ref.get("kind") == "Secret" and ref.get("name"):
            keys.append(f"{namespace}/{ref['name']}")
    return keys


def requests_for_config(indexed: Iterable[Obj]) -> list[ObjectKey]:
    """Kustomizations to enqueue for a ConfigMap/Secret event (raises CircularDependencyError)."""
    return sort_dependents(dependent_of(ks) for ks in indexed)
