"""The pipeline's memo: bounded by estimated bytes, least recently used first out, and — what a fixed
count of 4,096 got wrong — a round-robin over more entries than that still hits once they fit."""

from __future__ import annotations

from kustomize_controller.kustomize.memo import ENTRY_OVERHEAD, ITEM_OVERHEAD, Memo, estimate
from kustomize_controller.kustomize.pipeline import _reach_size
from kustomize_controller.kustomize.reach import Reach


def _memo(max_bytes: int) -> Memo[str, str]:
    return Memo(max_bytes=max_bytes, size=lambda key, value: estimate(key, value))


def test_estimate_counts_strings_lists_and_the_entry() -> None:
    assert estimate() == ENTRY_OVERHEAD
    assert estimate("abc", ["de", "f"]) == ENTRY_OVERHEAD + 3 * ITEM_OVERHEAD + 6


def test_least_recently_used_goes_first_once_over_the_budget() -> None:
    one = estimate("k0", "v")
    memo = _memo(3 * one)
    for k in ("k0", "k1", "k2"):
        memo.put(k, "v")
    assert memo.get("k0") == "v"  # now the most recent
    memo.put("k3", "v")
    assert memo.get("k1") is None and memo.get("k0") == "v" and memo.get("k2") == "v" and memo.get("k3") == "v"
    assert len(memo) == 3 and memo.bytes == 3 * one


def test_replacing_an_entry_counts_its_bytes_once() -> None:
    memo = _memo(10_000)
    memo.put("k", "short")
    memo.put("k", "a longer value")
    assert len(memo) == 1 and memo.bytes == estimate("k", "a longer value")


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    memo = _memo(estimate("k", "v"))
    memo.put("small", "")
    memo.put("big", "x" * 10_000)
    assert memo.get("big") is None and len(memo) <= 1


def test_a_round_robin_over_ten_thousand_small_entries_hits_once_they_fit() -> None:
    memo = _memo(16 << 20)
    keys = [f"https://source/gitrepository/flux-system/app-{i}/sha256:{i:064x}" for i in range(10_000)]
    misses = 0
    for _round in range(2):
        for key in keys:
            if memo.get(key) is None:
                misses += 1
                memo.put(key, "resources.yaml")
    assert misses == len(keys)  # only the first round misses


def test_a_reach_entry_is_counted_with_every_list_and_text() -> None:
    found = Reach(files=["app/kustomization.yaml", "app/resources.yaml"], dirs=["app"],
                  content_key="sha256:" + "0" * 64, kustomization_file="app/kustomization.yaml",
                  generated="resources:\n- resources.yaml\n")
    key = ("http://artifacts/app.tar.gz", "sha256:" + "1" * 64, "app", "{}", False)
    size = _reach_size(key, found)
    assert size == estimate(*key[:4], found.files, found.dirs, found.content_key, found.kustomization_file,
                            found.generated)
    assert 1_000 < size < 2_000  # the ~1-2 KiB the budget's comment assumes
