"""``decrypt_sources``: generator sources and patches decrypted in place before the build."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kustomize_controller.kustomize.errors import DecryptionError
from kustomize_controller.kustomize.sops import SopsDecryptor, SopsIntegrityError

from .sopsgen import REPO, TESTDATA, AgeKey, Recipe, encrypt_document, fixture

KUBECTL = REPO / ".venv" / "bin" / "kubectl"
FIXTURE_DIRS = ("files", "envs", "patches", "component")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "artifact"
    root.mkdir()
    for sub in FIXTURE_DIRS:
        shutil.copytree(TESTDATA / sub, root / sub)
    (root / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - files\n  - envs\n  - patches\n  - missing-dir\n  - https://example.com/remote.yaml\n"
        "components:\n  - ./component\n"
    )
    return root


def test_fixture_sources_are_decrypted_in_place(decryptor: SopsDecryptor, tree: Path) -> None:
    decryptor.decrypt_sources(tree, tree)
    assert (tree / "files/file.txt").read_bytes() == b"value"
    assert (tree / "envs/env.env").read_bytes() == b"key=value\n"
    assert (tree / "component/env.env").read_bytes() == b"key=value\n"
    assert yaml.safe_load((tree / "patches/merge1.yaml").read_text())["stringData"] == {"key": "merge1"}
    assert yaml.safe_load((tree / "patches/merge2.yaml").read_text())["stringData"] == {"merge2": "merge2"}
    assert (tree / "envs/env.env").stat().st_mode & 0o777 == 0o600
    # idempotent: a second pass finds nothing encrypted
    decryptor.decrypt_sources(tree, Path("."))


@pytest.mark.skipif(not KUBECTL.exists(), reason=f"{KUBECTL} is not installed")
def test_decrypted_sources_build_with_kubectl_kustomize(decryptor: SopsDecryptor, tree: Path) -> None:
    text = (tree / "kustomization.yaml").read_text()
    (tree / "kustomization.yaml").write_text(
        text.replace("  - https://example.com/remote.yaml\n", "").replace("  - missing-dir\n", "")
    )
    decryptor.decrypt_sources(tree, tree)
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(tree)], capture_output=True, text=True, timeout=60, check=True
    )
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(result.stdout)}
    assert objects[("Secret", "files-secret")]["data"]["key"] == "dmFsdWU="  # base64("value")
    assert objects[("ConfigMap", "envs-configmap")]["data"]["key"] == "value"
    assert objects[("Secret", "component")]["data"]["key"] == "dmFsdWU="
    assert objects[("Secret", "patches-secret")]["stringData"] == {"key": "merge1", "merge2": "merge2"}
    assert "ENC[" not in result.stdout


def test_only_reachable_kustomizations_are_visited(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(TESTDATA / "envs", root / "envs")
    shutil.copytree(TESTDATA / "files", root / "files")
    (root / "kustomization.yaml").write_text("resources: [envs]\n")
    decryptor.decrypt_sources(root, root)
    assert (root / "envs/env.env").read_bytes() == b"key=value\n"
    assert (root / "files/file.txt").read_bytes() == fixture("files/file.txt")


def test_remote_patch_is_skipped_and_config_map_sources_untouched(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "cm.env").write_bytes(fixture("envs/env.env"))
    (root / "kustomization.yaml").write_text(
        "configMapGenerator:\n- name: c\n  envs: [cm.env]\npatches:\n- path: https://example.com/p.yaml\n- patch: 'x'\n"
    )
    decryptor.decrypt_sources(root, root)
    assert (root / "cm.env").read_bytes() == fixture("envs/env.env")


def test_plain_sources_are_left_alone(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "plain.env").write_text("a=b\n")
    (root / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  envs: [plain.env]\n  files: [plain.env]\n")
    decryptor.decrypt_sources(root, root)
    assert (root / "plain.env").read_text() == "a=b\n"


def test_escaping_the_root_is_refused(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    outside = tmp_path / "outside.env"
    outside.write_bytes(fixture("envs/env.env"))
    root = tmp_path / "root"
    root.mkdir()
    (root / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  envs: [../outside.env]\n")
    with pytest.raises(DecryptionError) as info:
        decryptor.decrypt_sources(root, root)
    assert str(info.value) == "path '../outside.env' resolves outside the root"
    assert outside.read_bytes() == fixture("envs/env.env")


def test_symlink_escaping_the_root_is_refused(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(TESTDATA / "envs", outside)
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "linked")
    (root / "kustomization.yaml").write_text("resources: [linked]\n")
    with pytest.raises(DecryptionError, match="resolves outside the root"):
        decryptor.decrypt_sources(root, root)
    assert (outside / "env.env").read_bytes() == fixture("envs/env.env")


def test_symlinked_source_file_is_refused(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "real.env").write_bytes(fixture("envs/env.env"))
    os.symlink(root / "real.env", root / "link.env")
    (root / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  envs: [link.env]\n")
    with pytest.raises(DecryptionError, match=r"cannot decrypt irregular file 'link\.env'"):
        decryptor.decrypt_sources(root, root)


def test_missing_source_file(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  files: [k=nope.txt]\n")
    with pytest.raises(DecryptionError) as info:
        decryptor.decrypt_sources(root, root)
    assert str(info.value) == "lstat nope.txt: no such file or directory"


def test_directory_without_kustomization_file(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "kustomization.yaml").write_text("resources: [sub]\n")
    with pytest.raises(DecryptionError, match="no kustomization file found in 'sub'"):
        decryptor.decrypt_sources(root, root)


def test_size_limit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "env.env").write_bytes(fixture("envs/env.env"))
    (root / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  envs: [env.env]\n")
    size = len(fixture("envs/env.env"))
    keys = {"a.agekey": fixture("keys/age.txt")}
    with SopsDecryptor.from_secret_data(keys, max_file_size=100) as dec, pytest.raises(DecryptionError) as info:
        dec.decrypt_sources(root, root)
    assert str(info.value) == (f"cannot decrypt file 'env.env' with size ({size} bytes) exceeding limit (100)")


def test_tampered_source_fails_with_file_name(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "p.yaml").write_bytes(fixture("patches/merge1.yaml").replace(b"name: secret", b"name: other"))
    (root / "kustomization.yaml").write_text("patches:\n- path: p.yaml\n")
    with pytest.raises(SopsIntegrityError) as info:
        decryptor.decrypt_sources(root, root)
    assert str(info.value).startswith("'p.yaml': failed to verify sops data integrity")
    assert (root / "p.yaml").read_bytes() != b""  # nothing half-written


def test_file_source_store_comes_from_the_key(tmp_path: Path) -> None:
    age_key = AgeKey.generate()
    root = tmp_path / "root"
    root.mkdir()
    doc = encrypt_document({"a": 1, "b": "two"}, "json", Recipe(age_recipients=[age_key.recipient]))
    (root / "blob.bin").write_bytes(doc)
    (root / "kustomization.yaml").write_text("secretGenerator:\n- name: s\n  files: [config.json=blob.bin]\n")
    with SopsDecryptor.from_secret_data(age_key.secret_data) as dec:
        dec.decrypt_sources(root, root)
    import json

    assert json.loads((root / "blob.bin").read_bytes()) == {"a": 1, "b": "two"}


def test_nested_overlays_and_cycles(tmp_path: Path) -> None:
    age_key = AgeKey.generate()
    root = tmp_path / "root"
    for d in ("overlay", "base", "base/inner"):
        (root / d).mkdir(parents=True)
    env = encrypt_document({"A": "1"}, "dotenv", Recipe(age_recipients=[age_key.recipient]))
    (root / "base/inner/secret.env").write_bytes(env)
    (root / "overlay/kustomization.yaml").write_text("resources: [../base]\n")
    (root / "base/kustomization.yml").write_text("resources: [inner, ../overlay]\n")  # a cycle back up
    (root / "base/inner/Kustomization").write_text("secretGenerator:\n- name: s\n  envs: [secret.env]\n")
    with SopsDecryptor.from_secret_data(age_key.secret_data) as dec:
        dec.decrypt_sources(root, root / "overlay")
    assert (root / "base/inner/secret.env").read_text() == "A=1\n"


def test_multiple_kustomization_files_is_an_error(decryptor: SopsDecryptor, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "kustomization.yaml").write_text("resources: []\n")
    (root / "kustomization.yml").write_text("resources: []\n")
    with pytest.raises(DecryptionError, match="found multiple kustomization files"):
        decryptor.decrypt_sources(root, root)


@pytest.mark.parametrize("text", ["- a list\n", "key: [unclosed\n"])
def test_unreadable_kustomization(decryptor: SopsDecryptor, tmp_path: Path, text: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "kustomization.yaml").write_text(text)
    with pytest.raises(DecryptionError, match=r"failed to unmarshal kustomization file from 'kustomization\.yaml'"):
        decryptor.decrypt_sources(root, root)
