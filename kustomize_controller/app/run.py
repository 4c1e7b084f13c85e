"""Composition: settings → client, manager, informers, build pipeline, reconciler, controller.

``run_controller(settings)`` is what ``kustomize-controller`` (no subcommand) executes; it returns the
process exit status (0 after a graceful stop, 1 on a lost lease or a fatal start-up error). It reads as
the order things are made in; each piece is a named builder below it, and the watches that feed the
controller are wired in :mod:`.watches`.

- Kustomizations are watched in all namespaces, or in ``RUNTIME_NAMESPACE`` with
  ``--watch-all-namespaces=false``, filtered by ``--watch-label-selector`` for sharding; the sources
  (GitRepository, OCIRepository, Bucket, and ExternalArtifact behind its gate) in the same namespaces.
- Health waits release their worker (up to ``--concurrent-health-checks`` at once) unless
  ``HoldWorkerDuringHealthChecks``; released waits listen for their Kustomization's deletion and
  suspension through the same hooks as ``CancelHealthCheckOnNewRevision``.
- Sources and Kustomizations are read from the informer caches (as upstream reads from its cache);
  dependencies, ConfigMaps and Secrets are read from the API server, never cached.
- The conversion webhook runs on every replica, leader or not.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from kustomize_controller.api.kustomization import API_VERSION, KIND
from kustomize_controller.api.meta import CONTROLLER_NAME, LEADER_ELECTION_ID
from kustomize_controller.api.source import SOURCE_API_VERSION, SourceKind, cached_source
from kustomize_controller.app.decryption import workload_identity
from kustomize_controller.app.watches import wire_dependents, wire_watches
from kustomize_controller.apply.staging import parse_group_kind_set
from kustomize_controller.conversion.webhook import ConversionWebhook, WebhookOptions
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import ClientConfig, load_config
from kustomize_controller.kube.errors import NotFoundError
from kustomize_controller.kube.flowcontrol import configure_throttling
from kustomize_controller.kustomize.artifact_cache import ArtifactCache
from kustomize_controller.kustomize.build import (
    BuilderCommand,
    KustomizeBuilder,
    detect_builder,
    gather_size,
    parallel_builds,
)
from kustomize_controller.kustomize.build_cache import BuildCache
from kustomize_controller.kustomize.cache_metrics import CacheMetrics
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.pin import PINNED_KUSTOMIZE
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity
from kustomize_controller.reconcile.apply_options import ApplySettings
from kustomize_controller.reconcile.apply_step import ApplyStepOptions
from kustomize_controller.reconcile.gate.fleet import parse_configmap_ref
from kustomize_controller.reconcile.gate.gate import GateOptions
from kustomize_controller.reconcile.interrupt import EnqueueHooks
from kustomize_controller.reconcile.metrics import GotkMetrics
from kustomize_controller.reconcile.notify import Notifier, WebhookSender
from kustomize_controller.reconcile.reconciler import KustomizationReconciler, ReconcilerOptions
from kustomize_controller.reconcile.source import SourceAccess
from kustomize_controller.reconcile.tenancy import RemoteClients, TenancyOptions
from kustomize_controller.runtime.clock import Clock, RealClock
from kustomize_controller.runtime.collector import SurvivorFreezer
from kustomize_controller.runtime.controller import BusyWorkers, Controller
from kustomize_controller.runtime.cpus import UsableCpus, usable_cpus
from kustomize_controller.runtime.informer import FuncHandler, Informer
from kustomize_controller.runtime.leader import LeaderElectionConfig
from kustomize_controller.runtime.logs import configure_logging, get_logger
from kustomize_controller.runtime.manager import Manager, ManagerOptions
from kustomize_controller.runtime.ratelimit import ItemExponentialRateLimiter
from kustomize_controller.settings import Settings

_log = get_logger("setup")

CONTROLLER = "kustomization"


def leader_election_id(label_selector: str) -> str:
    """Upstream ``GenerateID``: the base id, plus 8 hex of sha256(selector) when sharding."""
    if not label_selector:
        return LEADER_ELECTION_ID
    return f"{LEADER_ELECTION_ID}-{hashlib.sha256(label_selector.encode()).hexdigest()[:8]}"


class _CacheReaders:
    """Reads Kustomizations and sources from the informer caches (or sources directly)."""

    def __init__(self, *, kustomizations: Informer, sources: dict[str, Informer], client: KubeClient, direct: bool):
        self._kustomizations = kustomizations
        self._sources = sources
        self._client = client
        self._direct = direct

    async def get_kustomization(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._kustomizations.get(f"{namespace}/{name}")

    def reads_cache(self, kind: str) -> bool:
        return kind in self._sources and not self._direct

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


async def _configure_throttling(client: KubeClient, settings: Settings) -> None:
    """No client-side limiter where the API server has priority and fairness (kube/flowcontrol.py)."""
    throttling = await configure_throttling(client, qps=settings.kube_api_qps, burst=settings.kube_api_burst)
    if throttling.mode == "priority-and-fairness":
        _log.info("API Priority and Fairness is enabled on the API server: client-side throttling is off",
                  server=client.config.server)
    else:
        _log.info("client-side throttling of API requests", server=client.config.server, mode=throttling.mode,
                  qps=throttling.qps, burst=throttling.burst, probe_error=throttling.probe_error or None)


def _log_builder(command: BuilderCommand, cpus: UsableCpus, settings: Settings) -> None:
    """Say which builder builds, on how many CPUs (and why that many), and warn when it is not the kustomize
    upstream Flux pins."""
    quota = {"cpu_quota": cpus.quota, "cgroup": cpus.cgroup} if cpus.quota is not None else {}
    _log.info("kustomize builder", path=command.argv[0], source=command.source, flavour=command.flavour,
              version=command.version, kustomize_version=command.kustomize_version or None,
              cpus=cpus.count, cpus_from=cpus.source, **quota,
              parallel_builds=parallel_builds(cpus.count, settings.build_concurrency or None),
              batch_size=settings.build_batch_size, batch_wait_s=settings.build_batch_wait.total_seconds(),
              batch_wait_until=gather_size(settings.concurrent))
    if not command.pinned:
        _log.warning("the kustomize builder is not the version upstream Flux pins: some outputs may differ from "
                     "Flux's", path=command.argv[0], kustomize_version=command.kustomize_version or None,
                     pinned=PINNED_KUSTOMIZE)


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
    config = await load_config(kubeconfig=settings.kubeconfig or None)
    client = await _connect(config, settings)
    try:
        command = await detect_builder(clock=clock, kustomize_binary=settings.kustomize_binary or None)
    except Exception as err:
        _log.error("unable to find a kustomize builder", error=str(err))
        await client.close()
        return 1
    except BaseException:
        await client.close()  # stopped while starting: the client is all there is to release yet
        raise
    cpus = usable_cpus()  # once: the lanes and slots of every build are sized for it
    _log_builder(command, cpus, settings)
    runtime_namespace = settings.runtime_namespace or config.namespace
    manager = Manager(
        client=client,
        clock=clock,
        options=ManagerOptions(
            metrics_addr=settings.metrics_addr,
            health_addr=settings.health_addr,
            leader_election=_leader_election(settings, runtime_namespace),
        ),
    )
    _add_conversion_webhook(manager, client, clock, settings, runtime_namespace)
    watched = _watched(manager, settings, runtime_namespace)
    async with _http_session() as session:
        busy = BusyWorkers()  # kept by the controller, read by the builder: builds wait for company while others work
        pipeline, artifacts = _build_pipeline(settings, clock, command, session, manager, cpus.count, busy)
        waits = _health_waits(settings)
        readers = _CacheReaders(
            kustomizations=watched.kustomizations,
            sources=watched.sources,
            client=client,
            direct=settings.feature_gates.enabled("DirectSourceFetch"),
        )
        reconciler = KustomizationReconciler(
            client=client,
            reader=readers,
            sources=readers,
            pipeline=pipeline,
            notifier=_notifier(manager, settings, session, clock),
            metrics=GotkMetrics(manager.metrics.registry),
            clock=clock,
            rng=random.Random(),
            hooks=waits.hooks,
            options=reconciler_options(settings, clock, runtime_namespace, waits,
                                       workload_identity(settings, client, clock, manager)),
        )
        # the cache's copy of our own status writes (reconcile/ownwrites.py), before the controller's handler
        watched.kustomizations.add_handler(FuncHandler(add=lambda obj, _initial: reconciler.observed(obj),
                                                       update=lambda _old, new: reconciler.observed(new)))
        controller = _controller(settings, clock, manager, reconciler, waits, busy)
        wire_watches(controller, manager, watched.kustomizations, watched.sources, settings, watched.namespace,
                     waits.hooks)
        if settings.feature_gates.enabled("EnableDependencyQueueing"):
            wire_dependents(controller, watched.kustomizations)
        manager.add_controller(controller)
        if on_manager is not None:
            on_manager(manager)
        _log.info("starting manager", version=_version())
        freezer = SurvivorFreezer(clock=clock)  # full collections skip the caches (runtime/collector.py)
        freezer.install()
        try:
            return await manager.run(handle_signals=handle_signals)
        finally:
            freezer.close()
            await artifacts.close()
            await client.close()


async def _connect(config: ClientConfig, settings: Settings) -> KubeClient:
    """The controller's client, throttled client-side only where the API server has no priority and fairness."""
    client = KubeClient(config=config, qps=settings.kube_api_qps, burst=settings.kube_api_burst)
    try:
        await _configure_throttling(client, settings)
    except BaseException:
        await client.close()  # stopped (or failed) while starting: nobody else would close it
        raise
    return client


