"""kustomization.yaml generation and every spec overlay rule (table tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kustomize_controller.kustomize.errors import ConfinementError, GenerateError
from kustomize_controller.kustomize.generate import Overlay, apply_overlay, generate, is_local_relative_path

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def test_generates_from_plain_yaml_in_lexical_order(tmp_path: Path) -> None:
    write(tmp_path / "b.yaml", CM.format(name="b"))
    write(tmp_path / "a.yml", CM.format(name="a"))
    write(tmp_path / "notes.txt", "not yaml")
    write(tmp_path / "sub" / "c.yaml", CM.format(name="c"))
    write(tmp_path / "app" / "kustomization.yaml", "resources: []\n")
    write(tmp_path / "app" / "ignored.yaml", "not: [kubernetes")
    kfile = generate(tmp_path, tmp_path, Overlay())
    assert kfile == tmp_path / "kustomization.yaml"
    assert load(kfile) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["./a.yml", "./app", "./b.yaml", "./sub/c.yaml"],
        "sortOptions": {"order": "fifo"},
    }


def test_empty_directory_gets_placeholder_namespace(tmp_path: Path) -> None:
    assert load(generate(tmp_path, tmp_path, Overlay()))["namespace"] == "_placeholder"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("key: value\n", "missing kind"),
        ("kind: ConfigMap\nmetadata: {name: x}\n", "missing apiVersion"),
        ("apiVersion: v1\nkind: ConfigMap\n", "missing metadata.name"),
        ("- a\n- b\n", "not an object"),
        ("a: [unclosed\n", ""),
    ],
)
def test_non_kubernetes_yaml_is_an_error_naming_the_file(tmp_path: Path, content: str, reason: str) -> None:
    write(tmp_path / "dir" / "bad.yaml", content)
    with pytest.raises(GenerateError) as err:
        generate(tmp_path, tmp_path, Overlay())
    assert str(err.value).startswith("failed to decode Kubernetes YAML from dir/bad.yaml")
    assert reason in str(err.value)


def test_lists_are_accepted(tmp_path: Path) -> None:
    write(tmp_path / "list.yaml", "apiVersion: v1\nkind: List\nitems: []\n")
    assert load(generate(tmp_path, tmp_path, Overlay()))["resources"] == ["./list.yaml"]


@pytest.mark.parametrize("name", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_existing_kustomization_is_kept_and_overlaid(tmp_path: Path, name: str) -> None:
    write(tmp_path / name, "resources:\n- cm.yaml\nnamespace: old\n")
    kfile = generate(tmp_path, tmp_path, Overlay(target_namespace="new"))
    assert kfile.name == name
    assert load(kfile) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["cm.yaml"],
        "namespace": "new",
        "sortOptions": {"order": "fifo"},
    }


def test_unknown_top_level_keys_are_dropped_like_upstream(tmp_path: Path) -> None:
    write(tmp_path / "kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Component\n"
          "resources: [a.yaml]\nfooBar: 1\nsortOptions: {order: legacy}\n")
    assert load(generate(tmp_path, tmp_path, Overlay())) == {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Component",
        "resources": ["a.yaml"],
        "sortOptions": {"order": "legacy"},
    }


def test_existing_kustomization_without_resources_gets_origin_annotations(tmp_path: Path) -> None:
    write(tmp_path / "kustomization.yaml", "configMapGenerator:\n- name: x\n  literals: [a=b]\n")
    assert load(generate(tmp_path, tmp_path, Overlay()))["buildMetadata"] == ["originAnnotations"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("resources: [a.yaml]\n", {"order": "fifo"}),
        ("resources: [a.yaml]\nsortOptions:\n  order: legacy\n", {"order": "legacy"}),
    ],
)
def test_output_order_is_input_order_unless_sort_options(tmp_path: Path, text: str, expected: Any) -> None:
    write(tmp_path / "kustomization.yaml", text)
    assert load(generate(tmp_path, tmp_path, Overlay()))["sortOptions"] == expected


def test_components_get_no_sort_options(tmp_path: Path) -> None:
    write(tmp_path / "kustomization.yaml", "kind: Component\nresources: [a.yaml]\n")
    assert "sortOptions" not in load(generate(tmp_path, tmp_path, Overlay()))


def test_build_metadata_from_spec_replaces(tmp_path: Path) -> None:
    write(tmp_path / "kustomization.yaml", "resources: [a.yaml]\nbuildMetadata: [originAnnotations]\n")
    kus = load(generate(tmp_path, tmp_path, Overlay(build_metadata=("transformerAnnotations",))))
    assert kus["buildMetadata"] == ["transformerAnnotations"]


SEL = {
    "group": "apps",
    "version": "v1",
    "kind": "Deployment",
    "name": "web",
    "namespace": "ns",
    "labelSelector": "a=b",
    "annotationSelector": "c=d",
}


@pytest.mark.parametrize(
    ("before", "overlay", "after"),
    [
        pytest.param({}, Overlay(), {}, id="nothing"),
        pytest.param({"namespace": "a"}, Overlay(target_namespace="b"), {"namespace": "b"}, id="targetNamespace"),
        pytest.param({}, Overlay(name_prefix="p-"), {"namePrefix": "p-"}, id="namePrefix"),
        pytest.param({"nameSuffix": "-x"}, Overlay(name_suffix="-s"), {"nameSuffix": "-s"}, id="nameSuffix"),
        pytest.param(
            {"patches": [{"path": "p.yaml"}]},
            Overlay(patches=({"patch": "- op: remove\n  path: /x", "target": SEL},)),
            {"patches": [{"path": "p.yaml"}, {"patch": "- op: remove\n  path: /x", "target": SEL}]},
            id="patches-appended-with-target",
        ),
        pytest.param(
            {},
            Overlay(patches=({"patch": "kind: X", "target": {"kind": "X", "name": "", "group": None}},)),
            {"patches": [{"patch": "kind: X", "target": {"kind": "X"}}]},
            id="patch-target-empty-fields-dropped",
        ),
        pytest.param(
            {}, Overlay(patches=({"patch": "kind: X"},)), {"patches": [{"patch": "kind: X"}]}, id="patch-without-target"
        ),
        pytest.param(
            {"components": ["../c1"]},
            Overlay(components=("../c2",)),
            {"components": ["../c1", "../c2"]},
            id="components-appended",
        ),
        pytest.param(
            {},
            Overlay(patches_strategic_merge=({"apiVersion": "v1", "kind": "X", "metadata": {"name": "n"}},)),
            {"patchesStrategicMerge": ['{"apiVersion":"v1","kind":"X","metadata":{"name":"n"}}']},
            id="legacy-patchesStrategicMerge",
        ),
        pytest.param(
            {},
            Overlay(
                patches_json6902=({"target": {"kind": "X", "name": "n"}, "patch": [{"op": "remove", "path": "/a"}]},)
            ),
            {"patchesJson6902": [{"patch": '[{"op":"remove","path":"/a"}]', "target": {"kind": "X", "name": "n"}}]},
            id="legacy-patchesJson6902",
        ),
        pytest.param(
            {},
            Overlay(images=({"name": "nginx", "newTag": "1.2", "newName": "", "digest": ""},)),
            {"images": [{"name": "nginx", "newTag": "1.2"}]},
            id="image-appended",
        ),
        pytest.param(
            {"images": [{"name": "nginx", "newName": "old", "newTag": "1.0"}]},
            Overlay(images=({"name": "nginx", "newName": "new"},)),
            {"images": [{"name": "nginx", "newName": "new", "newTag": "1.0"}]},
            id="image-merge-newName-only-keeps-tag",
        ),
        pytest.param(
            {"images": [{"name": "nginx", "newTag": "1.0", "digest": "sha256:old"}]},
            Overlay(images=({"name": "nginx", "newTag": "2.0"},)),
            {"images": [{"name": "nginx", "newTag": "2.0"}]},
            id="image-merge-tag-clears-digest",
        ),
        pytest.param(
            {"images": [{"name": "nginx", "newTag": "1.0"}]},
            Overlay(images=({"name": "nginx", "digest": "sha256:new"},)),
            {"images": [{"name": "nginx", "digest": "sha256:new"}]},
            id="image-merge-digest-clears-tag",
        ),
        pytest.param(
            {"images": [{"name": "a", "newTag": "1"}]},
            Overlay(images=({"name": "b", "newTag": "2"},)),
            {"images": [{"name": "a", "newTag": "1"}, {"name": "b", "newTag": "2"}]},
            id="image-other-name-appended",
        ),
        pytest.param({}, Overlay(build_metadata=()), {}, id="empty-buildMetadata-ignored"),
    ],
)
def test_overlay_rules(tmp_path: Path, before: dict[str, Any], overlay: Overlay, after: dict[str, Any]) -> None:
    (tmp_path / "c1").mkdir()
    assert apply_overlay(dict(before), overlay, directory=tmp_path / "c1") == after


def test_missing_components_dropped_only_when_ignored(tmp_path: Path) -> None:
    (tmp_path / "present").mkdir()
    overlay = Overlay(components=("present", "absent"), ignore_missing_components=True)
    assert apply_overlay({}, overlay, directory=tmp_path)["components"] == ["present"]
    overlay = Overlay(components=("present", "absent"))
    assert apply_overlay({}, overlay, directory=tmp_path)["components"] == ["present", "absent"]


@pytest.mark.parametrize(
    "component",
    [
        "git::https://x/y",
        "https://github.com/a/b",
        "http://x",
        "ssh://git@x/y",
        "gh:a/b",
        "git@github.com:a/b",
        "github.com/a/b",
        "GitHub.com/a/b",
        "/abs/path",
        "file:///abs",
    ],
)
def test_remote_or_absolute_components_are_refused(tmp_path: Path, component: str) -> None:
    assert not is_local_relative_path(component)
    with pytest.raises(GenerateError, match=f"component path '{component}' must be local and relative"):
        apply_overlay({}, Overlay(components=(component,)), directory=tmp_path)


@pytest.mark.parametrize("component", ["../components/a", "comp", "./x/y"])
def test_local_components_are_accepted(component: str) -> None:
    assert is_local_relative_path(component)


def test_overlay_from_spec_reads_json_names() -> None:
    spec = {
        "targetNamespace": "t",
        "namePrefix": "p",
        "nameSuffix": "s",
        "patches": [{"patch": "x"}],
        "components": ["c"],
        "ignoreMissingComponents": True,
        "images": [{"name": "i"}],
        "buildMetadata": ["originAnnotations"],
        "patchesStrategicMerge": [{"a": 1}],
        "patchesJson6902": [{"patch": []}],
    }
    assert Overlay.from_spec(spec) == Overlay(
        target_namespace="t",
        name_prefix="p",
        name_suffix="s",
        patches=({"patch": "x"},),
        components=("c",),
        ignore_missing_components=True,
        images=({"name": "i"},),
        build_metadata=("originAnnotations",),
        patches_strategic_merge=({"a": 1},),
        patches_json6902=({"patch": []},),
    )


def test_symlinked_kustomization_outside_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text("resources: []\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "kustomization.yaml").symlink_to(outside)
    with pytest.raises(ConfinementError, match="resolves outside the artifact root"):
        generate(root, root, Overlay())


def test_symlinked_manifest_outside_root_is_refused_during_scan(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("super-secret-token")
    root = tmp_path / "root"
    root.mkdir()
    (root / "steal.yaml").symlink_to(secret)
    with pytest.raises(ConfinementError) as err:
        generate(root, root, Overlay())
    assert "super-secret-token" not in str(err.value)


@pytest.mark.parametrize("target", ["missing.yaml", "loop.yaml"], ids=["dangling", "loop"])
def test_an_unreadable_manifest_is_a_generate_error_without_the_temp_path(tmp_path: Path, target: str) -> None:
    # found by fuzzing: a dangling (or looping) link named *.yaml raised FileNotFoundError out of the scan
    (tmp_path / "loop.yaml").symlink_to("loop.yaml") if target == "loop.yaml" else None
    (tmp_path / "a.yaml").symlink_to(target)
    with pytest.raises(GenerateError, match=r"failed to read a\.yaml: ") as err:
        generate(tmp_path, tmp_path, Overlay())
    assert str(tmp_path) not in str(err.value)


@pytest.mark.parametrize("name", ["a.yaml", "kustomization.yaml", "sub"])
def test_a_link_to_a_name_too_long_is_a_generate_error(tmp_path: Path, name: str) -> None:
    # found by fuzzing: stat() of such a link raised OSError (ENAMETOOLONG) out of the scan
    (tmp_path / name).symlink_to("/" + "x" * 300)  # one component longer than NAME_MAX
    with pytest.raises(GenerateError, match=rf"failed to read {name}: File name too long") as err:
        generate(tmp_path, tmp_path, Overlay())
    assert str(tmp_path) not in str(err.value)


@pytest.mark.timeout(30)
def test_links_to_directories_are_not_descended(tmp_path: Path) -> None:
    # found by fuzzing: two links to "." made the scan walk 2**40 paths (a hang); upstream's filepath.Walk
    # does not follow links (extraction drops them anyway: this is the scan's own guard)
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
    (tmp_path / "dir").symlink_to(".")
    (tmp_path / "dhr").symlink_to(".")
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")
    generate(tmp_path, tmp_path, Overlay())
    assert yaml.safe_load((tmp_path / "kustomization.yaml").read_text())["resources"] == ["./cm.yaml",
                                                                                         "./real/cm.yaml"]
