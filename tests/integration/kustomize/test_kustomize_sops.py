"""The Decryptor hooks with the SOPS decryptor and upstream's test data, through the real builder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kustomize_controller.kustomize.errors import EncryptedSecretError
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.kustomize.sops.decryptor import SopsDecryptor

from .conftest import Open

pytestmark = pytest.mark.builder

SOPS_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "testdata" / "sops"

if not SOPS_DATA.is_dir():  # pragma: no cover - the shared reference is a sibling of the clone
    pytest.skip(f"SOPS test data not found at {SOPS_DATA}", allow_module_level=True)


def decryptor() -> SopsDecryptor:
    keys = SOPS_DATA / "keys"
    return SopsDecryptor.from_secret_data(
        {"age.agekey": (keys / "age.txt").read_bytes(), "pgp.asc": (keys / "pgp.asc").read_bytes()}
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("envs", {"envs-configmap": {"key": "value"}, "envs-secret": {"key": "dmFsdWU="}}),
        ("files", {"files-configmap": {"key": "value"}, "files-secret": {"key": "dmFsdWU="}}),
        ("inside", {"inside-secret": {"key": "dmFsdWU="}}),
        ("patches", {"patches-secret": {"key": "dmFsdWU="}}),
    ],
)
async def test_sources_and_objects_are_decrypted(pipeline: BuildPipeline, open_source: Open, path: str,
                                                 expected: dict[str, dict[str, str]]) -> None:
    async with open_source(SOPS_DATA, path=path) as checkout:
        result = await pipeline.build(checkout, BuildOptions(path=path), decryptor=decryptor())
    assert {o["metadata"]["name"]: o.get("data") for o in result.objects} == expected


async def test_encrypted_secret_without_decryption_fails_the_guard(
    pipeline: BuildPipeline, open_source: Open, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SOPS_DATA / "algorithms" / "age.yaml", src / "age.yaml")
    with pytest.raises(EncryptedSecretError) as err:
        async with open_source(src, path=".") as checkout:
            await pipeline.build(checkout, BuildOptions())
    assert str(err.value) == (
        "Secret/age is SOPS encrypted, configuring decryption is required for this secret to be reconciled"
    )