def _leader_election(settings: Settings, runtime_namespace: str) -> LeaderElectionConfig | None:
    if not settings.enable_leader_election:
        return None
    return LeaderElectionConfig(
        name=leader_election_id(settings.watch_label_selector),
        namespace=runtime_namespace,
        identity=f"{socket.gethostname()}_{uuid.uuid4()}",
        lease_duration=settings.leader_election_lease_duration.total_seconds(),
        renew_deadline=settings.leader_election_renew_deadline.total_seconds(),
        retry_period=settings.leader_election_retry_period.total_seconds(),
        release_on_cancel=settings.leader_election_release_on_cancel,
    )


@dataclass(frozen=True)
class _Watched:
    """The informers the controller reads from: its Kustomizations and their sources, by kind."""

    namespace: str | None  # None: all namespaces
    kustomizations: Informer
    sources: dict[str, Informer]


def _watched(manager: Manager, settings: Settings, runtime_namespace: str) -> _Watched:
    namespace = None if settings.watch_all_namespaces else runtime_namespace
    kustomizations = manager.informer(
        API_VERSION, KIND, namespace=namespace, label_selector=settings.watch_label_selector or None
    )
    source_kinds: list[str] = [SourceKind.OCI_REPOSITORY, SourceKind.GIT_REPOSITORY, SourceKind.BUCKET]
    if settings.feature_gates.enabled("ExternalArtifact"):
        source_kinds.append(SourceKind.EXTERNAL_ARTIFACT)
    # every shard caches every source of its namespaces: only the fields the controller reads (cached_source)
    sources = {kind: manager.informer(SOURCE_API_VERSION, kind, namespace=namespace, transform=cached_source)
               for kind in source_kinds}
    return _Watched(namespace=namespace, kustomizations=kustomizations, sources=sources)


