"""The differences between upstream's controller and ours that the differential run shows.

Each entry says why the behaviours differ, whether the difference is deliberate (then it is written in
``docs/differences.md``, which ``doc`` points at), and how it shows: ``transform`` rewrites both records the
way the difference explains, and nothing more, so that any other difference in the same aspect still fails
the run. Differences that were not deliberate were fixed in the package instead (each with a test in the
project's suite); they have no entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .compare import Known, drop_items

DIFFERENCES = "docs/differences.md"


def _messages(fn: Callable[[str], str]) -> Callable[[Any], Any]:
    """``fn`` applied to every ``message`` value of a record."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (fn(v) if k == "message" and isinstance(v, str) else walk(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk


# ------------------------------------------------------------------------------------------ metrics

_OUR_GAUGES = ("gotk_reconcile_condition{", "gotk_suspend_status{")


def _our_gauges(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    return upstream, [s for s in ours if not s.startswith(_OUR_GAUGES)]


# Go's runtime collector (upstream) and Python's process collector (ours) describe different runtimes;
# controller-runtime's webhook and certificate-watcher series belong to a webhook server upstream does not
# run; the kustomize_controller_* families and controller_detached_reconciles are ours (docs/metrics.md).
_UPSTREAM_ONLY = ("go_", "certwatcher_", "controller_runtime_webhook_", "controller_runtime_conversion_webhook_")
_OURS_ONLY = ("kustomize_controller_", "controller_detached_reconciles", "python_", "process_")
_PROCESS_BOTH = ("process_cpu_seconds_total", "process_max_fds", "process_open_fds", "process_resident_memory_bytes",
                 "process_start_time_seconds", "process_virtual_memory_bytes", "process_virtual_memory_max_bytes",
                 "process_network_receive_bytes_total", "process_network_transmit_bytes_total")


def _runtime_families(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    def keep(name: str, only: tuple[str, ...]) -> bool:
        return name in _PROCESS_BOTH or not name.startswith(only)

    return ({k: v for k, v in upstream.items() if keep(k, _UPSTREAM_ONLY)},
            {k: v for k, v in ours.items() if keep(k, _OURS_ONLY)})


def _gauge_families(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    return upstream, {k: v for k, v in ours.items() if not k.startswith(("gotk_reconcile_condition",
                                                                          "gotk_suspend_status"))}


# ------------------------------------------------------------------------------------------- events


def _deletion_finished(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    """Upstream's deferred block sends "Reconciliation finished" once more after the finalizer ran."""
    if upstream and ours and upstream[:-1] == ours and \
            str(upstream[-1].get("message", "")).startswith("Reconciliation finished in "):
        return upstream[:-1], ours
    return upstream, ours


def _similar_events(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    combined = "(combined from similar events): "
    return drop_items(upstream, lambda e: isinstance(e, dict) and
                      str(e.get("message", "")).startswith(combined)), ours


# -------------------------------------------------------------------------------------------- build


def _relative_paths(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    return _messages(lambda m: m.replace("<tmp>/", ""))(upstream), ours


def _sops_guard(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    text = "upstream applies the Secret with its encrypted values; ours refuses it (the guard's message)"
    return text, text


# ------------------------------------------------------------------------------------------- timing


def _dependency_queueing(case: str, aspect: str, upstream: Any, ours: Any) -> tuple[Any, Any]:
    key = "dependent after its dependency is ready"
    if upstream.get(key) == ["next poll"] and ours.get(key) == ["immediate"]:
        return {**upstream, key: ["immediate"]}, ours
    return upstream, ours


KNOWN: list[Known] = [
    Known("D1", "ours also exports `gotk_reconcile_condition` and `gotk_suspend_status` (removed upstream in v1.5)",
          True, "docs/metrics.md", frozenset({"metrics"}), _our_gauges),
    Known("D2", "runtime metrics: Go's collectors and controller-runtime's webhook/certwatcher series upstream, "
                "Python's process collector and our own families here",
          True, "docs/metrics.md", frozenset({"controller-metrics"}), _runtime_families),
    Known("D3", "the `gotk_reconcile_condition`/`gotk_suspend_status` families (see D1)",
          True, "docs/metrics.md", frozenset({"controller-metrics"}), _gauge_families),
    Known("D4", "deleting a Ready Kustomization sends no \"Reconciliation finished\" event",
          True, f"{DIFFERENCES}#events-and-status-details", frozenset({"notifications"}), _deletion_finished),
    Known("D5", "no similar-event aggregation: client-go combines ten similar events into "
                "\"(combined from similar events): …\"",
          True, f"{DIFFERENCES}#events-and-status-details", frozenset({"events"}), _similar_events),
    Known("D6", "paths in build errors are relative to the artifact root, not upstream's temporary directory",
          True, f"{DIFFERENCES}#building-manifests", frozenset({"conditions", "events", "notifications"}),
          _relative_paths),
    Known("D7", "a SOPS-encrypted Secret without `spec.decryption` is refused (upstream's guard never fires: it "
                "runs after the typed normalisation that drops the `sops` key, so upstream applies the ciphertext)",
          True, f"{DIFFERENCES}#decryption-sops",
          frozenset({"conditions", "status", "inventory", "history", "objects", "ownership", "events",
                     "notifications"}), _sops_guard, frozenset({"sops-no-decryption"})),
    Known("D8", "a dependent is reconciled as soon as its dependency is ready (EnableDependencyQueueing), not at "
                "its next --requeue-dependency poll",
          True, f"{DIFFERENCES}#runtime-and-operations", frozenset({"requeue"}), _dependency_queueing),
]

