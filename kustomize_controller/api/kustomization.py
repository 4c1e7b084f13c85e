"""The ``Kustomization`` API, ``kustomize.toolkit.fluxcd.io/v1`` (the hub and storage version; the old
versions served for compatibility are described in ``api.versions`` and converted by ``api.conversion``).

Contract:

- Field names, types, enums, patterns, length limits, defaults and required lists mirror the
  upstream CRD exactly; ``kustomize_controller.api.crdgen`` generates our CRD from these classes and
  a unit test compares it with the upstream CRD.
- ``Kustomization.model_validate(obj)`` is tolerant (objects from the cluster),
  ``parse_kustomization(obj, strict=True)`` rejects unknown fields (files given to the CLI);
  ``parse_kustomization`` raises ``InvalidKustomizationError`` whose lines name the field path.
  See ``kustomize_controller.api.base`` for the round-trip guarantee.
- Durations stay strings in the model (``interval: "90s"`` round-trips as written); the ``get_*``
  methods return ``timedelta`` values computed as the upstream controller computes them.

Deliberate difference: ``spec`` is required here, while the API server accepts a Kustomization
without one; nothing can be reconciled without a spec, so reading one reports ``spec: required value``.

Not promised: CEL expressions (``readyExpr``, ``healthCheckExprs``), component paths and selectors
are checked where they are used, not here; the API server does not check them either.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Final, Self

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    model_validator,
)

from kustomize_controller.api.base import ApiModel, crd_default, validate_strict, validation_messages
from kustomize_controller.api.duration import DURATION_PATTERN, parse_duration
from kustomize_controller.api.inventory import ResourceInventory
from kustomize_controller.api.meta import (
    Condition,
    Image,
    LocalObjectReference,
    NamespacedObjectKindReference,
    ObjectMeta,
    Patch,
    SecretKeyReference,
    Selector,
    Snapshot,
)
from kustomize_controller.api.source import SourceKind

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "MIN_TIMEOUT",
    "PLURAL",
    "VERSION",
    "BuildMetadataOption",
    "CommonMetadata",
    "CrossNamespaceSourceReference",
    "CustomHealthCheck",
    "Decryption",
    "DecryptionProvider",
    "DeletionPolicy",
    "DependencyReference",
    "Duration",
    "IgnoreRule",
    "InvalidKustomizationError",
    "KubeConfigReference",
    "Kustomization",
    "KustomizationSpec",
    "KustomizationStatus",
    "PostBuild",
    "SubstituteKind",
    "SubstituteReference",
    "SubstituteStrategy",
    "effective_retry_interval",
    "effective_timeout",
    "parse_kustomization",
    "parse_kustomization_strict",
]

GROUP: Final = "kustomize.toolkit.fluxcd.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "Kustomization"
PLURAL: Final = "kustomizations"
#: The effective timeout is never shorter than this, even when ``spec.timeout`` is.
MIN_TIMEOUT: Final = timedelta(seconds=30)

_KUBECONFIG_ONE_OF: Final = "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified"


def _check_duration(value: str) -> str:
    parse_duration(value)  # the pattern already matched; this rejects int64 overflow
    return value


#: A Go duration string as the CRD accepts it (``5m``, ``1h30m``, ``500ms``).
Duration = Annotated[str, Field(pattern=DURATION_PATTERN), AfterValidator(_check_duration)]


class DeletionPolicy(StrEnum):
    """What happens to the managed objects when the Kustomization is deleted."""

    MIRROR_PRUNE = "MirrorPrune"
    DELETE = "Delete"
    WAIT_FOR_TERMINATION = "WaitForTermination"
    ORPHAN = "Orphan"


class BuildMetadataOption(StrEnum):
    ORIGIN_ANNOTATIONS = "originAnnotations"
    TRANSFORMER_ANNOTATIONS = "transformerAnnotations"


class SubstituteKind(StrEnum):
    SECRET = "Secret"
    CONFIG_MAP = "ConfigMap"


class SubstituteStrategy(StrEnum):
    WITH_VARIABLES = "WithVariables"
    ALWAYS = "Always"


class DecryptionProvider(StrEnum):
    SOPS = "sops"


class CrossNamespaceSourceReference(ApiModel):
    """The source whose artifact holds the manifests."""

    api_version: str | None = None
    """API version of the source (accepted, not used)."""
    kind: SourceKind
    """Kind of the source."""
    name: str
    """Name of the source."""
    namespace: str | None = None
    """Namespace of the source; the Kustomization's own namespace when empty."""


class DependencyReference(ApiModel):
    """A Kustomization that must be ready before this one is reconciled."""

    name: str
    """Name of the dependency."""
    namespace: str | None = None
    """Namespace of the dependency; the Kustomization's own namespace when empty."""
    ready_expr: str | None = None
    """CEL expression (variables self and dep) replacing the built-in readiness check."""