def _build_pipeline(settings: Settings, clock: Clock, command: BuilderCommand, session: aiohttp.ClientSession,
                    manager: Manager, cpus: int, busy: BusyWorkers) -> tuple[BuildPipeline, ArtifactCache]:
    """Fetch, extract, build and cache, sized for ``cpus`` (a builder lane each, twice as many parallel builds
    unless ``--build-concurrency`` says otherwise; builds in a burst wait for company while ``busy`` counts other
    working reconciles); the artifact cache is returned too: the caller closes it."""
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
        builder=KustomizeBuilder(command=command, clock=clock, cpus=cpus,
                                 max_parallel=settings.build_concurrency or None, max_batch=settings.build_batch_size,
                                 batch_gather=settings.build_batch_wait.total_seconds(),
                                 batch_gather_size=gather_size(settings.concurrent), demand=busy,
                                 workspace=workspace, metrics=cache_metrics),
        workspace=workspace,
        fetcher=fetcher,
        artifacts=artifacts,
        builds=BuildCache(max_bytes=settings.build_cache_max_size, metrics=cache_metrics),
    )
    return pipeline, artifacts


def _notifier(manager: Manager, settings: Settings, session: aiohttp.ClientSession, clock: Clock) -> Notifier:
    """Kubernetes events, and the notification-controller webhook when ``--events-addr`` names one."""
    # upstream records through client-go's legacy recorder with no host: Events carry an empty
    # reportingInstance (the webhook payload names the host, as fluxcd/pkg's recorder does)
    recorder = manager.event_recorder(reporting_controller=CONTROLLER_NAME)
    webhook = None
    if settings.events_addr:
        webhook = WebhookSender(url=settings.events_addr, session=session, clock=clock)
        manager.add_runnable("events-webhook", webhook.run)
    return Notifier(recorder=recorder, webhook=webhook, clock=clock)


