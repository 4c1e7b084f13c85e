"""``kustomize-controller build``: offline rendering with the real builder."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kustomize_controller.cli import main

from .conftest import DATA

pytestmark = pytest.mark.builder

KS = """apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: web
  namespace: flux-system
spec:
  interval: 10m
  prune: true
  sourceRef:
    kind: GitRepository
    name: repo
  path: ./overlays/prod
  targetNamespace: prod
  commonMetadata:
    labels:
      owner: team-a
  postBuild:
    substitute:
      TIER: gold
    substituteFrom:
    - kind: ConfigMap
      name: cluster-vars
"""


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(DATA / "differential" / "01-base-overlay", root)
    cm = root / "base" / "configmap.yaml"
    cm.write_text(cm.read_text() + "  TIER: ${TIER}\n")
    return root


def test_build_with_kustomization(artifact: Path, tmp_path: Path) -> None:
    ks = tmp_path / "ks.yaml"
    ks.write_text(KS)
    before = sorted(p.name for p in (artifact / "overlays" / "prod").iterdir())
    code, out, err = run("build", str(artifact), "--kustomization", str(ks), "--no-remote-bases")
    assert code == 0, err
    objects = list(yaml.safe_load_all(out))
    assert {o["metadata"]["namespace"] for o in objects} == {"prod"}
    assert all(o["metadata"]["labels"]["owner"] == "team-a" for o in objects)
    cm = next(o for o in objects if o["kind"] == "ConfigMap")
    assert cm["data"]["TIER"] == "gold"
    assert "substituteFrom needs a cluster, skipped: ConfigMap/cluster-vars" in err
    assert sorted(p.name for p in (artifact / "overlays" / "prod").iterdir()) == before  # PATH untouched


def test_build_without_kustomization_uses_the_root(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n")
    code, out, _ = run("build", str(tmp_path))
    assert code == 0
    assert yaml.safe_load(out)["metadata"]["name"] == "plain"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "/definitely/not/here"], "error: artifact root /definitely/not/here is not a directory"),
        (["build", "{root}", "--kustomization", "{root}/missing.yaml"], "error: cannot read"),
        (["build", "{root}", "--kustomization", "{root}/base/deployment.yaml"], "holds no Kustomization object"),
        (["build", "{root}", "--kustomization", "{root}/bad-ks.yaml"], "error: Kustomization/flux-system/web: "),
        (["build", "{root}", "--feature-gates", "Nope=true"], "error: feature-gate 'Nope' not supported"),
        (["build", "{root}", "--kustomization", "{root}/strict-ks.yaml"], 'variable not set (strict mode): "TIER"'),
        (["build", "{root}", "--kustomization", "{root}/escape-ks.yaml"], "error: kustomization path not found"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line(artifact: Path, args: list[str], message: str) -> None:
    (artifact / "bad-ks.yaml").write_text(KS.replace("prune: true", "prune: maybe"))
    (artifact / "strict-ks.yaml").write_text(KS.replace("TIER: gold", "OTHER: x"))
    (artifact / "escape-ks.yaml").write_text(KS.replace("./overlays/prod", "../../../nowhere"))
    code, out, err = run(*[a.format(root=artifact) for a in args])
    assert code == 1
    assert out == ""
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and message in lines[0]


def test_strict_substitution_gate_off(artifact: Path) -> None:
    ks = artifact / "strict-ks.yaml"
    ks.write_text(KS.replace("TIER: gold", "OTHER: x"))
    code, out, err = run("build", str(artifact), "--kustomization", str(ks),
                         "--feature-gates", "StrictPostBuildSubstitutions=false")
    assert code == 0, err
    cm = next(o for o in yaml.safe_load_all(out) if o["kind"] == "ConfigMap")
    assert cm["data"]["TIER"] is None


def test_usage_errors_and_module_entry_point(tmp_path: Path) -> None:
    assert run("build")[0] == 2
    res = subprocess.run([sys.executable, "-m", "kustomize_controller", "build", str(tmp_path / "nope")],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 1 and res.stderr.startswith("error: ")


def test_the_installed_builder_is_used_whatever_path_says(tmp_path: Path) -> None:
    """Run as the installed console script from a shell whose PATH has another kubectl first: the build
    still runs the kubectl installed beside the interpreter (the pinned one), and says nothing about it."""
    script = Path(sys.executable).parent / "kustomize-controller"
    if not (Path(sys.executable).parent / "kubectl").is_file() or not script.is_file():
        pytest.skip("no builder installed beside the interpreter (make builder)")
    impostor = tmp_path / "bin"
    impostor.mkdir()
    for name, version in (("kubectl", '{"clientVersion": {"gitVersion": "v1.32.0"}, "kustomizeVersion": "v5.5.0"}'),
                          ("kustomize", "v5.5.0")):
        fake = impostor / name
        fake.write_text(f"#!/bin/sh\ncase \"$1\" in version) echo '{version}';;\n"
                        "*) printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata: {name: impostor}\\n';; esac\n")
        fake.chmod(0o755)
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n")
    env = {"PATH": f"{impostor}:/usr/bin:/bin", "HOME": str(tmp_path)}
    res = subprocess.run([str(script), "build", str(tmp_path)], capture_output=True, text=True, env=env,
                         check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load(res.stdout) == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}}
    assert "warning" not in res.stderr
    # told to use the impostor, it does, and warns that it is not the pinned version
    res = subprocess.run([str(script), "build", str(tmp_path), "--kustomize-binary", str(impostor / "kustomize")],
                         capture_output=True, text=True, env=env, check=False, timeout=120)
    assert yaml.safe_load(res.stdout)["metadata"]["name"] == "impostor"
    assert "is kustomize v5.5.0, not the v5.8.1 upstream Flux pins" in res.stderr