class CustomHealthCheck(ApiModel):
    """CEL expressions computing the health of a custom resource kind."""

    api_version: str
    """API version of the custom resource; only its group is matched."""
    kind: str | None = None
    """Kind of the custom resource; all kinds of the group when empty."""
    current: str
    """CEL expression true when the resource reached its desired state."""
    in_progress: str | None = None
    """CEL expression true while the resource is still progressing."""
    failed: str | None = None
    """CEL expression true when the resource failed."""


class CommonMetadata(ApiModel):
    """Labels and annotations added to every applied object (overriding the same keys)."""

    labels: dict[str, str] = Field(default_factory=dict)
    """Labels to add."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations to add."""


class SubstituteReference(ApiModel):
    """A ConfigMap or Secret in the Kustomization's namespace whose data keys are variables."""

    kind: SubstituteKind
    """Secret or ConfigMap."""
    name: Annotated[str, Field(min_length=1, max_length=253)]
    """Name of the ConfigMap or Secret."""
    optional: StrictBool = Field(default=False, json_schema_extra=crd_default(False))
    """Tolerate a missing object (treated as empty)."""


class PostBuild(ApiModel):
    """Variable substitution on the built manifests."""

    substitute: dict[str, str] = Field(default_factory=dict)
    """Inline variables; they win over substituteFrom."""
    substitute_from: list[SubstituteReference] = Field(default_factory=list)
    """ConfigMaps and Secrets to read variables from, in order."""
    substitute_strategy: SubstituteStrategy | None = None
    """WithVariables (default): substitute only when variables exist; Always: substitute anyway."""


class Decryption(ApiModel):
    """SOPS decryption of the built manifests."""

    provider: DecryptionProvider
    """The decryption engine (sops)."""
    secret_ref: LocalObjectReference | None = None
    """Secret holding keys or cloud credentials."""
    service_account_name: str | None = None
    """Service account for secret-less KMS authentication."""


class KubeConfigReference(ApiModel):
    """Where to find the kubeconfig of a remote cluster: exactly one of secretRef / configMapRef."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"message": _KUBECONFIG_ONE_OF, "rule": "has(self.configMapRef) || has(self.secretRef)"},
                {"message": _KUBECONFIG_ONE_OF, "rule": "!has(self.configMapRef) || !has(self.secretRef)"},
            ]
        }
    )

    config_map_ref: LocalObjectReference | None = None
    """ConfigMap with workload identity settings (provider, cluster, address, ca.crt, audiences)."""
    secret_ref: SecretKeyReference | None = None
    """Secret holding a kubeconfig under key (default value, then value.yaml)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.config_map_ref is None) == (self.secret_ref is None):
            raise ValueError(_KUBECONFIG_ONE_OF)
        return self


class IgnoreRule(ApiModel):
    """JSON pointers whose drift is ignored on the selected objects."""

    paths: list[str]
    """RFC 6901 JSON pointers."""
    target: Selector | None = None
    """Objects the rule applies to (regex fields); all objects when empty."""


class KustomizationSpec(ApiModel):
    """What to build from which source, and how to apply it."""

    build_metadata: list[BuildMetadataOption] = Field(default_factory=list)
    """kustomize build metadata to add to the objects."""
    common_metadata: CommonMetadata | None = None
    """Labels and annotations added to every object."""
    components: list[str] = Field(default_factory=list)
    """Relative paths to kustomize components."""
    decryption: Decryption | None = None
    """Decrypt SOPS-encrypted manifests."""
    deletion_policy: DeletionPolicy | None = None
    """What to do with managed objects on deletion; MirrorPrune when empty."""
    depends_on: list[DependencyReference] = Field(default_factory=list)
    """Kustomizations that must be ready first."""
    force: StrictBool = Field(default=False, json_schema_extra=crd_default(False))
    """Recreate objects whose immutable fields changed."""
    health_check_exprs: list[CustomHealthCheck] = Field(default_factory=list)
    """CEL health checks for custom resources."""
    health_checks: list[NamespacedObjectKindReference] = Field(default_factory=list)
    """Objects whose health is checked after apply."""
    ignore: list[IgnoreRule] = Field(default_factory=list)
    """Fields excluded from drift detection and apply."""
    ignore_missing_components: StrictBool = False
    """Drop component paths that do not exist instead of failing."""
    images: list[Image] = Field(default_factory=list)
    """Image name, tag and digest overrides."""
    interval: Duration
    """How often to reconcile (detect and correct drift)."""
    kube_config: KubeConfigReference | None = None
    """Apply to a remote cluster."""
    name_prefix: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Prefix added to the names of all objects."""
    name_suffix: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Suffix added to the names of all objects."""
    patches: list[Patch] = Field(default_factory=list)
    """Inline strategic-merge or JSON 6902 patches."""
    path: str | None = None
    """Directory inside the artifact; the artifact root when empty."""
    post_build: PostBuild | None = None
    """Variable substitution after the build."""
    prune: StrictBool
    """Delete objects that disappeared from the build."""
    retry_interval: Duration | None = None
    """How soon to retry after a failure; the interval when empty."""
    service_account_name: str | None = None
    """Service account to impersonate for all cluster access."""
    source_ref: CrossNamespaceSourceReference
    """The source of the manifests."""
    suspend: StrictBool = False
    """Stop reconciling (running reconciles finish)."""
    target_namespace: Annotated[str, Field(min_length=1, max_length=63)] | None = None
    """Namespace set on all namespaced objects."""
    timeout: Duration | None = None
    """Timeout of apply and health checks; interval minus 30s when empty, never below 30s."""
    wait: StrictBool = False
    """Check the health of every applied object (healthChecks are then ignored)."""


