"""Which roots may share a builder process, the wrapper's output split, and the cross-root check."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kustomize_controller.kustomize.batch import (
    BatchHint,
    BatchSplitError,
    WalkFacts,
    batch_hint,
    crossed,
    previous_names,
    sentinel_name,
    split_output,
    write_wrapper,
)
from kustomize_controller.kustomize.confine import check_confinement

FIFO = {"resources": ["a.yaml"], "sortOptions": {"order": "fifo"}}


def facts(*kustomizations: dict[str, object]) -> WalkFacts:
    out = WalkFacts.empty()
    for kus in kustomizations:
        out.record(kus)
    return out


@pytest.mark.parametrize(
    ("extra", "top", "remote", "batchable"),
    [
        ({}, FIFO, False, True),
        ({"namespace": "x", "namePrefix": "p-", "configMapGenerator": [], "patches": []}, FIFO, False, True),
        ({}, FIFO, True, False),  # remote bases: never
        ({"vars": []}, FIFO, False, False),
        ({"replacements": []}, FIFO, False, False),
        ({"configurations": ["c.yaml"]}, FIFO, False, False),
        ({"crds": ["c.yaml"]}, FIFO, False, False),
        ({"openapi": {"path": "s.json"}}, FIFO, False, False),
        ({"buildMetadata": ["originAnnotations"]}, FIFO, False, False),
        ({"transformers": ["t.yaml"]}, FIFO, False, False),
        ({"patchesJson6902": []}, FIFO, False, False),
        ({"sops": {}}, FIFO, False, False),  # anything unknown
        ({}, {"resources": []}, False, False),  # no sort: the CLI's legacy order
        ({}, {"sortOptions": {"order": "legacy"}}, False, False),
        ({}, {"kind": "Component", "sortOptions": {"order": "fifo"}}, False, False),
    ],
)
def test_batch_hint(extra: dict[str, object], top: dict[str, object], remote: bool, batchable: bool) -> None:
    hint = batch_hint(facts(top, extra), top, remote=remote)
    assert (hint is not None) is batchable


@pytest.mark.parametrize(
    ("item", "text", "renames"),
    [
        ({"patch": "x"}, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", False),
        ({"patch": "x"}, "- op: replace\n  path: /metadata/name\n  value: b\n", True),  # JSON 6902
        ({"patch": "x"}, '[{"op": "remove", "path": "/spec"}]', True),
        ({"patch": "x", "options": {"allowNameChange": True}}, "metadata: {name: a}\n", True),
        ({"patch": "x", "options": {"allowKindChange": True}}, "metadata: {name: a}\n", True),
        ({"path": "gone.yaml"}, None, True),  # unreadable: assume the worst
        ({"patch": "x"}, "{{{", True),
    ],
)
def test_patches_that_may_rename(item: dict[str, object], text: str | None, renames: bool) -> None:
    walk = WalkFacts.empty()
    walk.record_patch(item, text)
    assert walk.renaming_patches is renames
    assert (batch_hint(walk, FIFO, remote=False) is None) is renames


def test_the_confinement_walk_collects_every_kustomization_s_facts(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "kustomization.yaml").write_text(
        "namePrefix: base-\nresources: [a.yaml]\npatches:\n- path: p.yaml\n")
    (tmp_path / "base" / "p.yaml").write_text("- op: remove\n  path: /spec\n")
    (tmp_path / "kustomization.yaml").write_text("nameSuffix: -top\nresources: [base]\n")
    report = check_confinement(tmp_path, tmp_path, allow_remote=False)
    assert report.facts.prefixes == {"base-"} and report.facts.suffixes == {"-top"}
    assert report.facts.fields == {"namePrefix", "nameSuffix", "resources", "patches"}
    assert report.facts.renaming_patches  # the JSON patch, read from its file


def test_previous_names_strip_hash_prefixes_and_suffixes() -> None:
    assert previous_names("web", [], []) == {"web"}
    assert previous_names("p-q-cfg-s-9g4hk8dm2c", ["p-", "q-"], ["-s"]) >= {
        "p-q-cfg-s-9g4hk8dm2c", "p-q-cfg-s", "q-cfg-s", "cfg-s", "p-q-cfg", "q-cfg", "cfg"}
    assert previous_names("p-", ["p-"], []) == {"p-"}  # never the empty name


def test_wrapper_and_split_round_trip(tmp_path: Path) -> None:
    wrapper = tmp_path / "w"
    wrapper.mkdir()
    roots = [tmp_path / "a" / "x", tmp_path / "b"]
    kfile = write_wrapper(wrapper, roots, "tok")
    kus = yaml.safe_load(kfile.read_text())
    assert kus["sortOptions"] == {"order": "fifo"}
    assert kus["resources"] == ["../a/x", "sentinel-0.yaml", "../b", "sentinel-1.yaml"]
    sentinel = yaml.safe_load((wrapper / "sentinel-1.yaml").read_text())
    assert sentinel["metadata"]["name"] == sentinel_name("tok", 1)

    def doc(name: str) -> bytes:
        return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n".encode()

    one, two, three = doc("one"), doc("two") + b"data:\n  x: |\n    ---\n", doc("three")
    output = b"---\n".join([one, two, doc(sentinel_name("tok", 0)), three, doc(sentinel_name("tok", 1))])
    assert split_output(output, "tok", 2) == [one + b"---\n" + two, three]
    empty_first = b"---\n".join([doc(sentinel_name("tok", 0)), three, doc(sentinel_name("tok", 1))])
    assert split_output(empty_first, "tok", 2) == [b"", three]
    with pytest.raises(BatchSplitError):
        split_output(output, "tok", 3)  # a sentinel missing
    with pytest.raises(BatchSplitError):
        split_output(output + b"---\n" + one, "tok", 2)  # objects after the last sentinel
    with pytest.raises(BatchSplitError):
        split_output(b"---\n".join([doc(sentinel_name("tok", 1)), doc(sentinel_name("tok", 0))]), "tok", 2)


def _objects(*docs: str) -> bytes:
    return "---\n".join(docs).encode()


def test_crossed_flags_a_root_holding_another_root_s_possible_previous_name() -> None:
    a = _objects("kind: Deployment\nmetadata:\n  name: web\nspec:\n  cm: settings-9g4hk8dm2c\n")
    b = _objects("kind: ConfigMap\nmetadata:\n  name: settings-9g4hk8dm2c\n")
    c = _objects("kind: Deployment\nmetadata:\n  name: api\nspec:\n  cm: settings\n")  # B's name before its hash
    d = _objects("kind: Service\nmetadata:\n  name: settings-1\n")  # a longer token: not a match
    plain = BatchHint()
    assert crossed([a, b], [plain, plain]) == {0}
    assert crossed([c, b], [plain, plain]) == {0}
    assert crossed([d, b], [plain, plain]) == set()
    prefixed = _objects("kind: ServiceAccount\nmetadata:\n  name: team-runner\n")
    user = _objects("kind: Pod\nmetadata:\n  name: p\nspec:\n  serviceAccountName: \"runner\"\n")
    assert crossed([user, prefixed], [plain, BatchHint(prefixes=frozenset({"team-"}))]) == {0}
    assert crossed([user, prefixed], [plain, plain]) == set()
    rbac = _objects("kind: ClusterRole\nmetadata:\n  name: system:reader\n")
    binding = _objects("kind: ClusterRoleBinding\nmetadata:\n  name: b\nroleRef:\n  name: system:reader\n")
    assert crossed([binding, rbac], [plain, plain]) == {0}
