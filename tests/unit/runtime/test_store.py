import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kustomize_controller.runtime.store import NAMESPACE_INDEX, Store, object_key, split_key


def obj(name: str, ns: str | None = "ns", rv: str = "1", src: str = "") -> dict:
    meta = {"name": name, "resourceVersion": rv}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta, "spec": {"source": src}}


def by_source(o: dict) -> list[str]:
    return [o["spec"]["source"]] if o["spec"]["source"] else []


def test_keys() -> None:
    assert object_key(obj("a")) == "ns/a"
    assert object_key(obj("a", ns=None)) == "a"
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("a") == (None, "a")


def test_indexes_follow_updates_and_deletes() -> None:
    store = Store()
    store.add_indexer("source", by_source)
    store.upsert(obj("a", src="git/x"))
    store.upsert(obj("b", src="git/x"))
    store.upsert(obj("c", ns="other", src="git/y"))
    assert store.index_keys("source", "git/x") == ["ns/a", "ns/b"]
    store.upsert(obj("a", rv="2", src="git/y"))
    assert store.index_keys("source", "git/x") == ["ns/b"]
    assert store.index_keys("source", "git/y") == ["ns/a", "other/c"]
    store.delete("other/c")
    assert store.index_keys("source", "git/y") == ["ns/a"]
    assert store.index_keys(NAMESPACE_INDEX, "other") == []
    assert [o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "ns")] in (["a", "b"], ["b", "a"])


def test_indexer_added_late_indexes_existing_objects() -> None:
    store = Store()
    store.upsert(obj("a", src="s"))
    store.add_indexer("source", by_source)
    assert store.index_keys("source", "s") == ["ns/a"]
    with pytest.raises(ValueError):
        store.add_indexer("source", by_source)


def test_replace_reports_adds_updates_and_vanished_objects() -> None:
    store = Store()
    store.replace([obj("keep"), obj("change"), obj("gone")])
    result = store.replace([obj("keep"), obj("change", rv="2"), obj("new")])
    assert [o["metadata"]["name"] for o in result.added] == ["new"]
    assert [
        (old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"]) for old, new in result.updated
    ] == [("1", "2")]
    assert [o["metadata"]["name"] for o in result.unchanged] == ["keep"]
    assert [(k, o["metadata"]["name"]) for k, o in result.deleted] == [("ns/gone", "gone")]
    assert sorted(store.keys()) == ["ns/change", "ns/keep", "ns/new"]


@settings(max_examples=200, deadline=None)
@given(
    before=st.dictionaries(st.sampled_from("abcdefg"), st.integers(1, 3), max_size=7),
    after=st.dictionaries(st.sampled_from("abcdefg"), st.integers(1, 3), max_size=7),
)
def test_replace_accounts_for_every_key(before: dict[str, int], after: dict[str, int]) -> None:
    store = Store()
    store.add_indexer("source", by_source)
    store.replace([obj(k, rv=str(v), src=f"s{v}") for k, v in before.items()])
    result = store.replace([obj(k, rv=str(v), src=f"s{v}") for k, v in after.items()])
    names = lambda objs: sorted(o["metadata"]["name"] for o in objs)  # noqa: E731
    assert names(result.added) == sorted(set(after) - set(before))
    assert names(new for _, new in result.updated) == sorted(k for k in after if k in before and before[k] != after[k])
    assert names(result.unchanged) == sorted(k for k in after if k in before and before[k] == after[k])
    assert sorted(k for k, _ in result.deleted) == sorted(f"ns/{k}" for k in set(before) - set(after))
    assert sorted(store.keys()) == sorted(f"ns/{k}" for k in after)
    for v in (1, 2, 3):  # indexes agree with the content
        assert store.index_keys("source", f"s{v}") == sorted(f"ns/{k}" for k, x in after.items() if x == v)
