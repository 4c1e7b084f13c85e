"""The read side of the Flux source API (``source.toolkit.fluxcd.io/v1``).

Contract: the controller only reads sources. It needs ``status.artifact`` (where to download the
tarball, its revision and digest), ``status.conditions`` and ``metadata``; the ``spec`` of a source
is kept as a plain dict because its fields never matter here. Parsing is tolerant, like every
object read from the cluster (a newer source-controller may add fields).

``parse_source(obj)`` picks the model by ``kind`` (one of ``SourceKind``). ``cached_source(obj)`` is
the projection the source informers cache (``CACHED_SOURCE_FIELDS``): every field a reader of a cached
source uses (the reconciler through ``parse_source``: kind, name, namespace, ``status.artifact``; the
watches: ``status.artifact.revision``; the store: name, namespace, ``resourceVersion``), the rest of the
object's identity (uid, generation, deletionTimestamp, ``status.observedGeneration``) and nothing else.
A shard caches every source of its namespaces, so the spec, labels, annotations and conditions (half
of a source source-controller wrote; the controller, like upstream's, goes by the artifact alone, never
by the source's Ready condition) would cost each shard memory for nothing. So ``is_ready()`` and
``get_condition()`` answer only for a source read from the API, not from that cache.

Not promised: source specs are not validated; status fields other than the ones modelled are dropped.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import Field, StrictInt

from kustomize_controller.api.base import ApiModel
from kustomize_controller.api.meta import Condition, ConditionType, ObjectMeta, Time

__all__ = [
    "CACHED_SOURCE_FIELDS",
    "OCI_REVISION_KEY",
    "SOURCE_API_VERSION",
    "SOURCE_GROUP",
    "Artifact",
    "Bucket",
    "ExternalArtifact",
    "GitRepository",
    "OCIRepository",
    "Source",
    "SourceKind",
    "SourceObject",
    "SourceStatus",
    "cached_source",
    "parse_source",
]

SOURCE_GROUP: Final = "source.toolkit.fluxcd.io"
SOURCE_API_VERSION: Final = f"{SOURCE_GROUP}/v1"
#: Artifact metadata key holding the origin revision of an OCI artifact (``lastAppliedOriginRevision``).
OCI_REVISION_KEY: Final = "org.opencontainers.image.revision"


class SourceKind(StrEnum):
    """The kinds a Kustomization may use as ``spec.sourceRef.kind`` (order as in the CRD enum)."""

    OCI_REPOSITORY = "OCIRepository"
    GIT_REPOSITORY = "GitRepository"
    BUCKET = "Bucket"
    EXTERNAL_ARTIFACT = "ExternalArtifact"


class Artifact(ApiModel):
    """The output of a source reconcile: a tarball served over HTTP by the source controller."""

    path: str
    """Path of the artifact relative to the storage root of the source controller."""
    url: str
    """HTTP address to download the artifact from."""
    revision: str
    """Revision of the content, e.g. main@sha1:<sha> or sha256:<digest>."""
    digest: Annotated[str, Field(pattern=r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")]
    """Checksum of the tarball, <algorithm>:<hex>."""
    last_update_time: Time
    """When the artifact was last updated."""
    size: StrictInt | None = None
    """Size of the tarball in bytes."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Extra information, e.g. OCI annotations."""

    def origin_revision(self) -> str | None:
        """The OCI origin revision, when the source recorded one."""
        return self.metadata.get(OCI_REVISION_KEY)


class SourceStatus(ApiModel):
    """The status fields shared by every source kind."""

    observed_generation: StrictInt = -1
    conditions: list[Condition] = Field(default_factory=list)
    artifact: Artifact | None = None
    last_handled_reconcile_at: str | None = None
    url: str | None = None


class SourceObject(ApiModel):
    """A source object of any kind; subclasses fix ``kind``."""

    api_version: str = SOURCE_API_VERSION
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: dict[str, Any] = Field(default_factory=dict)
    status: SourceStatus = Field(default_factory=SourceStatus)

    def get_artifact(self) -> Artifact | None:
        return self.status.artifact

    def get_condition(self, condition_type: str) -> Condition | None:
        """The condition of that type (None on a source from the informer cache: ``cached_source``)."""
        for condition in self.status.conditions:
            if condition.type == condition_type:
                return condition
        return None

    def is_ready(self) -> bool:
        ready = self.get_condition(ConditionType.READY)
        return ready is not None and ready.status == "True"

    def ref(self) -> str:
        """``Kind/namespace/name``, the prefix of every message about this object."""
        return f"{self.kind}/{self.metadata.namespace}/{self.metadata.name}"


class GitRepository(SourceObject):
    kind: Literal["GitRepository"] = "GitRepository"


class OCIRepository(SourceObject):
    kind: Literal["OCIRepository"] = "OCIRepository"


class Bucket(SourceObject):
    kind: Literal["Bucket"] = "Bucket"


class ExternalArtifact(SourceObject):
    kind: Literal["ExternalArtifact"] = "ExternalArtifact"


Source = GitRepository | OCIRepository | Bucket | ExternalArtifact

_BY_KIND: Final[dict[str, type[SourceObject]]] = {
    SourceKind.GIT_REPOSITORY: GitRepository,
    SourceKind.OCI_REPOSITORY: OCIRepository,
    SourceKind.BUCKET: Bucket,
    SourceKind.EXTERNAL_ARTIFACT: ExternalArtifact,
}


def parse_source(obj: dict[str, Any]) -> SourceObject:
    """Validate a source object read from the cluster (tolerant); the model is chosen by ``kind``."""
    kind = obj.get("kind")
    model = _BY_KIND.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ValueError(f"kind: unsupported source kind {kind!r}: must be one of {', '.join(_BY_KIND)}")
    return model.model_validate(obj)


#: What a cached source keeps: top-level key → ``None`` (the whole value) or the sub-keys kept.
CACHED_SOURCE_FIELDS: Final[dict[str, frozenset[str] | None]] = {
    "apiVersion": None,
    "kind": None,
    "metadata": frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp"}),
    "status": frozenset({"observedGeneration", "artifact"}),
}


def cached_source(obj: dict[str, Any]) -> dict[str, Any]:
    """The fields of a source object the controller reads (``CACHED_SOURCE_FIELDS``), as a new dict
    sharing the values of ``obj``; a field ``obj`` lacks stays absent."""
    kept: dict[str, Any] = {}
    for key, sub in CACHED_SOURCE_FIELDS.items():
        if key not in obj:
            continue
        value = obj[key]
        if sub is not None and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k in sub}
        kept[key] = value
    return kept