class KustomizationStatus(ApiModel):
    """What the controller observed and did."""

    conditions: list[Condition] = Field(default_factory=list)
    history: list[Snapshot] = Field(default_factory=list)
    """The last reconciled builds, newest first (at most 5)."""
    inventory: ResourceInventory | None = None
    """Objects applied by the last successful reconcile."""
    last_applied_origin_revision: str | None = None
    """Origin revision (OCI org.opencontainers.image.revision) of the last applied artifact."""
    last_applied_revision: str | None = None
    """Revision of the last successfully applied artifact."""
    last_attempted_revision: str | None = None
    """Revision of the last reconcile attempt."""
    last_handled_reconcile_at: str | None = None
    """Value of the reconcile.fluxcd.io/requestedAt annotation last handled."""
    observed_generation: StrictInt = -1
    """The last reconciled metadata.generation."""


class Kustomization(ApiModel):
    """A Flux Kustomization: build manifests from a source artifact and apply them."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, json_schema_extra={"x-crd-schema": {"type": "object"}})
    # The API server accepts a Kustomization without spec; we do not (the controller cannot act on it),
    # so spec is required here but not in the CRD.
    spec: KustomizationSpec = Field(json_schema_extra={"x-crd-required": False})
    status: KustomizationStatus = Field(
        default_factory=KustomizationStatus,
        json_schema_extra=crd_default({"observedGeneration": -1}),
    )

    def ref(self) -> str:
        """``Kustomization/namespace/name``, the prefix of every message about this object."""
        return f"{KIND}/{self.metadata.namespace}/{self.metadata.name}"

    def get_interval(self) -> timedelta:
        """The reconcile period (requeue after success, before jitter)."""
        return parse_duration(self.spec.interval)

    def get_timeout(self) -> timedelta:
        return effective_timeout(self.spec)

    def get_retry_interval(self) -> timedelta:
        return effective_retry_interval(self.spec)

    def get_deletion_policy(self) -> DeletionPolicy:
        return DeletionPolicy(self.spec.deletion_policy or DeletionPolicy.MIRROR_PRUNE)

    def get_condition(self, condition_type: str) -> Condition | None:
        for condition in self.status.conditions:
            if condition.type == condition_type:
                return condition
        return None


def effective_timeout(spec: KustomizationSpec) -> timedelta:
    """``spec.timeout``, or interval − 30 s when unset; never below 30 s (as upstream ``GetTimeout``)."""
    if spec.timeout is not None:
        timeout = parse_duration(spec.timeout)
    else:
        timeout = parse_duration(spec.interval) - MIN_TIMEOUT
    return max(timeout, MIN_TIMEOUT)


def effective_retry_interval(spec: KustomizationSpec) -> timedelta:
    """``spec.retryInterval``, or the interval when unset."""
    return parse_duration(spec.retry_interval if spec.retry_interval is not None else spec.interval)


class InvalidKustomizationError(ValueError):
    """A Kustomization document that does not validate.

    ``messages`` holds one ``<field path>: <problem>`` line per problem (for status conditions);
    ``str(err)`` prefixes them with ``Kustomization/<namespace>/<name>: ``.
    """

    def __init__(self, ref: str, messages: list[str]) -> None:
        self.ref = ref
        self.messages = messages
        super().__init__(f"{ref}: {'; '.join(messages)}")


def parse_kustomization(obj: Any, *, strict: bool = False) -> Kustomization:
    """Validate a Kustomization document; ``strict`` rejects unknown fields (files from users)."""
    try:
        if strict:
            return validate_strict(Kustomization, obj)
        return Kustomization.model_validate(obj)
    except ValidationError as err:
        raise InvalidKustomizationError(_ref_of(obj), validation_messages(err)) from err


def parse_kustomization_strict(obj: Any) -> Kustomization:
    """``parse_kustomization(obj, strict=True)``: unknown fields anywhere are errors."""
    return parse_kustomization(obj, strict=True)


def _ref_of(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        meta = {}
    return f"{KIND}/{meta.get('namespace') or ''}/{meta.get('name') or ''}"
