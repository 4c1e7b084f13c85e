"""The differential harness' pure parts (``conformance/``): what is normalised, how two records are
compared, and how a known difference explains exactly what it says and nothing more."""

from __future__ import annotations

from typing import Any

from conformance import normalize
from conformance.compare import Known, compare_aspect
from conformance.harness import SideRecord, classify_gap, inventory_refs, parse_samples
from conformance.known import KNOWN
from conformance.metrics import families


def names() -> normalize.Names:
    n = normalize.Names()
    n.add("prune-u1a2b", "<ns>")
    n.add("prune-target-u1a2b", "<ns:target>")
    n.add("conformance:reader-u1a2b", "<clusterrole>")
    return n


def test_names_longest_first_and_rbac_ids() -> None:
    n = names()
    assert n.text("ConfigMap/prune-target-u1a2b/a in prune-u1a2b") == "ConfigMap/<ns:target>/a in <ns>"
    assert n.text("_conformance__reader-u1a2b_rbac.authorization.k8s.io_ClusterRole") == (
        "_<clusterrole>_rbac.authorization.k8s.io_ClusterRole")
    assert n.deep({"prune-u1a2b/x": ["prune-u1a2b"]}) == {"<ns>/x": ["<ns>"]}


def test_only_measured_durations_are_normalised() -> None:
    text = ("Reconciliation finished in 285.363611ms, next run in 1h0m0s; Health check passed in 13.786308ms; "
            "health check failed after 30.012s: timeout; Building manifests with a timeout of 1m0s; "
            "retrying in 4s; finished in 1m2.5s")
    assert normalize.measured_durations(text) == (
        "Reconciliation finished in <d>, next run in 1h0m0s; Health check passed in <d>; "
        "health check failed after <d>: timeout; Building manifests with a timeout of 1m0s; "
        "retrying in 4s; finished in <d>")


def test_messages_lose_upstreams_temporary_directory_and_digests() -> None:
    message = ("stat /tmp/kustomization-2438812252/nowhere: no such file or directory; provided "
               "'sha256:" + "a" * 64 + "'")
    assert normalize.message(message, names()) == (
        "stat <tmp>/nowhere: no such file or directory; provided 'sha256:<digest>'")


def test_inventory_ids_back_to_references() -> None:
    refs = inventory_refs([{"id": "ns_web_apps_Deployment", "v": "v1"}, {"id": "_cluster__Namespace", "v": "v1"},
                           {"id": "_system__admin_rbac.authorization.k8s.io_ClusterRole", "v": "v1"},
                           {"id": "broken", "v": "v1"}])
    assert refs == [("apps/v1", "Deployment", "ns", "web"), ("v1", "Namespace", "", "cluster"),
                    ("rbac.authorization.k8s.io/v1", "ClusterRole", "", "system:admin")]


def test_gaps_are_named_by_the_nearest_candidate() -> None:
    candidates = {"interval": 10.0, "requeue-dependency": 4.0}
    assert classify_gap(0.4, candidates) == "immediate"
    assert classify_gap(10.9, candidates) == "interval"
    assert classify_gap(3.6, candidates) == "requeue-dependency"
    assert classify_gap(30.0, candidates) == "other (30s)"


def test_metric_pages_by_name_label_names_and_bounds() -> None:
    samples = parse_samples('# HELP x y\nh_bucket{controller="k",le="0.5"} 1\nh_bucket{controller="k",le="+Inf"} 2\n'
                            'g 3\n')
    assert families(samples) == {"g": [""], "h_bucket": ["controller,le"], "h_bucket{le}": ["+Inf", "0.5"]}


def test_compare_same_explained_and_unexplained() -> None:
    drop_b = Known("X", "b is ours", True, "docs", frozenset({"events"}),
                   lambda case, aspect, u, o: (u, [e for e in o if e != "b"]))
    assert compare_aspect("c", "events", ["a"], ["a"], [drop_b]).state == "same"
    assert compare_aspect("c", "events", [], [], [drop_b]).state == "n/a"
    explained = compare_aspect("c", "events", ["a"], ["a", "b"], [drop_b])
    assert (explained.state, explained.explained_by) == ("explained", ["X"])
    # a known difference never hides another one
    other = compare_aspect("c", "events", ["a"], ["a", "b", "c"], [drop_b])
    assert other.state == "unexplained" and '+ "c"' in other.diff
    # nor applies to an aspect it does not name
    assert compare_aspect("c", "conditions", ["a"], ["a", "b"], [drop_b]).state == "unexplained"


def note(message: str) -> dict[str, Any]:
    return {"reason": "ReconciliationSucceeded", "message": message}


def test_known_deletion_event_only_at_the_end() -> None:
    entry = next(k for k in KNOWN if k.id == "D4")
    upstream = [note("ConfigMap/<ns>/a deleted"), note("Reconciliation finished in <d>, next run in 1h0m0s")]
    ours = [note("ConfigMap/<ns>/a deleted")]
    assert compare_aspect("deletion", "notifications", upstream, ours, [entry]).state == "explained"
    # the same event missing anywhere else is not this difference
    assert compare_aspect("deletion", "notifications", [note("Reconciliation finished in <d>, next run in 1h0m0s"),
                                                        note("x")], [note("x")], [entry]).state == "unexplained"


def test_known_relative_paths_only_remove_the_directory() -> None:
    entry = next(k for k in KNOWN if k.id == "D6")
    upstream = {"failed": {"<ns>/app": [{"message": "kustomize build failed: open <tmp>/missing.yaml: no such file"}]}}
    ours = {"failed": {"<ns>/app": [{"message": "kustomize build failed: open missing.yaml: no such file"}]}}
    assert compare_aspect("build-failure", "conditions", upstream, ours, [entry]).state == "explained"
    worse = {"failed": {"<ns>/app": [{"message": "kustomize build failed: open other.yaml: no such file"}]}}
    assert compare_aspect("build-failure", "conditions", upstream, worse, [entry]).state == "unexplained"


def test_every_known_difference_is_documented() -> None:
    for entry in KNOWN:
        assert entry.deliberate and entry.doc.startswith("docs/"), entry.id
    assert len({k.id for k in KNOWN}) == len(KNOWN)


def test_an_empty_side_record_compares_as_not_applicable() -> None:
    from conformance.compare import compare_case

    cells = compare_case("c", SideRecord("upstream"), SideRecord("ours"), KNOWN)
    assert {cell.state for cell in cells.values()} == {"n/a"}
