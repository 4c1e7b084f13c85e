"""The confinement walk: every way a kustomization can point kustomize outside the artifact root."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kustomize_controller.kustomize.confine import check_confinement, looks_remote
from kustomize_controller.kustomize.errors import ConfinementError

SECRET = "TOP-SECRET-TOKEN-CONTENT"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp/outside/token`` holds a secret; ``tmp/root`` is the artifact root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_text(SECRET)
    (outside / "kustomization.yaml").write_text("resources: [token]\n")
    root = tmp_path / "root"
    (root / "app").mkdir(parents=True)
    (root / "base").mkdir()
    (root / "base" / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (root / "base" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    return root, outside


def kustomize(root: Path, text: str) -> None:
    (root / "app" / "kustomization.yaml").write_text(text)


def check(root: Path, *, allow_remote: bool = True) -> None:
    check_confinement(root, root / "app", allow_remote=allow_remote)


ESCAPES = [
    ("resources: [/etc/passwd]\n", "'resources' entry '/etc/passwd'"),
    ("resources: [../../outside]\n", "'resources' entry '../../outside'"),
    ("bases: [../../outside]\n", "'bases' entry '../../outside'"),
    ("components: [../../outside]\n", "'components' entry '../../outside'"),
    ("crds: [../../outside/token]\n", "'crds' entry"),
    ("configurations: [../../outside/token]\n", "'configurations' entry"),
    ("openapi:\n  path: ../../outside/token\n", "'openapi.path' entry"),
    ("patches:\n- path: ../../outside/token\n", "'patches.path' entry"),
    ("patchesStrategicMerge:\n- ../../outside/token\n", "'patchesStrategicMerge' entry"),
    ("patchesJson6902:\n- path: ../../outside/token\n  target: {kind: X}\n", "'patchesJson6902.path' entry"),
    ("replacements:\n- path: ../../outside/token\n", "'replacements.path' entry"),
    ("configMapGenerator:\n- name: x\n  files: [../../outside/token]\n", "'configMapGenerator.files' entry"),
    ("configMapGenerator:\n- name: x\n  files: [key=../../outside/token]\n", "'configMapGenerator.files' entry"),
    ("secretGenerator:\n- name: x\n  envs: [../../outside/token]\n", "'secretGenerator.envs' entry"),
    (
        "secretGenerator:\n- name: x\n  env: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
        "'secretGenerator.env' entry",
    ),
    ("transformers: [../../outside/token]\n", "'transformers' entry"),
    ("generators: [../../outside/token]\n", "'generators' entry"),
    ("validators: [../../outside/token]\n", "'validators' entry"),
    ("resources: [../base]\ncomponents: [file:///etc]\n", "local git reference"),
    ("resources: ['git::file:///srv/repo']\n", "local git reference"),
    ("resources: ['FILE:///srv/repo?ref=main']\n", "local git reference"),
]


@pytest.mark.parametrize(("text", "expected"), ESCAPES)
def test_paths_out_of_the_root_are_refused(layout: tuple[Path, Path], text: str, expected: str) -> None:
    root, _ = layout
    kustomize(root, text)
    with pytest.raises(ConfinementError) as err:
        check(root)
    message = str(err.value)
    assert message.startswith("app/kustomization.yaml: ")
    assert expected in message
    assert SECRET not in message


def test_nested_kustomization_is_walked(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "base" / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\nconfigMapGenerator:\n- name: x\n  files: [../../outside/token]\n"
    )
    kustomize(root, "resources: [../base]\n")
    with pytest.raises(ConfinementError, match=r"^base/kustomization.yaml: 'configMapGenerator.files'"):
        check(root)


def test_symlinked_directory_pointing_out_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "linked").symlink_to(outside)
    kustomize(root, "resources: [../linked]\n")
    with pytest.raises(ConfinementError, match=re.escape("'resources' entry '../linked' resolves outside")):
        check(root)


def test_symlinked_file_pointing_out_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "app" / "data.txt").symlink_to(outside / "token")
    kustomize(root, "configMapGenerator:\n- name: x\n  files: [data.txt]\n")
    with pytest.raises(ConfinementError, match=re.escape("'configMapGenerator.files' entry 'data.txt'")):
        check(root)


def test_symlinked_kustomization_file_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    (root / "app" / "kustomization.yaml").symlink_to(outside / "kustomization.yaml")
    with pytest.raises(ConfinementError, match="the kustomization file resolves outside"):
        check(root)


def test_dotdot_is_resolved_lexically_like_kustomize(layout: tuple[Path, Path]) -> None:
    # Through the symlink the path would stay inside (deep/a/b/../../../x); kustomize cleans the
    # ".." first and so would read two levels above the root: refuse.
    root, _ = layout
    (root / "deep" / "a" / "b").mkdir(parents=True)
    (root / "app" / "jump").symlink_to(root / "deep" / "a" / "b")
    kustomize(root, "configMapGenerator:\n- name: x\n  files: [jump/../../../outside/token]\n")
    with pytest.raises(ConfinementError, match="resolves outside the artifact root"):
        check(root)


def test_symlinks_inside_the_root_are_fine(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "alias").symlink_to(root / "base")
    kustomize(root, "resources: [../alias]\n")
    check(root)


@pytest.mark.parametrize(
    "entry",
    [
        "https://github.com/org/repo//deploy?ref=v1",
        "github.com/org/repo/deploy?ref=main",
        "git::https://example.com/repo.git",
        "git@github.com:org/repo.git",
        "ssh://git@example.com/repo",
        "https://raw.githubusercontent.com/org/repo/main/cm.yaml",
        "gitlab.com/org/repo.git//path",
    ],
)
def test_remote_bases_refused_only_when_disabled(layout: tuple[Path, Path], entry: str) -> None:
    root, _ = layout
    kustomize(root, f"resources: ['{entry}']\n")
    assert looks_remote(entry)
    report = check_confinement(root, root / "app", allow_remote=True)
    assert report.remote_references == [entry]
    with pytest.raises(ConfinementError, match="is a remote reference and remote bases are disabled"):
        check(root, allow_remote=False)


def test_remote_components_and_transformers_refused_when_disabled(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    kustomize(root, "transformers: ['https://example.com/t.yaml']\n")
    with pytest.raises(ConfinementError, match="'transformers' entry"):
        check(root, allow_remote=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("helmCharts:\n- name: x\n  repo: https://charts\n", "'helmCharts' is not supported"),
        ("helmGlobals:\n  chartHome: /tmp\n", "'helmGlobals' is not supported"),
        (
            "generators:\n- |\n  apiVersion: builtin\n  kind: HelmChartInflationGenerator\n  name: x\n",
            "HelmChartInflationGenerator",
        ),
        (
            "transformers:\n- |\n  apiVersion: example.com/v1\n  kind: Exec\n  metadata: {name: x}\n",
            "configures plugin 'example.com/v1/Exec' (plugins are disabled)",
        ),
    ],
)
def test_helm_and_plugins_are_refused(layout: tuple[Path, Path], text: str, expected: str) -> None:
    root, _ = layout
    kustomize(root, text)
    with pytest.raises(ConfinementError, match=re.escape(expected)):
        check(root)


@pytest.mark.parametrize(
    "config",
    [
        "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: ../../outside/token\n",
        "apiVersion: builtin\nkind: PatchJson6902Transformer\nmetadata: {name: p}\npath: ../../outside/token\n",
        "apiVersion: builtin\nkind: PatchStrategicMergeTransformer\nmetadata: {name: p}\n"
        "paths: [../../outside/token]\n",
        "apiVersion: builtin\nkind: ReplacementTransformer\nmetadata: {name: p}\n"
        "replacements:\n- path: ../../outside/token\n",
        "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: p}\nfiles: [../../outside/token]\n",
        "apiVersion: builtin\nkind: SecretGenerator\nmetadata: {name: p}\nenvs: [/etc/passwd]\n",
    ],
)
def test_builtin_plugin_configs_are_checked_in_files_dirs_and_inline(layout: tuple[Path, Path], config: str) -> None:
    root, _ = layout
    (root / "app" / "t.yaml").write_text(config)
    kustomize(root, "transformers: [t.yaml]\n")
    with pytest.raises(ConfinementError, match="resolves outside"):
        check(root)
    (root / "tdir").mkdir(exist_ok=True)
    (root / "tdir" / "t.yaml").write_text(config)
    (root / "tdir" / "kustomization.yaml").write_text("resources: [t.yaml]\n")
    kustomize(root, "generators: [../tdir]\n")
    with pytest.raises(ConfinementError, match="resolves outside"):
        check(root)
    indented = "".join("  " + line + "\n" for line in config.splitlines())
    kustomize(root, "validators:\n- |\n" + indented)
    with pytest.raises(ConfinementError, match="resolves outside"):
        check(root)


def test_legitimate_overlay_passes_and_reports_files(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "app" / "p.yaml").write_text("kind: ConfigMap\n")
    (root / "app" / "env").write_text("A=b\n")
    kustomize(
        root,
        "resources: [../base]\npatches:\n- path: p.yaml\n- patch: |\n    kind: X\n"
        "configMapGenerator:\n- name: g\n  envs: [env]\n  files: [k=env]\n"
        "patchesStrategicMerge:\n- |\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x}\n"
        "transformers:\n- |\n  apiVersion: builtin\n  kind: LabelTransformer\n  metadata: {name: l}\n"
        "  labels: {a: b}\n  fieldSpecs: [{path: metadata/labels, create: true}]\n",
    )
    report = check_confinement(root, root / "app", allow_remote=False)
    assert [p.parent.name for p in report.kustomization_files] == ["app", "base"]


def test_cycles_terminate(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    kustomize(root, "resources: [../base]\n")
    (root / "base" / "kustomization.yaml").write_text("resources: [../app]\n")
    check(root)
    report = check_confinement(root, root / "app", allow_remote=True)
    assert report.facts.top_revisited  # a build in parts needs to know (kustomize/split.py)


def test_the_walks_realpath_is_the_systems(layout: tuple[Path, Path]) -> None:
    """The walk remembers real directories and lstats only the last component: for every kind of link it
    must agree with ``os.path.realpath``, which the confinement check relies on."""
    from kustomize_controller.kustomize.confine import _Walker

    root, outside = layout
    (root / "dir-link").symlink_to(root / "base")
    (root / "out-link").symlink_to(outside)
    (root / "base" / "file-link.yaml").symlink_to(root / "base" / "cm.yaml")
    (root / "base" / "out-file").symlink_to(outside / "token")
    (root / "base" / "chain").symlink_to(root / "base" / "file-link.yaml")
    (root / "base" / "dangling").symlink_to(root / "nowhere")
    (root / "base" / "loop").symlink_to(root / "base" / "loop")
    walker = _Walker(root, allow_remote=True)
    names = ["cm.yaml", "file-link.yaml", "out-file", "chain", "dangling", "loop", "missing", "kustomization.yaml"]
    paths = [root / d / n for d in ("base", "dir-link", "out-link", "app", "nowhere") for n in names]
    paths += [root / "dir-link", root / "out-link", root, root / "base"]
    for path in paths:
        for _ in range(2):  # the second time from the remembered directories
            assert walker._realpath(str(path)) == os.path.realpath(path), path
