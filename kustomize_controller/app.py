"""Wiring: settings → client, informers, indexes, watches, build pipeline, reconciler, manager.

``run_controller(settings)`` is what ``kustomize-controller`` (no subcommand) executes; it returns the
process exit status (0 after a graceful stop, 1 on a lost lease or a fatal start-up error).

Watches (reference §6):
- Kustomizations (all namespaces, or ``RUNTIME_NAMESPACE`` with ``--watch-all-namespaces=false``,
  filtered by ``--watch-label-selector`` for sharding) with the generation/requestedAt predicate;
- GitRepository, OCIRepository, Bucket (and ExternalArtifact behind its gate) mapped through a per-kind
  index on ``spec.sourceRef`` to the Kustomizations that use them, dependencies first;
- label-selected ConfigMaps and Secrets (metadata only, unless ``DisableConfigWatchers``) mapped
  through the indexes of the ConfigMaps/Secrets each Kustomization reads.
- with ``EnableDependencyQueueing`` (on by default): a Kustomization that becomes ready enqueues the
  Kustomizations whose ``dependsOn`` names it, through an index on those references.

Health waits release their worker (up to ``--concurrent-health-checks`` at once) unless
``HoldWorkerDuringHealthChecks``; released waits listen for their Kustomization's deletion and
suspension through the same hooks as ``CancelHealthCheckOnNewRevision``.

Sources and Kustomizations are read from the informer caches (as upstream reads from its cache);
dependencies, ConfigMaps and Secrets are read from the API server, never cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import aiohttp

from kustomize_controller.api.kustomization import API_VERSION, KIND
from kustomize_controller.api.meta import CONTROLLER_NAME, LEADER_ELECTION_ID
from kustomize_controller.api.source import SOURCE_API_VERSION, SourceKind
from kustomize_controller.apply.staging import parse_group_kind_set
from kustomize_controller.conversion.webhook import ConversionWebhook, WebhookOptions
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_config
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.kube.flowcontrol import configure_throttling
from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build import KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.build_cache import BuildCache
from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.reconcile.apply_options import ApplySettings
from kustomize_controller.reconcile.apply_step import ApplyStepOptions
from kustomize_controller.reconcile.dependents import (
    DEPENDS_ON_INDEX,
    DependentWaker,
    dependency_index_keys,
    dependency_update_passes,
)
from kustomize_controller.reconcile.interrupt import EnqueueHooks, TriggerSource
from kustomize_controller.reconcile.metrics import GotkMetrics
from kustomize_controller.reconcile.notify import Notifier, WebhookSender
from kustomize_controller.reconcile.ordering import CircularDependencyError, ObjectKey, object_key
from kustomize_controller.reconcile.reconciler import KustomizationReconciler, ReconcilerOptions
from kustomize_controller.reconcile.source import SourceAccess
from kustomize_controller.reconcile.tenancy import RemoteClients, TenancyOptions
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
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.runtime.controller import Controller, Request
from kustomize_controller.runtime.informer import Informer
from kustomize_controller.runtime.leader import LeaderElectionConfig
from kustomize_controller.runtime.logs import configure_logging, get_logger
from kustomize_controller.runtime.manager import Manager, ManagerOptions
from kustomize_controller.runtime.ratelimit import ItemExponentialRateLimiter
from kustomize_controller.settings import Settings

_log = get_logger("setup")

CONTROLLER = "kustomization"
CONFIGMAP_INDEX = "configmaps"
SECRET_INDEX = "secrets"


def leader_election_id(label_selector: str) -> str:
    """Upstream ``GenerateID``: the base id, plus 8 hex of sha256(selector) when sharding."""
    if not label_selector:
        return LEADER_ELECTION_ID
    return f"{LEADER_ELECTION_ID}-{hashlib.sha256(label_selector.encode()).hexdigest()[:8]}"


def source_index(kind: str) -> str:
    return f"sourceRef:{kind}"


def _requests(keys: Iterable[ObjectKey]) -> list[Request]:
    return [Request(namespace=k.namespace, name=k.name) for k in keys]


class _CacheReaders:
    """Reads Kustomizations and sources from the informer caches (or sources directly)."""

    def __init__(self, *, kustomizations: Informer, sources: dict[str, Informer], client: KubeClient, direct: bool):
        self._kustomizations = kustomizations
        self._sources = sources
        self._client = client
        self._direct = direct

    async def get_kustomization(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._kustomizations.get(f"{namespace}/{name}")

    async def get_source(self, *, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self._sources.get(kind)
        if informer is not None and not self._direct:
            return informer.get(f"{namespace}/{name}")
        try:
            return await self._client.get(SOURCE_API_VERSION, kind, name, namespace)
        except NotFoundError:
            return None


@contextlib.asynccontextmanager
async def _http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


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


async def _configure_throttling(client: KubeClient, settings: Settings) -> None:
    """No client-side limiter where the API server has priority and fairness (kube/flowcontrol.py)."""
    throttling = await configure_throttling(client, qps=settings.kube_api_qps, burst=settings.kube_api_burst)
    if throttling.mode == "priority-and-fairness":
        _log.info("API Priority and Fairness is enabled on the API server: client-side throttling is off",
                  server=client.config.server)
    else:
        _log.info("client-side throttling of API requests", server=client.config.server, mode=throttling.mode,
                  qps=throttling.qps, burst=throttling.burst, probe_error=throttling.probe_error or None)


async def run_controller(
    settings: Settings,
    *,
    clock: Clock | None = None,
    handle_signals: bool = True,
    on_manager: Callable[[Manager], None] | None = None,
) -> int:
    """Run the controller until stopped; ``on_manager`` sees the manager before it starts (tests and
    embedders use it to reach ``metrics_url``/``is_leader``)."""
    configure_logging(level=settings.log_level, encoding=settings.log_encoding)
    clock = clock or RealClock()
    gates = settings.feature_gates
    config = await load_config(kubeconfig=settings.kubeconfig or None)
    client = KubeClient(config=config, qps=settings.kube_api_qps, burst=settings.kube_api_burst)
    try:
        await _configure_throttling(client, settings)
        try:
            command = await detect_builder(clock=clock, kustomize_binary=settings.kustomize_binary or None)
        except Exception as err:
            _log.error("unable to find a kustomize builder", error=str(err))
            await client.close()
            return 1
    except BaseException:
        await client.close()  # stopped (or failed) while starting: the client is all there is to release
        raise
    runtime_namespace = settings.runtime_namespace or config.namespace
    leader = None
    if settings.enable_leader_election:
        leader = LeaderElectionConfig(
            name=leader_election_id(settings.watch_label_selector),
            namespace=runtime_namespace,
            identity=f"{socket.gethostname()}_{uuid.uuid4()}",
            lease_duration=settings.leader_election_lease_duration.total_seconds(),
            renew_deadline=settings.leader_election_renew_deadline.total_seconds(),
            retry_period=settings.leader_election_retry_period.total_seconds(),
            release_on_cancel=settings.leader_election_release_on_cancel,
        )
    manager = Manager(
        client=client,
        clock=clock,
        options=ManagerOptions(
            metrics_addr=settings.metrics_addr, health_addr=settings.health_addr, leader_election=leader
        ),
    )
    _add_conversion_webhook(manager, client, clock, settings, runtime_namespace)
    watch_namespace = None if settings.watch_all_namespaces else runtime_namespace
    kustomizations = manager.informer(
        API_VERSION, KIND, namespace=watch_namespace, label_selector=settings.watch_label_selector or None
    )
    source_kinds: list[str] = [SourceKind.OCI_REPOSITORY, SourceKind.GIT_REPOSITORY, SourceKind.BUCKET]
    if gates.enabled("ExternalArtifact"):
        source_kinds.append(SourceKind.EXTERNAL_ARTIFACT)
    sources = {kind: manager.informer(SOURCE_API_VERSION, kind, namespace=watch_namespace) for kind in source_kinds}

    async with _http_session() as session:
        workspace = Workspace()
        swept = workspace.sweep()
        if swept:
            _log.info("removed temporary directories of earlier runs", count=len(swept))
        fetcher = ArtifactFetcher(
            session=session,
            clock=clock,
            retries=settings.http_retry,
            max_size=settings.artifact_max_size,
            env=os.environ,
        )
        cache_metrics = CacheMetrics(manager.metrics.registry)
        artifacts = ArtifactCache(
            workspace=workspace, fetcher=fetcher, max_bytes=settings.artifact_cache_max_size, metrics=cache_metrics
        )
        pipeline = BuildPipeline(
            builder=KustomizeBuilder(command=command, clock=clock, max_parallel=settings.build_concurrency or None),
            workspace=workspace,
            fetcher=fetcher,
            artifacts=artifacts,
            builds=BuildCache(max_bytes=settings.build_cache_max_size, metrics=cache_metrics),
        )
        recorder = manager.event_recorder(reporting_controller=CONTROLLER_NAME, reporting_instance=socket.gethostname())
        webhook = None
        if settings.events_addr:
            webhook = WebhookSender(url=settings.events_addr, session=session, clock=clock)
            manager.add_runnable("events-webhook", webhook.run)
        readers = _CacheReaders(
            kustomizations=kustomizations,
            sources=sources,
            client=client,
            direct=gates.enabled("DirectSourceFetch"),
        )
        sops_age_secret = (runtime_namespace, settings.sops_age_secret) if settings.sops_age_secret else None
        cancel_on_any = gates.enabled("CancelHealthCheckOnNewRevision")
        # Health waits released from their worker listen for their object's deletion and suspension
        # even without the gate, so no wait outlives its Kustomization (reconcile/interrupt.py).
        max_detached = 0 if gates.enabled("HoldWorkerDuringHealthChecks") else settings.concurrent_health_checks
        hooks = EnqueueHooks() if cancel_on_any or max_detached else None
        reconciler = KustomizationReconciler(
            client=client,
            reader=readers,
            sources=readers,
            pipeline=pipeline,
            notifier=Notifier(recorder=recorder, webhook=webhook, clock=clock),
            metrics=GotkMetrics(manager.metrics.registry),
            clock=clock,
            rng=random.Random(),
            hooks=hooks,
            options=ReconcilerOptions(
                requeue_dependency=settings.requeue_dependency,
                interval_jitter_percentage=settings.interval_jitter_percentage,
                progress_status_delay=settings.progress_status_delay.total_seconds(),
                source_access=SourceAccess(
                    no_cross_namespace_refs=settings.no_cross_namespace_refs,
                    allow_external_artifact=gates.enabled("ExternalArtifact"),
                ),
                additive_cel_dependency_check=gates.enabled("AdditiveCELDependencyCheck"),
                object_level_workload_identity=gates.enabled("ObjectLevelWorkloadIdentity"),
                cancel_health_on_any_enqueue=cancel_on_any,
                apply=ApplyStepOptions(
                    concurrent_ssa=settings.concurrent_ssa,
                    no_remote_bases=settings.no_remote_bases,
                    strict_substitutions=gates.enabled("StrictPostBuildSubstitutions"),
                    fail_fast=not gates.enabled("DisableFailFastBehavior"),
                    group_change_log=gates.enabled("GroupChangeLog"),
                    engine=ApplySettings(
                        override_managers=settings.override_managers,
                        custom_stage_kinds=parse_group_kind_set(settings.custom_apply_stage_kinds),
                        migrate_api_version=gates.enabled("MigrateAPIVersion"),
                    ),
                    tenancy=TenancyOptions(
                        default_service_account=settings.default_service_account,
                        insecure_kubeconfig_exec=settings.insecure_kubeconfig_exec,
                        insecure_kubeconfig_tls=settings.insecure_kubeconfig_tls,
                        remote_clients=RemoteClients(
                            qps=settings.kube_api_qps, burst=settings.kube_api_burst, clock=clock
                        ),
                    ),
                    sops_age_secret=sops_age_secret,
                ),
            ),
        )
        controller = Controller(
            name=CONTROLLER,
            reconciler=reconciler,
            clock=clock,
            metrics=manager.metrics,
            concurrency=settings.concurrent,
            rate_limiter=ItemExponentialRateLimiter(
                base_delay=settings.min_retry_delay.total_seconds(),
                max_delay=settings.max_retry_delay.total_seconds(),
            ),
            max_detached=max_detached,
        )
        _wire_watches(controller, manager, kustomizations, sources, settings, watch_namespace, hooks)
        if gates.enabled("EnableDependencyQueueing"):
            _wire_dependents(controller, kustomizations)
        manager.add_controller(controller)
        if on_manager is not None:
            on_manager(manager)
        _log.info("starting manager", version=_version())
        try:
            return await manager.run(handle_signals=handle_signals)
        finally:
            await artifacts.close()
            await client.close()


def _add_conversion_webhook(manager: Manager, client: KubeClient, clock: Clock, settings: Settings,
                            runtime_namespace: str) -> ConversionWebhook | None:
    """The conversion webhook of the old Kustomization versions, on every replica (no leadership)."""
    if settings.webhook_addr in ("", "0"):
        return None
    webhook = ConversionWebhook(client=client, clock=clock, options=WebhookOptions(
        addr=settings.webhook_addr, url=settings.webhook_url, cert_dir=settings.webhook_cert_dir,
        namespace=runtime_namespace),
        leading=(lambda: manager.is_leader) if settings.enable_leader_election else (lambda: True))
    manager.add_runnable("conversion-webhook", webhook.run)
    return webhook


def _wire_watches(
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


def _wire_dependents(controller: Controller, kustomizations: Informer) -> None:
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


def _version() -> str:
    from kustomize_controller import __version__

    return __version__
