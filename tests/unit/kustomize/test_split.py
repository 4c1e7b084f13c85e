"""Which roots may be built in parts, how they are cut, and when the parts are trusted (kustomize/split.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.kustomize.batch import BatchHint
from kustomize_controller.kustomize.split import (
    SplitPlan,
    check_parts,
    join_parts,
    partition,
    split_plan,
    wrapper_kustomization,
)

HINT = BatchHint()
TOP: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                       "sortOptions": {"order": "fifo"}, "resources": ["a.yaml", "b.yaml", "c"]}


def test_a_root_of_per_object_transformations_may_be_split() -> None:
    top = {**TOP, "namespace": "n", "namePrefix": "p-", "labels": [{"pairs": {"a": "b"}}],
           "configMapGenerator": [{"name": "g", "literals": ["A=1"]}],
           "patches": [{"target": {"kind": "Deployment"}, "patch": "..."}]}
    plan = split_plan(top, BatchHint(prefixes=frozenset({"p-", "base-"})), [1, 2, 3], top_revisited=False)
    assert plan is not None and plan.objects == 6
    assert plan.top == BatchHint(prefixes=frozenset({"p-"}))  # the root's own affixes, for collisions


@pytest.mark.parametrize("change", [
    {"replicas": [{"name": "x", "count": 1}]},
    {"components": ["c"]},
    {"bases": ["b"]},
    {"patchesStrategicMerge": ["p.yaml"]},
    {"patches": [{"patch": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"}]},
    {"patches": [{"path": "p.yaml", "target": {}}]},
    {"configMapGenerator": [{"name": "g", "behavior": "merge"}]},
    {"secretGenerator": [{"name": "g", "behavior": "replace"}]},
    {"vars": []},
    {"resources": ["only.yaml"]},
    {"resources": ["a.yaml", {"not": "a path"}]},
], ids=repr)
def test_what_a_root_may_not_use(change: dict[str, Any]) -> None:
    top = {**TOP, **change}
    resources = top["resources"]
    assert split_plan(top, HINT, [1] * len(resources), top_revisited=False) is None


def test_no_split_without_a_batch_hint_or_when_the_walk_comes_back() -> None:
    assert split_plan(TOP, None, [1, 1, 1], top_revisited=False) is None
    assert split_plan(TOP, HINT, [1, 1, 1], top_revisited=True) is None
    assert split_plan(TOP, HINT, [1, 1], top_revisited=False) is None  # weights must match the entries


@pytest.mark.parametrize(("weights", "size", "expected"), [
    ([1] * 10, 3, [range(3), range(3, 6), range(6, 8), range(8, 10)]),
    ([3, 3, 3, 3, 3, 3], 6, [range(2), range(2, 4), range(4, 6)]),
    ([1] * 4, 100, [range(2), range(2, 4)]),  # at least two parts
    ([10, 1, 1, 1, 1], 4, [range(1), range(1, 3), range(3, 4), range(4, 5)]),  # the rest as even
    ([1, 1, 1, 10], 4, [range(1), range(1, 2), range(2, 3), range(3, 4)]),  # at most one entry a part
    ([1, 1], 1, [range(1), range(1, 2)]),
])
def test_parts_are_contiguous_slices_of_about_the_size(weights: list[int], size: int,
                                                       expected: list[range]) -> None:
    parts = partition(weights, size)
    assert parts == expected
    assert [i for p in parts for i in p] == list(range(len(weights)))


def test_a_wrapper_is_the_root_with_its_slice_and_paths_from_the_wrapper(tmp_path: Path) -> None:
    directory, wrapper = tmp_path / "artifact" / "app", tmp_path / "work" / "part-0"
    top = {**TOP, "namespace": "n",
           "configMapGenerator": [{"name": "g", "files": ["conf/a.txt", "key=../shared/b.txt"], "envs": ["e.env"]}],
           "secretGenerator": [{"name": "s", "env": "s.env", "literals": ["A=1"]}],
           "patches": [{"target": {"kind": "Service"}, "path": "patches/p.yaml"},
                       {"target": {"kind": "Service"}, "patch": "inline"}]}
    first = wrapper_kustomization(top, ["a.yaml", "./sub/../c"], directory, wrapper, last=False)
    assert first["resources"] == ["../../artifact/app/a.yaml", "../../artifact/app/c"]
    assert first["namespace"] == "n" and "configMapGenerator" not in first and "secretGenerator" not in first
    assert first["patches"] == [{"target": {"kind": "Service"}, "path": "../../artifact/app/patches/p.yaml"},
                                {"target": {"kind": "Service"}, "patch": "inline"}]
    last = wrapper_kustomization(top, ["b.yaml"], directory, wrapper, last=True)
    assert last["configMapGenerator"] == [{"name": "g", "files": ["../../artifact/app/conf/a.txt",
                                                                  "key=../../artifact/shared/b.txt"],
                                           "envs": ["../../artifact/app/e.env"]}]
    assert last["secretGenerator"] == [{"name": "s", "env": "../../artifact/app/s.env", "literals": ["A=1"]}]
    assert list(last) == list(top)  # the root's field order is kept
    assert top["resources"] == TOP["resources"]  # the root is not changed


def cm(name: str, data: str = "", *, api: str = "v1", kind: str = "ConfigMap") -> bytes:
    return f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n{data}".encode()


def plan(*, top: BatchHint = HINT, hint: BatchHint = HINT) -> SplitPlan:
    return SplitPlan(weights=(1, 1), hint=hint, top=top)


def test_parts_naming_nothing_of_each_other_are_joined_in_order() -> None:
    outputs = [cm("a") + b"---\n" + cm("b"), b"", cm("c", "data:\n  k: b-c\n")]
    documents = check_parts(outputs, plan())
    assert documents is not None
    joined = join_parts(outputs, documents)
    assert joined.output == cm("a") + b"---\n" + cm("b") + b"---\n" + cm("c", "data:\n  k: b-c\n")
    assert [d.obj["metadata"]["name"] for d in joined.documents] == ["a", "b", "c"]


@pytest.mark.parametrize(("outputs", "top"), [
    # the same object in two parts: a collision in the whole build
    ([cm("a"), cm("a")], HINT),
    # the same name once the root's prefix and a hash suffix are stripped (names when appended)
    ([cm("p-settings-abcdefghij"), cm("p-settings-0123456789")], BatchHint(prefixes=frozenset({"p-"}))),
    # a part naming another part's object (nameref could have rewritten it)
    ([cm("a", "data:\n  ref: b\n"), cm("b")], HINT),
    ([cm("web", "data:\n  ref: p-conf\n"), cm("p-conf")], BatchHint(prefixes=frozenset({"p-"}))),
    # the same name for different kinds, in two parts: crossed
    ([cm("x"), cm("x", kind="Secret")], HINT),
], ids=["same object", "hash and prefix", "reference", "prefixed reference", "same name"])
def test_parts_that_may_depend_on_each_other_are_not_trusted(outputs: list[bytes], top: BatchHint) -> None:
    assert check_parts(outputs, plan(top=top, hint=top)) is None


def test_same_names_in_other_groups_or_kinds_do_not_collide_but_still_cross() -> None:
    # an apps/v1 and a core object of one name: no collision, but a shared name is never proven
    assert check_parts([cm("a", api="apps/v1", kind="Deployment"), cm("b")], plan()) is not None
    assert check_parts([cm("a", api="apps/v1", kind="Deployment"), cm("a")], plan()) is None


def test_reach_tells_which_files_only_one_entry_reads(tmp_path: Path) -> None:
    from kustomize_controller.kustomize.generate import Overlay
    from kustomize_controller.kustomize.reach import reach

    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}\n"
    files = {
        "app/kustomization.yaml": "resources: [a.yaml, b.yaml, base, c.yaml, sub/kustomization.yaml, gone.yaml]\n",
        "app/a.yaml": cm.format("a"), "app/b.yaml": cm.format("b") + "---\n" + cm.format("b2"),
        "app/c.yaml": cm.format("c"),
        "app/base/kustomization.yaml": "resources: [../b.yaml, own.yaml]\n", "app/base/own.yaml": cm.format("o"),
        "app/sub/kustomization.yaml": "resources: []\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    plan = reach(tmp_path, tmp_path / "app", Overlay(), allow_remote=False).split
    assert plan is not None
    assert plan.weights == (1, 2, 2, 1, 1, 1)  # base: the files below it (b.yaml is not), at least one each
    a, b, base, c, sub, gone = plan.owned
    assert a is not None and c is not None and a != c  # digests of files only their entry reads
    assert b is None  # the base reads it too
    assert base is None and sub is None and gone is None  # a directory, a kustomization file, a missing file
    before = plan.shared
    (tmp_path / "app" / "a.yaml").write_text(cm.format("a2"))
    again = reach(tmp_path, tmp_path / "app", Overlay(), allow_remote=False).split
    assert again is not None and again.shared == before and again.owned[0] != a and again.owned[1:] == plan.owned[1:]
    (tmp_path / "app" / "base" / "own.yaml").write_text(cm.format("o2"))
    third = reach(tmp_path, tmp_path / "app", Overlay(), allow_remote=False).split
    assert third is not None and third.shared != before
