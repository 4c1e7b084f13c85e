"""Read side of the source API: artifacts and conditions of every source kind."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kustomize_controller.api.base import validation_messages
from kustomize_controller.api.source import (
    Bucket,
    ExternalArtifact,
    GitRepository,
    OCIRepository,
    SourceKind,
    parse_source,
)


def _source(kind: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": kind,
        "metadata": {"name": "podinfo", "namespace": "flux-system", "generation": 3},
        "spec": {"interval": "1m", "url": "https://example.com/podinfo", "ref": {"branch": "main"}},
        "status": {
            "observedGeneration": 3,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "observedGeneration": 3,
                    "lastTransitionTime": "2024-05-01T10:00:00Z",
                    "reason": "Succeeded",
                    "message": "stored artifact for revision 'main@sha1:abc'",
                }
            ],
            "artifact": {
                "path": "gitrepository/flux-system/podinfo/abc.tar.gz",
                "url": "http://source-controller.flux-system.svc/gitrepository/flux-system/podinfo/abc.tar.gz",
                "revision": "main@sha1:abc",
                "digest": "sha256:" + "0" * 64,
                "lastUpdateTime": "2024-05-01T10:00:00Z",
                "size": 1234,
                "metadata": {"org.opencontainers.image.revision": "v1.0.0@sha1:abc"},
            },
            **status,
        },
    }


@pytest.mark.parametrize(
    ("kind", "model"),
    [
        ("GitRepository", GitRepository),
        ("OCIRepository", OCIRepository),
        ("Bucket", Bucket),
        ("ExternalArtifact", ExternalArtifact),
    ],
)
def test_parse_each_kind(kind: str, model: type) -> None:
    doc = _source(kind)
    source = parse_source(doc)
    assert type(source) is model
    assert source.kind == kind
    assert source.ref() == f"{kind}/flux-system/podinfo"
    assert source.is_ready()
    artifact = source.get_artifact()
    assert artifact is not None
    assert artifact.revision == "main@sha1:abc"
    assert artifact.origin_revision() == "v1.0.0@sha1:abc"
    assert source.model_dump(by_alias=True, exclude_none=True) == doc


def test_kinds_match_the_source_ref_enum() -> None:
    assert [k.value for k in SourceKind] == ["OCIRepository", "GitRepository", "Bucket", "ExternalArtifact"]


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unsupported source kind 'HelmRepository'"):
        parse_source({"kind": "HelmRepository"})


def test_no_artifact_and_not_ready() -> None:
    doc = _source("GitRepository")
    del doc["status"]["artifact"]
    doc["status"]["conditions"][0]["status"] = "False"
    source = parse_source(doc)
    assert source.get_artifact() is None
    assert not source.is_ready()
    assert parse_source({"kind": "Bucket", "metadata": {"name": "b"}}).status.observed_generation == -1


def test_status_fields_of_newer_versions_are_tolerated() -> None:
    source = parse_source(_source("OCIRepository", observedLayerSelector={"mediaType": "x"}))
    assert source.get_artifact() is not None


@pytest.mark.parametrize("digest", ["", "abc", "sha256:", "SHA256:abc"])
def test_artifact_digest_pattern(digest: str) -> None:
    doc = _source("GitRepository")
    doc["status"]["artifact"]["digest"] = digest
    with pytest.raises(ValidationError) as err:
        parse_source(doc)
    assert validation_messages(err.value)[0].startswith("status.artifact.digest: ")


def test_artifact_required_fields() -> None:
    doc = _source("GitRepository")
    doc["status"]["artifact"] = {"revision": "x"}
    with pytest.raises(ValidationError) as err:
        parse_source(doc)
    assert validation_messages(err.value) == [
        "status.artifact.path: required value",
        "status.artifact.url: required value",
        "status.artifact.digest: required value",
        "status.artifact.lastUpdateTime: required value",
    ]