@dataclass(frozen=True)
class _HealthWaits:
    """Who interrupts a health wait, and how many waits may run off the workers (0: none)."""

    hooks: EnqueueHooks | None
    cancel_on_any: bool
    max_detached: int


def _health_waits(settings: Settings) -> _HealthWaits:
    gates = settings.feature_gates
    cancel_on_any = gates.enabled("CancelHealthCheckOnNewRevision")
    # Health waits released from their worker listen for their object's deletion and suspension
    # even without the gate, so no wait outlives its Kustomization (reconcile/interrupt.py).
    max_detached = 0 if gates.enabled("HoldWorkerDuringHealthChecks") else settings.concurrent_health_checks
    hooks = EnqueueHooks() if cancel_on_any or max_detached else None
    return _HealthWaits(hooks=hooks, cancel_on_any=cancel_on_any, max_detached=max_detached)


def reconciler_options(settings: Settings, clock: Clock, runtime_namespace: str,
                       waits: _HealthWaits, identity: WorkloadIdentity | None = None) -> ReconcilerOptions:
    """Every flag and gate the reconciler reads, in one place."""
    gates = settings.feature_gates
    sops_age_secret = (runtime_namespace, settings.sops_age_secret) if settings.sops_age_secret else None
    return ReconcilerOptions(
        requeue_dependency=settings.requeue_dependency,
        interval_jitter_percentage=settings.interval_jitter_percentage,
        progress_status_delay=settings.progress_status_delay.total_seconds(),
        source_access=SourceAccess(
            no_cross_namespace_refs=settings.no_cross_namespace_refs,
            allow_external_artifact=gates.enabled("ExternalArtifact"),
        ),
        additive_cel_dependency_check=gates.enabled("AdditiveCELDependencyCheck"),
        object_level_workload_identity=gates.enabled("ObjectLevelWorkloadIdentity"),
        cancel_health_on_any_enqueue=waits.cancel_on_any,
        first_read_live=settings.enable_leader_election,
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
                remote_clients=RemoteClients(qps=settings.kube_api_qps, burst=settings.kube_api_burst, clock=clock),
            ),
            sops_age_secret=sops_age_secret,
            workload_identity=identity,
            gate=GateOptions(sync_windows_configmap=parse_configmap_ref(settings.sync_windows_configmap)
                             if settings.sync_windows_configmap else None),
        ),
    )


def _controller(settings: Settings, clock: Clock, manager: Manager, reconciler: KustomizationReconciler,
                waits: _HealthWaits, busy: BusyWorkers) -> Controller:
    return Controller(
        name=CONTROLLER,
        reconciler=reconciler,
        clock=clock,
        metrics=manager.metrics,
        concurrency=settings.concurrent,
        rate_limiter=ItemExponentialRateLimiter(
            base_delay=settings.min_retry_delay.total_seconds(),
            max_delay=settings.max_retry_delay.total_seconds(),
        ),
        max_detached=waits.max_detached,
        busy_workers=busy,
    )


def _add_conversion_webhook(manager: Manager, client: KubeClient, clock: Clock, settings: Settings,
                            runtime_namespace: str) -> ConversionWebhook | None:
    """The conversion webhook of the old Kustomization versions, on every replica (no leadership)."""
    if settings.webhook_addr in ("", "0"):
        return None
    webhook = ConversionWebhook(client=client, clock=clock, options=WebhookOptions(
        addr=settings.webhook_addr, url=settings.webhook_url, cert_dir=settings.webhook_cert_dir,
        namespace=runtime_namespace, service_name=settings.webhook_service),
        leading=(lambda: manager.is_leader) if settings.enable_leader_election else (lambda: True))
    manager.add_runnable("conversion-webhook", webhook.run)
    if settings.enable_leader_election:
        manager.add_runnable("conversion-webhook-leader", webhook.leading_started, needs_leader=True)
    return webhook


def _version() -> str:
    from kustomize_controller import __version__

    return __version__
