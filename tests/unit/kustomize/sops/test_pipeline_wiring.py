"""``SopsDecryptor`` plugged into the real build pipeline with the real kustomize builder: the
shared fixtures build to plaintext, and errors carry the pipeline's prefix exactly once."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from kustomize_controller.kustomize.build import KustomizeBuilder, detect_builder
from kustomize_controller.kustomize.errors import DecryptionError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.kustomize.sops import SopsDecryptor
from kustomize_controller.runtime.clock import RealClock

from .conftest import requires_gpg
from .sopsgen import REPO, TESTDATA, fixture

KUBECTL = REPO / ".venv" / "bin" / "kubectl"
pytestmark = [
    pytest.mark.builder,
    pytest.mark.skipif(not KUBECTL.exists(), reason=f"{KUBECTL} is not installed"),
]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "source"
    shutil.copytree(TESTDATA, src, ignore=shutil.ignore_patterns("keys", "remote"))
    (src / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: sops-\n"
        "resources: [algorithms, envs, files, patches, inside]\ncomponents: [./component]\n"
    )
    return src


async def _build(tmp_path: Path, source: Path, decryptor: SopsDecryptor) -> dict[tuple[str, str], dict]:
    clock = RealClock()
    builder = KustomizeBuilder(command=await detect_builder(clock=clock, kustomize_binary=str(KUBECTL)), clock=clock)
    pipeline = BuildPipeline(builder=builder, workspace=Workspace(tmp_path / "ws"))
    async with pipeline.local_checkout(source, path="./") as checkout:
        result = await pipeline.build(checkout, BuildOptions(path="./"), decryptor=decryptor)
    return {(o["kind"], o["metadata"]["name"]): o for o in result.objects}


@requires_gpg
async def test_fixtures_build_to_plaintext(tmp_path: Path, source: Path) -> None:
    text = (source / "algorithms/kustomization.yaml").read_text()
    (source / "algorithms/kustomization.yaml").write_text(text.replace("  - age-pq.yaml\n", ""))
    keys = {"age.agekey": fixture("keys/age.txt"), "pgp.asc": fixture("keys/pgp.asc")}
    with SopsDecryptor.from_secret_data(keys) as dec:
        objects = await _build(tmp_path, source, dec)
        assert dec.gnupg_home is not None
    assert objects[("Secret", "sops-algo-age")]["stringData"] == {"key": "value"}
    assert objects[("Secret", "sops-algo-pgp")]["stringData"] == {"key": "value"}
    assert objects[("Secret", "sops-algo-vault")]["stringData"] == {"key": "value"}  # plain, untouched
    assert objects[("Secret", "sops-inside-secret")]["data"] == {"key": base64.b64encode(b"value").decode()}
    for name in ("sops-envs-secret", "sops-files-secret", "sops-component"):
        assert objects[("Secret", name)]["data"] == {"key": base64.b64encode(b"value").decode()}
    assert objects[("ConfigMap", "sops-envs-configmap")]["data"] == {"key": "value"}
    assert objects[("Secret", "sops-patches-secret")]["stringData"] == {"key": "merge1", "merge2": "merge2"}
    assert all("sops" not in o for o in objects.values())


async def test_post_quantum_error_through_the_pipeline(tmp_path: Path, source: Path) -> None:
    with (
        SopsDecryptor.from_secret_data({"age.agekey": fixture("keys/age.txt")}) as dec,
        pytest.raises(DecryptionError) as info,
    ):
        await _build(tmp_path, source, dec)
    message = str(info.value)
    # The "<gvk>/<name>" label is the pipeline's (kustomize v5 renders it "Secret.v1.[noGrp]").
    assert message.startswith("decryption failed for '")
    assert "/sops-algo-age-pq': failed to decrypt and format '/sops-algo-age-pq' Secret data: " in message
    assert "Secret data: cannot get sops data key: " in message
    assert message.count("decryption failed for") == 1
    assert "not supported: post-quantum age" in message


async def test_source_error_through_the_pipeline(tmp_path: Path, source: Path) -> None:
    env = source / "envs/env.env"
    env.write_bytes(env.read_bytes().replace(b"key=", b"key_unencrypted=plain\nkey=", 1))
    with (
        SopsDecryptor.from_secret_data({"age.agekey": fixture("keys/age.txt")}) as dec,
        pytest.raises(DecryptionError) as info,
    ):
        await _build(tmp_path, source, dec)
    assert str(info.value) == (
        "error decrypting sources: 'envs/env.env': failed to verify sops data integrity: "
        "MAC mismatch, the document was modified after encryption"
    )
