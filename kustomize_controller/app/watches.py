"""What enqueues a Kustomization: the controller's watches and the informer indexes they read.

- The Kustomizations themselves (the generation/requestedAt predicate); a deleting, deleted or suspended
  one is announced as *final* to the health-wait hooks, so no released wait outlives it.
- GitRepository, OCIRepository, Bucket (and ExternalArtifact behind its gate) through a per-kind index
  on ``spec.sourceRef``, dependencies first (``requests_for_source``).
- Label-selected ConfigMaps and Secrets (metadata only), through the indexes of the ConfigMaps/Secrets
  each Kustomization reads; none with ``DisableConfigWatchers``.
- With ``EnableDependencyQueueing``: a Kustomization that becomes ready enqueues the Kustomizations whose
  ``dependsOn`` names it (:func:`wire_dependents`).

Every mapping is pure (``reconcile/watches.py``, ``reconcile/dependents.py``); this module only ties them
to informers and the controller. A dependency cycle is logged and maps to nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kustomize_controller.api.kustomization import KIND
from kustomize_controller.reconcile.dependents import (
    DEPENDS_ON_INDEX,
    DependentWaker,
    dependency_index_keys,
    dependency_update_passes,
)
from kustomize_controller.reconcile.interrupt import EnqueueHooks, TriggerSource
from kustomize_controller.reconcile.ordering import CircularDependencyError, ObjectKey, object_key
from kustomize_controller.reconcile.watches import (
    config_map_index_keys,
    config_update_passes,
    kustomization_update_passes,
    requests_for_config,
    requests_for_source,
    secret_index_keys,
    source_index_key,
    source_update_passes,
)
from kustomize_controller.runtime.controller import Controller, Request
from kustomize_controller.runtime.informer import Informer
from kustomize_controller.runtime.logs import get_logger
from kustomize_controller.runtime.manager import Manager
from kustomize_controller.settings import Settings

_log = get_logger("setup")

CONFIGMAP_INDEX = "configmaps"
SECRET_INDEX = "secrets"


def source_index(kind: str) -> str:
    return f"sourceRef:{kind}"


def _requests(keys: Iterable[ObjectKey]) -> list[Request]:
    return [Request(namespace=k.namespace, name=k.name) for k in keys]


def _map_with_log(func: Callable[[Any], list[Request]], what: str) -> Callable[[Any], list[Request]]:
    def mapped(obj: Any) -> list[Request]:
        try:
            return func(obj)
        except CircularDependencyError as err:
            meta = obj.get("metadata") or {}
            _log.error(f"failed to sort dependencies for {what}", error=str(err),
                       name=meta.get("name"), namespace=meta.get("namespace"))
            return []
    return mapped


def wire_watches(
    controller: Controller,
    manager: Manager,
    kustomizations: Informer,
    sources: dict[str, Informer],
    settings: Settings,
    watch_namespace: str | None,
    hooks: EnqueueHooks | None,
) -> None:
    def announce(kind: str, obj: Any, requests: list[Request], *, final: bool = False) -> list[Request]:
        # CancelHealthCheckOnNewRevision: tell a reconcile of these objects that waits on health
        # checks what enqueued them again (upstream's wrapped event handlers).
        if hooks is not None:
            meta = obj.get("metadata") or {}
            source = TriggerSource(kind=kind, namespace=meta.get("namespace", ""), name=meta.get("name", ""))
            for request in requests:
                hooks.dispatch(request, source, final=final)
        return requests

    def own_event(obj: Any) -> list[Request]:
        # final: deleting, deleted (no longer cached) or suspended — no health wait should go on
        request = Request.for_object(obj)
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        final = (
            bool(meta.get("deletionTimestamp"))
            or bool(spec.get("suspend"))
            or kustomizations.get(f"{request.namespace}/{request.name}") is None
        )
        return announce(KIND, obj, [request], final=final)

    controller.watch(
        kustomizations,
        map_func=own_event,
        predicate=lambda old, new: old is None or kustomization_update_passes(old, new),
    )
    for kind, informer in sources.items():
        index = source_index(kind)
        kustomizations.add_indexer(index, _source_indexer(kind))

        def map_source(src: Any, index: str = index, kind: str = kind) -> list[Request]:
            meta = src.get("metadata") or {}
            indexed = kustomizations.store.by_index(index, f"{meta.get('namespace', '')}/{meta.get('name', '')}")
            return announce(kind, src, _requests(requests_for_source(src, indexed)))

        controller.watch(
            informer,
            map_func=_map_with_log(map_source, "revision change"),
            predicate=lambda old, new: old is None or source_update_passes(old, new),
        )
    if settings.feature_gates.enabled("DisableConfigWatchers"):
        return
    for kind, index, keys in (
        ("ConfigMap", CONFIGMAP_INDEX, config_map_index_keys),
        ("Secret", SECRET_INDEX, secret_index_keys),
    ):
        kustomizations.add_indexer(index, keys)
        informer = manager.informer(
            "v1",
            kind,
            namespace=watch_namespace,
            label_selector=settings.watch_configs_label_selector or None,
            metadata_only=True,
        )

        def map_config(obj: Any, index: str = index, kind: str = kind) -> list[Request]:
            meta = obj.get("metadata") or {}
            indexed = kustomizations.store.by_index(index, f"{meta.get('namespace', '')}/{meta.get('name', '')}")
            return announce(kind, obj, _requests(requests_for_config(indexed)))

        controller.watch(
            informer,
            map_func=_map_with_log(map_config, "config dependency change"),
            predicate=lambda old, new: old is None or config_update_passes(old, new),
        )


def wire_dependents(controller: Controller, kustomizations: Informer) -> None:
    """``EnableDependencyQueueing``: a Kustomization that becomes ready enqueues its dependents at once
    (reconcile/dependents.py); ``--requeue-dependency`` stays the fallback poll."""
    kustomizations.add_indexer(DEPENDS_ON_INDEX, dependency_index_keys)
    waker = DependentWaker(
        indexed=lambda key: kustomizations.store.by_index(DEPENDS_ON_INDEX, key),
        lookup=kustomizations.get,
    )

    def wake(obj: Any) -> list[Request]:
        # Only an update can make a Kustomization ready (the predicate refuses adds); the controller's
        # watch also maps deletes, and the store drops an object before they are handled.
        if kustomizations.get(str(object_key(obj))) is None:
            return []
        return _requests(waker.dependents(obj))

    controller.watch(
        kustomizations,
        map_func=wake,
        predicate=lambda old, new: old is not None and dependency_update_passes(old, new),
    )


def _source_indexer(kind: str) -> Callable[[Any], list[str]]:
    def index(obj: Any) -> list[str]:
        key = source_index_key(obj, kind)
        return [key] if key else []

    return index

