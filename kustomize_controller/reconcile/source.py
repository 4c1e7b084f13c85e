"""Resolving ``spec.sourceRef`` to the source object that holds the artifact (upstream ``getSource``).

Contract:
- The source namespace defaults to the Kustomization's namespace.
- With ``--no-cross-namespace-refs`` a reference to another namespace is refused with
  ``AccessDeniedError`` (terminal: Stalled + ``AccessDenied``), as is ``ExternalArtifact`` while its
  feature gate is off. Messages are upstream's.
- A missing source raises ``SourceNotFoundError`` (the reconciler requeues after ``retryInterval``
  without an event); any other read failure is ``SourceReadError`` (retried with backoff). Its message is
  the NotFound error upstream's reader gives: controller-runtime's cache names the resource by its kind
  (``GitRepository.source.toolkit.fluxcd.io "x" not found``), the API server by its plural
  (``gitrepositories.source.toolkit.fluxcd.io …``, with ``DirectSourceFetch``).
- Reading goes through a ``SourceReader`` so the application decides where reads come from: the
  informer cache of the watched source kinds (the default, no API request per reconcile, as upstream
  reads from its cache) or a direct GET (feature gate ``DirectSourceFetch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kustomize_controller.api.kustomization import Kustomization
from kustomize_controller.api.source import SOURCE_GROUP, SourceKind, SourceObject, parse_source

_PLURALS = {
    SourceKind.GIT_REPOSITORY: "gitrepositories",
    SourceKind.OCI_REPOSITORY: "ocirepositories",
    SourceKind.BUCKET: "buckets",
    SourceKind.EXTERNAL_ARTIFACT: "externalartifacts",
}


class SourceReader(Protocol):
    async def get_source(self, *, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The source object, or None when it does not exist. Raises on read failures."""
        ...

    def reads_cache(self, kind: str) -> bool:
        """Whether sources of ``kind`` come from an informer cache (else from the API server)."""
        ...


class SourceError(Exception):
    """Base of source resolution errors."""


class AccessDeniedError(SourceError):
    """The reference is not allowed by the controller's access rules (terminal)."""


class SourceNotFoundError(SourceError):
    """The referenced source does not exist (yet)."""


class SourceReadError(SourceError):
    """Reading the source failed; retry with backoff."""


@dataclass(frozen=True)
class SourceAccess:
    no_cross_namespace_refs: bool = False
    allow_external_artifact: bool = False


def source_namespace(ks: Kustomization) -> str:
    return ks.spec.source_ref.namespace or ks.metadata.namespace or ""


async def get_source(ks: Kustomization, *, reader: SourceReader, access: SourceAccess) -> SourceObject:
    ref = ks.spec.source_ref
    namespace = source_namespace(ks)
    namespaced_name = f"{namespace}/{ref.name}"
    if access.no_cross_namespace_refs and namespace != ks.metadata.namespace:
        raise AccessDeniedError(
            f"can't access '{ref.kind}/{namespaced_name}', cross-namespace references have been blocked"
        )
    if ref.kind == SourceKind.EXTERNAL_ARTIFACT and not access.allow_external_artifact:
        raise AccessDeniedError(
            f"can't access '{ref.kind}/{namespaced_name}', ExternalArtifact feature gate is disabled"
        )
    if ref.kind not in _PLURALS:
        raise SourceReadError(f"source `{ref.name}` kind '{ref.kind}' not supported")
    try:
        obj = await reader.get_source(kind=ref.kind, namespace=namespace, name=ref.name)
    except Exception as err:
        raise SourceReadError(f"unable to get source '{namespaced_name}': {err}") from err
    if obj is None:
        # Upstream's condition message is the NotFound error text of the reader it used.
        resource = ref.kind if reader.reads_cache(ref.kind) else _PLURALS[ref.kind]
        raise SourceNotFoundError(f'{resource}.{SOURCE_GROUP} "{ref.name}" not found')
    return parse_source(obj)


def origin_revision(source: SourceObject) -> str:
    artifact = source.get_artifact()
    if artifact is None:
        return ""
    return artifact.origin_revision() or ""
