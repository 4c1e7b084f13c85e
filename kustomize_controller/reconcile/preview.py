"""What the next reconcile of a Kustomization would do, computed on the live cluster without writing.

``preview_kustomization`` runs the reconcile pipeline up to the server-side dry-run, with the same
building blocks as ``ApplyStep``: read the Kustomization; check out its source artifact (or a local
directory standing in for it, ``local_root``: the artifact root, in which ``spec.path`` selects the
directory, exactly as ``kustomize-controller build``); build with the Kustomization's overlays;
decrypt with its own decryption Secret (and the controller's ``--sops-age-secret`` when given),
else its ServiceAccount's or the caller's own cloud identity (``options.workload_identity``);
substitute from its ``substituteFrom``; stamp the owner labels; impersonate its service account (or
use its remote kubeconfig); then the apply engine's phase A, with the options the apply computes
(``apply_options.py``: takeover of field managers incl. ``options.engine.override_managers``, ignore
rules, MigrateAPIVersion, the previous inventory), and prune's selection,
all through a ``DryRunClient`` (``apply/preview.py``), so nothing is written to the cluster whatever
the Kustomization says (``force``, ``prune``, MigrateAPIVersion). ``spec.suspend`` and ``dependsOn``
are not consulted: the preview shows what a reconcile of the current spec would do. The
``drift-detection`` mode does not filter it (it is checked, as the reconcile checks it): every
difference is shown, drift that ``warn`` mode would keep included (``docs/drift.md``) — except with
``as_applied`` (``kustomize-controller approve``), which plans as the apply does. The preview carries its
plan (id and counts, ``reconcile/gate/plan.py``) and why the controller holds its own (``waiting``).

Errors before the dry-run (not found, source, artifact, build, decryption, tenancy) raise
``PreviewError`` with the controller's message; per-object dry-run failures are part of the result.
Not promised: a MigrateAPIVersion rewrite of managed fields is only dry-run, so a dry-run it would
unblock still fails in the preview; health checks, ``wait`` and ``dependsOn`` readiness (nothing is
applied, nothing to wait for); objects whose Namespace or CRD this revision creates are reported
``created`` unvalidated.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kustomize_controller.api.changes import APPROVAL_REQUIRED_REASON, APPROVED_CONDITION, SYNC_ALLOWED_CONDITION
from kustomize_controller.api.drift import DriftMode, InvalidDriftModeError, drift_mode
from kustomize_controller.api.kustomization import (
    API_VERSION,
    KIND,
    InvalidKustomizationError,
    Kustomization,
    parse_kustomization,
)
from kustomize_controller.api.source import SOURCE_API_VERSION
from kustomize_controller.apply.changeset import Action, ChangeSet, ChangeSetEntry
from kustomize_controller.apply.drift import IgnoreRuleError
from kustomize_controller.apply.inventory import from_change_set, stale_objects
from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
from kustomize_controller.apply.normalize import prepare_objects
from kustomize_controller.apply.objects import Object, split_api_version
from kustomize_controller.apply.preview import DryRunClient, PreviewChange, preview_apply, preview_prune
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.kustomize.errors import KustomizeError
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline, Checkout
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity
from kustomize_controller.kustomize.sops.loader import load_decryptor
from kustomize_controller.kustomize.substitute import KubeVarSource
from kustomize_controller.reconcile import conditions
from kustomize_controller.reconcile.apply_options import ApplySettings, apply_options
from kustomize_controller.reconcile.drift_mode import warn_policy
from kustomize_controller.reconcile.gate.plan import Plan, plan_of
from kustomize_controller.reconcile.source import SourceAccess, SourceError, get_source
from kustomize_controller.reconcile.tenancy import TenancyOptions, TenantClientError, tenant_client
from kustomize_controller.runtime.clock import Clock

ProgressSink = Callable[[str], None]


class PreviewError(Exception):
    """The preview could not get as far as the dry-run (the message says why)."""


@dataclass(frozen=True)
class PreviewOptions:
    local_root: Path | None = None
    no_remote_bases: bool = False
    strict_substitution: bool = True
    tenancy: TenancyOptions = field(default_factory=TenancyOptions)
    sops_age_secret: tuple[str, str] | None = None
    concurrency: int = 4
    engine: ApplySettings = field(default_factory=ApplySettings)  # the controller's apply flags
    # a ServiceAccount's identity for decryption (spec.decryption.serviceAccountName), as the reconcile
    workload_identity: WorkloadIdentity | None = None
    as_applied: bool = False
    """Plan as the apply does (``approve``): in ``drift-detection: warn`` mode, drift that the apply would
    keep is no change. Judged from what the cluster holds — the last applied build digest in the status
    and the managed fields (``drift_mode.py`` layers 2 and 3) — as the controller judges after a restart."""


#: conditions whose ``False`` state means a plan waits (``reconcile/gate``)
_WAITING = ((APPROVED_CONDITION, APPROVAL_REQUIRED_REASON), (SYNC_ALLOWED_CONDITION, ""))


@dataclass(frozen=True)
class Preview:
    subject: str  # Kustomization/namespace/name
    revision: str  # the artifact revision, or "local <dir>"
    changes: list[PreviewChange]
    errors: list[str]
    waiting: list[str] = field(default_factory=list)  # why the controller holds its plan (condition messages)

    @property
    def changed(self) -> bool:
        return any(c.changed for c in self.changes)

    @property
    def plan(self) -> Plan:
        """The plan of these changes, with the id an approval names (``reconcile/gate/plan.py``)."""
        return plan_of(self.revision, self.changes)


def waiting_messages(ks: Kustomization) -> list[str]:
    """The messages of the conditions that say the controller holds a plan (approval, sync window)."""
    out: list[str] = []
    for type_, reason in _WAITING:
        condition = conditions.get(ks.status.conditions, type_)
        if condition is not None and condition.status == "False" and (not reason or condition.reason == reason):
            out.append(f"{type_}={condition.status} {condition.reason}: {condition.message}")
    return out


class _Sources:
    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def reads_cache(self, kind: str) -> bool:
        return False

    async def get_source(self, *, kind: str, namespace: str, name: str) -> dict[str, object] | None:
        try:
            return await self._client.get(SOURCE_API_VERSION, kind, name, namespace)
        except NotFoundError:
            return None


async def preview_kustomization(
    *,
    client: KubeClient,
    pipeline: BuildPipeline,
    clock: Clock,
    namespace: str,
    name: str,
    options: PreviewOptions,
    progress: ProgressSink | None = None,
) -> Preview:
    say: ProgressSink = progress or (lambda message: None)
    subject = f"{KIND}/{namespace}/{name}"
    try:
        obj = await client.get(API_VERSION, KIND, name, namespace)
    except NotFoundError as err:
        raise PreviewError(f"{subject} not found") from err
    except KubeError as err:
        raise PreviewError(f"{subject}: {err}") from err
    try:
        ks = parse_kustomization(obj)
    except InvalidKustomizationError as err:
        raise PreviewError(f"{subject}: {err}") from err
    build_options = BuildOptions.from_kustomization(
        ks, no_remote_bases=options.no_remote_bases, strict_substitution=options.strict_substitution
    )
    try:
        drift_mode(ks.metadata.annotations)
        engine_options = apply_options(ks, options.engine)  # spec.ignore checked before any fetch, as by the apply
    except (InvalidDriftModeError, IgnoreRuleError) as err:
        raise PreviewError(f"{subject}: {err}") from err

    async with contextlib.AsyncExitStack() as stack:
        try:
            revision, checkout = await stack.enter_async_context(
                _checkout(ks_subject=subject, ks=ks, client=client, pipeline=pipeline, options=options,
                          path=build_options.path, say=say)
            )
            tenant = await stack.enter_async_context(tenant_client(ks, client=client, options=options.tenancy))
            decryptor = None
            if ks.spec.decryption is not None:
                secret_ref = ks.spec.decryption.secret_ref
                identity = options.workload_identity
                decryptor = await load_decryptor(
                    client=client, namespace=namespace, secret_name=secret_ref.name if secret_ref else None,
                    global_age_secret=options.sops_age_secret,
                    workload=None if identity is None else identity.for_kustomization(ks),
                )
                stack.callback(decryptor.close)
            say(f"building {subject} at {revision}")
            result = await pipeline.build(
                checkout, build_options, decryptor=decryptor, var_source=KubeVarSource(client, namespace)
            )
        except (KustomizeError, SourceError, TenantClientError, KubeError, OSError) as err:
            raise PreviewError(f"{subject}: {err}") from err

        objects = result.objects
        prepare_objects(objects, owner=owner_labels(name, namespace))
        if options.as_applied and drift_mode(ks.metadata.annotations) is DriftMode.WARN:
            policy = warn_policy(ks.status.history, digest=result.digest, known={})
            engine_options = apply_options(ks, options.engine, detect_only=policy)
        say(f"dry-running {len(objects)} object(s)")
        changes, errors = await plan_changes(
            client=tenant, clock=clock, ks=ks, objects=objects, options=engine_options,
            concurrency=options.concurrency, say=say,
        )
        return Preview(subject=subject, revision=revision, changes=changes, errors=errors,
                       waiting=waiting_messages(ks))


async def plan_changes(
    *,
    client: KubeClient,
    clock: Clock,
    ks: Kustomization,
    objects: Sequence[Object],
    options: ApplyOptions,
    concurrency: int = 4,
    verified: VerifiedApplies | None = None,
    say: ProgressSink | None = None,
) -> tuple[list[PreviewChange], list[str]]:
    """What applying ``objects`` (built, prepared with the owner labels) and pruning would change, through
    a ``DryRunClient`` over ``client`` (the tenant's): the preview's changes and the dry-run errors.

    The one planner: ``preview_kustomization`` shows it, the change gate (``reconcile/gate``) holds it."""
    name, namespace = ks.metadata.name or "", ks.metadata.namespace or ""
    reader = DryRunClient(client)
    manager = ResourceManager(client=reader, clock=clock, concurrency=concurrency, verified=verified)
    changes = await preview_apply(manager, objects, options)
    errors = [c.error for c in changes if c.error]
    if ks.spec.prune:
        planned = ChangeSet([
            ChangeSetEntry(ref=c.ref, version=split_api_version(c.api_version)[1], action=Action.UNCHANGED)
            for c in changes
        ])
        stale = stale_objects(ks.status.inventory, from_change_set(planned))
        if stale:
            if say is not None:
                say(f"checking {len(stale)} object(s) prune would delete")
            deleted, prune_error = await preview_prune(reader, stale, owner=owner_labels(name, namespace))
            changes.extend(deleted)
            if prune_error:
                errors.append(prune_error)
    return changes, errors


@contextlib.asynccontextmanager
async def _checkout(
    *,
    ks_subject: str,
    ks: Kustomization,
    client: KubeClient,
    pipeline: BuildPipeline,
    options: PreviewOptions,
    path: str,
    say: ProgressSink,
) -> AsyncIterator[tuple[str, Checkout]]:
    """(revision, checkout) of the source artifact, or of the local directory standing in for it."""
    if options.local_root is not None:
        root = options.local_root
        if not root.is_dir():
            raise PreviewError(f"local path {root} is not a directory")
        say(f"using local directory {root} instead of the source artifact")
        async with pipeline.local_checkout(root, path=path) as checkout:
            yield f"local {root}", checkout
        return
    source = await get_source(ks, reader=_Sources(client), access=SourceAccess())
    artifact = source.get_artifact()
    if artifact is None:
        ref = ks.spec.source_ref
        raise PreviewError(f"{ks_subject}: source {ref.kind}/{ref.name} has no artifact")
    say(f"fetching {artifact.url}")
    async with pipeline.checkout(url=artifact.url, digest=artifact.digest, path=path) as checkout:
        yield artifact.revision, checkout
