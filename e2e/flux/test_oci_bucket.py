"""The other two sources source-controller makes artifacts from: an ``OCIRepository`` filled with
``flux push artifact`` on a registry on loopback, and a ``Bucket`` on an S3 server on loopback.

The OCI scenario runs beside Flux's own kustomize-controller: the revision, the origin metadata in the
notification and what ``flux trace`` prints must be the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flux.cli import FluxCli
from tests.flux.receiver import EventReceiver
from tests.flux.registry import OciRegistry
from tests.flux.s3 import S3Server

from ..harness import configmap
from .sides import SOURCE_API, Pair, Side, condition, payload_view

pytestmark = pytest.mark.timeout(420)

ORIGIN = "https://github.com/example/app.git"


def write_files(directory: Path, files: dict[str, str]) -> None:
    """``directory`` holding exactly ``files``."""
    for stale in directory.glob("*"):
        stale.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


async def push(flux: FluxCli, registry: OciRegistry, directory: Path, files: dict[str, str], *,
               revision: str) -> str:
    """``flux push artifact`` of ``files`` as ``app:latest``; the manifest digest it pushed."""
    write_files(directory, files)
    result = await flux("push", "artifact", f"{registry.url('app')}:latest", f"--path={directory}",
                        f"--source={ORIGIN}", f"--revision={revision}")
    assert result.exit_code == 0, str(result)
    digest = registry.digest_of("app", "latest")
    assert digest is not None and digest in result.stderr, str(result)
    return digest


@pytest.mark.upstream
async def test_oci_repository_from_flux_push(pair: Pair, flux: FluxCli, registry: OciRegistry,
                                             receiver: EventReceiver, tmp_path: Path) -> None:
    git_sha = "1" * 40
    digest = await push(flux, registry, tmp_path / "oci", {
        "kustomization.yaml": "resources:\n- settings.yaml\n", "settings.yaml": configmap("settings", mode="one")},
        revision=f"main@sha1:{git_sha}")
    revision = f"latest@{digest}"

    async def setup(side: Side) -> None:
        await side.alert(f"{receiver.url}{side.label}")
        await side.oci_repository("app", registry.url("app"))
        await side.kustomization("app", source_kind="OCIRepository")

    await pair.each(setup)
    ours, _ = await pair.each(lambda side: side.wait_applied(revision))
    assert ours["status"]["lastAttemptedRevision"] == revision

    # the success notification carries the OCI revision and the Git origin the artifact was pushed with
    events = await pair.each(lambda side: receiver.wait_for(
        lambda e: e.path == f"/{side.label}" and e.body["reason"] == "ReconciliationSucceeded", within=60,
        what=f"{side.label}'s success notification"))
    mine, theirs = (payload_view(e.body, pair.names) for e in events)
    assert mine == theirs
    assert mine["metadata"] == {"revision": revision, "originRevision": f"main@sha1:{git_sha}",
                                "commit_status": "update"}

    await pair.same("get", "ks")
    traced = await pair.same("trace", "configmap", "settings")
    assert f"Origin Source: {ORIGIN}" in traced and f"Origin Revision: main@sha1:{git_sha}" in traced

    # a new push is applied once source-controller has stored it (asked as `flux reconcile source oci` asks)
    digest = await push(flux, registry, tmp_path / "oci", {
        "kustomization.yaml": "resources:\n- settings.yaml\n", "settings.yaml": configmap("settings", mode="two")},
        revision=f"main@sha1:{'2' * 40}")
    await pair.each(lambda side: side.request_reconcile(SOURCE_API, "OCIRepository", "app"))
    await pair.each(lambda side: side.wait_applied(f"latest@{digest}"))
    assert (await pair.ours.get("v1", "ConfigMap", "settings"))["data"] == {"mode": "two"}


async def test_bucket_from_s3(ours: Side, s3: S3Server) -> None:
    bucket = ours.namespace  # one bucket per test
    s3.create_bucket(bucket)
    s3.put_files(bucket, {"kustomization.yaml": "resources:\n- settings.yaml\n",
                          "settings.yaml": configmap("settings", mode="one")})
    await ours.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"},
                       "stringData": s3.secret_data()})
    await ours.create({"apiVersion": SOURCE_API, "kind": "Bucket", "metadata": {"name": "app"},
                       "spec": {"provider": "generic", "bucketName": bucket, "endpoint": s3.endpoint,
                                "insecure": True, "interval": "1h", "secretRef": {"name": "s3"}}})
    await ours.kustomization("app", source_kind="Bucket")
    source = await ours.wait_artifact("Bucket", "app")
    first = source["status"]["artifact"]["revision"]
    assert first.startswith("sha256:"), first
    ks = await ours.wait_applied(first)
    assert condition(ks, "Ready")["message"] == f"Applied revision: {first}"  # type: ignore[index]

    s3.put_files(bucket, {"settings.yaml": configmap("settings", mode="two")})
    await ours.request_reconcile(SOURCE_API, "Bucket", "app")
    source = await ours.wait_artifact("Bucket", "app", other_than=first)
    await ours.wait_applied(source["status"]["artifact"]["revision"])
    assert (await ours.get("v1", "ConfigMap", "settings"))["data"] == {"mode": "two"}

