"""Shared API vocabulary (Flux ``pkg/apis/meta`` and ``pkg/apis/kustomize``): conditions, reasons, keys.

Contract: every string here is part of the public contract with users, dashboards and the ``flux``
CLI; each equals the upstream string byte for byte. Reasons and condition types are ``StrEnum``
members, so they compare equal to (and serialise as) plain strings.

Also here: the small reference types used by several specs (``Selector``, ``Patch``, ``Image``,
``NamespacedObjectKindReference``, ``LocalObjectReference``, ``SecretKeyReference``), ``Condition``
and ``ObjectMeta`` (the subset of Kubernetes object metadata the controller reads and writes), and
the ``Time`` type (RFC 3339, UTC, whole seconds on output, as ``metav1.Time``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import AwareDatetime, BeforeValidator, Field, PlainSerializer, StrictInt

from kustomize_controller.api.base import ApiModel

__all__ = [
    "CONTROLLER_NAME",
    "EVENT_ANNOTATION_PREFIX",
    "FIELD_MANAGER",
    "FINALIZER",
    "LEADER_ELECTION_ID",
    "RECONCILE_REQUEST_ANNOTATION",
    "STATUS_OWNER",
    "TERMINAL_ERROR_PREFIX",
    "Condition",
    "ConditionStatus",
    "ConditionType",
    "Image",
    "Key",
    "LocalObjectReference",
    "NamespacedObjectKindReference",
    "ObjectMeta",
    "Patch",
    "Reason",
    "SecretKeyReference",
    "Selector",
    "Snapshot",
    "SsaPolicy",
    "Time",
    "format_time",
    "parse_time",
]


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with whole seconds, the wire form of ``metav1.Time`` (``2024-05-01T10:00:00Z``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp read leniently (``Z`` or an offset); ``None`` for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _time_input(value: Any) -> Any:
    # pydantic would read a number as a Unix timestamp; the API server only accepts a string.
    if not isinstance(value, str | datetime):
        raise ValueError(f"invalid value {value!r}: must be an RFC 3339 date-time string")
    return value


#: A timezone-aware timestamp; written as ``metav1.Time`` writes it.
Time = Annotated[AwareDatetime, BeforeValidator(_time_input), PlainSerializer(format_time, return_type=str)]

# --- names ------------------------------------------------------------------------------------------

#: The controller's name: SSA field manager, event reporting controller, metrics label.
CONTROLLER_NAME: Final = "kustomize-controller"
#: Field manager of the server-side apply of managed objects.
FIELD_MANAGER: Final = CONTROLLER_NAME
#: Field owner of status patches (``gotk-<controller>``).
STATUS_OWNER: Final = "gotk-kustomize-controller"
#: Finalizer put on every Kustomization.
FINALIZER: Final = "finalizers.fluxcd.io"
#: Leader election lease name (a sharded controller appends ``-<8 hex>`` of its label selector hash).
LEADER_ELECTION_ID: Final = "kustomize-controller-leader-election"
#: Annotation whose value change requests a reconcile; mirrored into ``status.lastHandledReconcileAt``.
RECONCILE_REQUEST_ANNOTATION: Final = "reconcile.fluxcd.io/requestedAt"
#: Prefix of Kustomization annotations copied into every event's metadata.
EVENT_ANNOTATION_PREFIX: Final = "event.toolkit.fluxcd.io/"
#: Prefix of Ready messages of terminal (Stalled) failures.
TERMINAL_ERROR_PREFIX: Final = "Reconciliation failed terminally due to configuration error: "


class Key:
    """Label and annotation keys, and the values the controller recognises for them."""

    #: Owner labels stamped on every applied object (Kustomization name / namespace).
    NAME_LABEL: Final = "kustomize.toolkit.fluxcd.io/name"
    NAMESPACE_LABEL: Final = "kustomize.toolkit.fluxcd.io/namespace"
    #: ``disabled`` on a desired or live object: never apply it, never delete it.
    RECONCILE: Final = "kustomize.toolkit.fluxcd.io/reconcile"
    #: Server-side apply policy of one object, values in ``SsaPolicy`` (case-insensitive).
    SSA: Final = "kustomize.toolkit.fluxcd.io/ssa"
    #: ``enabled``: recreate this object when an immutable field changed.
    FORCE: Final = "kustomize.toolkit.fluxcd.io/force"
    #: ``disabled`` on a live object: never deleted by prune or by the finalizer.
    PRUNE: Final = "kustomize.toolkit.fluxcd.io/prune"
    #: ``disabled`` (exact, lowercase) on a built resource: skip post-build substitution.
    SUBSTITUTE: Final = "kustomize.toolkit.fluxcd.io/substitute"
    #: ``disabled`` (case-insensitive) annotation on a built resource: skip SOPS decryption.
    DECRYPT: Final = "kustomize.toolkit.fluxcd.io/decrypt"
    #: Label on ConfigMaps/Secrets whose changes trigger reconciles of the Kustomizations using them.
    WATCH: Final = "reconcile.fluxcd.io/watch"
    WATCH_ENABLED: Final = "Enabled"
    #: Annotation kustomize adds with ``buildMetadata: [originAnnotations]``.
    ORIGIN: Final = "config.kubernetes.io/origin"
    #: Unused by this controller (helm-controller only) but part of the shared vocabulary.
    FORCE_REQUEST: Final = "reconcile.fluxcd.io/forceAt"

    DISABLED: Final = "disabled"
    ENABLED: Final = "enabled"

    #: Removed from live objects before apply (unless ``ssa: Merge``): leftovers of kubectl client-side
    #: apply, of the v1beta1 garbage collector and of Flux v1.
    CLEANUP_ANNOTATIONS: Final = (
        "kubectl.kubernetes.io/last-applied-configuration",
        "kustomize.toolkit.fluxcd.io/checksum",
        "fluxcd.io/sync-checksum",
    )
    CLEANUP_LABELS: Final = ("fluxcd.io/sync-gc-mark",)


class SsaPolicy(StrEnum):
    """Values of the ``kustomize.toolkit.fluxcd.io/ssa`` key (matched case-insensitively)."""

    OVERRIDE = "Override"
    MERGE = "Merge"
    IF_NOT_PRESENT = "IfNotPresent"
    IGNORE = "Ignore"


class ConditionType(StrEnum):
    """The four condition types the controller owns (and force-overwrites on status patches)."""

    READY = "Ready"
    RECONCILING = "Reconciling"
    STALLED = "Stalled"
    HEALTHY = "Healthy"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    """Every condition reason kustomize-controller writes (also the reason of its events)."""

    #: Ready=True after apply, prune and health checks succeeded.
    RECONCILIATION_SUCCEEDED = "ReconciliationSucceeded"
    #: Ready=Unknown / Reconciling=True / Healthy=Unknown while a reconcile or health check runs.
    PROGRESSING = "Progressing"
    #: Reconciling reason rewritten at the end of a failed reconcile.
    PROGRESSING_WITH_RETRY = "ProgressingWithRetry"
    #: Source or artifact missing, download/verify/extract failed, path not found.
    ARTIFACT_FAILED = "ArtifactFailed"
    #: A dependsOn entry is not ready.
    DEPENDENCY_NOT_READY = "DependencyNotReady"
    #: kustomization.yaml generation, kustomize build, decryption, substitution or decoding failed.
    BUILD_FAILED = "BuildFailed"
    #: Client construction, dry-run/apply or inventory failure.
    RECONCILIATION_FAILED = "ReconciliationFailed"
    #: Deleting stale objects failed.
    PRUNE_FAILED = "PruneFailed"
    #: Ready=False and Healthy=False: wait timed out or an object failed.
    HEALTH_CHECK_FAILED = "HealthCheckFailed"
    #: Healthy=True.
    SUCCEEDED = "Succeeded"
    #: Health wait interrupted by a new event (feature gate CancelHealthCheckOnNewRevision).
    HEALTH_CHECK_CANCELED = "HealthCheckCanceled"
    #: Terminal: invalid CEL in healthCheckExprs or dependsOn[].readyExpr (Stalled=True).
    INVALID_CEL_EXPRESSION = "InvalidCELExpression"
    #: Terminal: cross-namespace reference blocked or ExternalArtifact gate off (Stalled=True).
    ACCESS_DENIED = "AccessDenied"
    #: Terminal: a field needs a feature gate that is disabled (Stalled=True).
    FEATURE_GATE_DISABLED = "FeatureGateDisabled"
    #: The temporary working directory could not be created.
    DIR_CREATION_FAILED = "DirCreationFailed"


# --- reference types -------------------------------------------------------------------------------


class LocalObjectReference(ApiModel):
    """A reference to an object in the same namespace."""

    name: str
    """Name of the referent."""


class SecretKeyReference(ApiModel):
    """A key of a Secret in the same namespace."""

    name: str
    """Name of the Secret."""
    key: str | None = None
    """Key in the Secret; an implementation-specific default key when not set."""


class NamespacedObjectKindReference(ApiModel):
    """A typed reference to an object in any namespace (used by ``healthChecks``)."""

    api_version: str | None = None
    """API version of the referent; the controller assumes apps/v1 when empty."""
    kind: str
    """Kind of the referent."""
    name: str
    """Name of the referent."""
    namespace: str | None = None
    """Namespace of the referent; empty means a cluster-scoped object."""


class Selector(ApiModel):
    """Selects objects by group, version, kind, name, namespace, labels and annotations."""

    group: str | None = None
    """API group of the selected objects."""
    version: str | None = None
    """API version of the selected objects."""
    kind: str | None = None
    """Kind of the selected objects."""
    namespace: str | None = None
    """Namespace of the selected objects."""
    name: str | None = None
    """Name of the selected objects."""
    annotation_selector: str | None = None
    """Annotation selector, in Kubernetes label selector syntax."""
    label_selector: str | None = None
    """Label selector, in Kubernetes label selector syntax."""


class Patch(ApiModel):
    """An inline strategic-merge or JSON 6902 patch and the objects it targets."""

    patch: str
    """The patch document (YAML or JSON)."""
    target: Selector | None = None
    """Objects the patch applies to."""


class Image(ApiModel):
    """A kustomize image override: new name, new tag or digest for an image name."""

    name: str
    """Image name without tag."""
    new_name: str | None = None
    """Replacement image name."""
    new_tag: str | None = None
    """Replacement tag."""
    digest: str | None = None
    """Replacement digest; takes precedence over newTag."""


class Condition(ApiModel):
    """A ``metav1.Condition``."""

    type: Annotated[
        str,
        Field(
            max_length=316,
            pattern=(
                r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
            ),
        ),
    ]
    """Condition type, e.g. Ready."""
    status: ConditionStatus
    """True, False or Unknown."""
    observed_generation: Annotated[StrictInt, Field(ge=0)] | None = None
    """The metadata.generation the condition was computed for."""
    last_transition_time: Time
    """When status, reason or message last changed."""
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    """Machine-readable CamelCase reason of the last transition."""
    message: Annotated[str, Field(max_length=32768)]
    """Human-readable details; may be empty."""


class Snapshot(ApiModel):
    """One entry of ``status.history`` (``meta.History``): a reconciled build and its outcome."""

    digest: str
    """Checksum <algorithm>:<hex> of the built manifests."""
    first_reconciled: Time
    """When this build was first reconciled."""
    last_reconciled: Time
    """When this build was last reconciled."""
    last_reconciled_duration: str
    """How long the last reconcile of this build took (Go duration)."""
    last_reconciled_status: str
    """Reason of the last reconcile of this build (e.g. ReconciliationSucceeded)."""
    total_reconciliations: StrictInt
    """How many times this build was reconciled with this status."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Extra information, e.g. revision and originRevision."""


class ObjectMeta(ApiModel):
    """The parts of Kubernetes object metadata the controller uses (tolerant of the others)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: StrictInt | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: StrictInt | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[dict[str, Any]] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)
    self_link: str | None = None
