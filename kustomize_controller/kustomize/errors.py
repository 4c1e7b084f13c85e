"""The exception tree of the artifact → manifests pipeline, split by the Ready reason it maps to.

Every exception raised by :mod:`kustomize_controller.kustomize` on purpose derives from
:class:`KustomizeError`; its class attribute ``reason`` is the Ready condition reason the reconciler
writes (strings of fluxcd/pkg ``apis/meta``)::

    KustomizeError                          (abstract base, never raised itself)
    ├── ArtifactError                       reason "ArtifactFailed"
    │   ├── ArtifactNotFoundError           HTTP 404: "Source is not ready, artifact not found" path,
    │   │                                   requeue after --requeue-dependency, no event
    │   ├── DownloadError                   transport failures, non-200 codes, retries exhausted
    │   ├── ArtifactTooLargeError           download above --artifact-max-size
    │   ├── DigestError                     empty/unparsable/unsupported digest, mismatch
    │   ├── ExtractError                    unsafe tar entry, extraction limits, corrupt gzip/tar
    │   └── PathNotFoundError               "kustomization path not found: ..."
    ├── BuildError                          reason "BuildFailed"
    │   ├── GenerateError                   kustomization.yaml generation / spec overlays
    │   ├── ConfinementError                a local reference leaves the artifact root, remote
    │   │                                   reference under --no-remote-bases, helm or plugin use
    │   ├── KustomizeBuildError             "kustomize build failed: ..." (builder exit, timeout,
    │   │                                   output cap)
    │   ├── ManifestParseError              "failed to decode Kubernetes apiVersion, kind and name
    │   │                                   from: ..." and YAML decoding errors
    │   ├── DecryptionError                 raised by a Decryptor ("error decrypting sources: ..." /
    │   │                                   "decryption failed for '<Kind.version.group>/<name>': ...")
    │   └── SubstitutionError               "post build failed for '<Kind.version.group>/<name>': ..."
    │       └── EnvsubstError               the pure envsubst engine: parse errors and strict-mode
    │                                       unset variables (message without any prefix)
    ├── ReconcileError                      reason "ReconciliationFailed"
    │   └── EncryptedSecretError            "<Kind/ns/name> is SOPS encrypted, configuring
    │                                       decryption is required for this secret to be reconciled"
    └── BuilderUnavailableError             start-up: no kustomize builder, or one too old (not a
                                            reconcile outcome; the controller refuses to start)

Messages are the user-facing Ready messages: upstream's wording where upstream has one. Causes
are chained with ``from``. Nothing here is transient in the workqueue sense: the reconciler
requeues after ``retryInterval`` (or ``--requeue-dependency`` for :class:`ArtifactNotFoundError`).
"""

from __future__ import annotations

from typing import ClassVar

ARTIFACT_FAILED = "ArtifactFailed"
BUILD_FAILED = "BuildFailed"
RECONCILIATION_FAILED = "ReconciliationFailed"


class KustomizeError(Exception):
    """Base of every deliberate error of the build pipeline."""

    reason: ClassVar[str] = BUILD_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ArtifactError(KustomizeError):
    reason = ARTIFACT_FAILED


class ArtifactNotFoundError(ArtifactError):
    """The source server answered 404: the artifact is not (yet, or any more) there."""

    def __init__(self, url: str) -> None:
        super().__init__("artifact not found")
        self.url = url


class DownloadError(ArtifactError):
    pass


class ArtifactTooLargeError(ArtifactError):
    pass


class DigestError(ArtifactError):
    pass


class ExtractError(ArtifactError):
    pass


class PathNotFoundError(ArtifactError):
    pass


class BuildError(KustomizeError):
    reason = BUILD_FAILED


class GenerateError(BuildError):
    pass


class ConfinementError(BuildError):
    pass


class KustomizeBuildError(BuildError):
    pass


class ManifestParseError(BuildError):
    pass


class DecryptionError(BuildError):
    """Raised by :class:`~kustomize_controller.kustomize.pipeline.Decryptor` implementations."""


class SubstitutionError(BuildError):
    pass


class EnvsubstError(SubstitutionError):
    pass


class ReconcileError(KustomizeError):
    reason = RECONCILIATION_FAILED


class EncryptedSecretError(ReconcileError):
    """Carries the finished build (``result``) so the reconciler can still record history."""

    result: object | None = None


class BuilderUnavailableError(KustomizeError):
    reason = BUILD_FAILED
