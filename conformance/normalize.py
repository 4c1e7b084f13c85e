"""What must differ between the two runs of a case, taken out before the comparison (pure functions).

Each case runs twice on one control plane, so the names differ: its namespaces, and the names of
cluster-scoped objects, carry the side (``upstream`` or ``ours``). ``Names`` maps every such concrete
string to a token (``<ns>``, ``<ns:target>``, ``<id>``...) and ``Names.text`` replaces them in any string.
Apart from names, only what is different on every run is normalised: UIDs, resource versions and times are
dropped by the collectors; durations measured by the controller ("finished in 1.2s", "passed in 13ms",
"failed after 30.1s") become ``<d>``. Durations that are configuration ("next run in 1h0m0s", "with a
timeout of 30s", "retrying in 4s") are kept: they are part of the contract.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# a Go duration as time.Duration.String() writes it (and as our controller writes it): 1h2m3.5s, 161.3ms, 0s
_GO_DURATION = r"(?:\d+h)?(?:\d+m(?!s))?(?:\d+(?:\.\d+)?(?:s|ms|µs|us|ns))|\d+h(?:\d+m)?|\d+m"
_MEASURED = re.compile(rf"\b(finished in|passed in|failed after|completed in) (?:{_GO_DURATION})")
_DIGEST = re.compile(r"\bsha256:[0-9a-f]{64}\b")
# upstream's per-reconcile working directory (os.MkdirTemp("", "kustomization-")), random on every reconcile
_TMPDIR = re.compile(r"/tmp/kustomization-\d+")


@dataclass
class Names:
    """Concrete per-side strings and the tokens that replace them (longest first, so a namespace that is a
    prefix of another never eats part of it)."""

    tokens: dict[str, str] = field(default_factory=dict)

    def add(self, concrete: str, token: str) -> str:
        self.tokens[concrete] = token
        if ":" in concrete:  # as an RBAC name appears in an inventory id
            self.tokens[concrete.replace(":", "__")] = token.replace(":", "__")
        return concrete

    def text(self, value: str) -> str:
        for concrete in sorted(self.tokens, key=len, reverse=True):
            if concrete in value:
                value = value.replace(concrete, self.tokens[concrete])
        return value

    def deep(self, value: Any) -> Any:
        """``text`` applied to every string, keys included, of a JSON-like value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.deep(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.deep(v) for v in value]
        return value


def measured_durations(text: str) -> str:
    """Durations the controller measured become ``<d>``; configured ones stay."""
    return _MEASURED.sub(lambda m: f"{m.group(1)} <d>", text)


def digests(text: str) -> str:
    return _DIGEST.sub("sha256:<digest>", text)


def message(text: str, names: Names) -> str:
    """A condition or event message: names, measured durations, digests (of artifacts whose content differs
    by the namespace names in it) and upstream's temporary directory."""
    return _TMPDIR.sub("<tmp>", digests(measured_durations(names.text(text))))


def condition(cond: Mapping[str, Any], names: Names) -> dict[str, Any]:
    return {
        "type": cond.get("type"),
        "status": cond.get("status"),
        "reason": cond.get("reason"),
        "message": message(str(cond.get("message", "")), names),
        "observedGeneration": cond.get("observedGeneration"),
    }


def history_entry(entry: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """A ``status.history`` entry without its times; the digest is kept as the fact that it is a sha256 (its
    value is compared where both controllers build the same bytes: the swap)."""
    digest = str(entry.get("digest", ""))
    return {
        "digest": "sha256:<digest>" if _DIGEST.fullmatch(digest) else digest,
        "lastReconciledStatus": entry.get("lastReconciledStatus"),
        "metadata": names.deep(dict(entry.get("metadata") or {})),
        "totalReconciliations": entry.get("totalReconciliations"),
    }


def kustomization_status(obj: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """The compared parts of a Kustomization, split by aspect."""
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    inventory = status.get("inventory")
    return {
        "conditions": [condition(c, names) for c in status.get("conditions") or []],
        "status": {
            "observedGeneration": status.get("observedGeneration"),
            "lastAppliedRevision": status.get("lastAppliedRevision"),
            "lastAttemptedRevision": status.get("lastAttemptedRevision"),
            "lastAppliedOriginRevision": status.get("lastAppliedOriginRevision"),
            "lastHandledReconcileAt": status.get("lastHandledReconcileAt"),
            "finalizers": list(meta.get("finalizers") or []),
            "keys": sorted(k for k in status if k not in ("conditions", "history", "inventory")),
        },
        "inventory": None if inventory is None else [names.deep(dict(e)) for e in inventory.get("entries") or []],
        "history": [history_entry(e, names) for e in status.get("history") or []],
    }


_DROPPED_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                     "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")
# fields a server or the kube-controller-manager fills in on its own, different on every run
_VOLATILE_BODY = {
    ("Service", "spec"): ("clusterIP", "clusterIPs"),
    ("Job", "spec"): (),
}


def live_object(obj: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """An applied object as compared: labels, annotations, owner references and its body (``status`` and
    server-set metadata left out)."""
    meta = dict(obj.get("metadata") or {})
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    kind = str(obj.get("kind", ""))
    spec = body.get("spec")
    if isinstance(spec, dict):
        spec = dict(spec)
        for key in _VOLATILE_BODY.get((kind, "spec"), ()):
            spec.pop(key, None)
        if kind == "Job":  # the Job controller's generated selector and labels carry the Job's uid
            spec.pop("selector", None)
            template = dict(spec.get("template") or {})
            template.pop("metadata", None)
            spec["template"] = template
        body["spec"] = spec
    labels = dict(meta.get("labels") or {})
    if kind == "Job":
        for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
            labels.pop(key, None)
    return names.deep({
        "labels": labels,
        "annotations": dict(meta.get("annotations") or {}),
        "finalizers": list(meta.get("finalizers") or []),
        "ownerReferences": [{k: v for k, v in ref.items() if k != "uid"} for ref in meta.get("ownerReferences") or []],
        "body": body,
    })


def managed_fields(obj: Mapping[str, Any], names: Names) -> list[dict[str, Any]]:
    """Who owns which fields: each managedFields entry without its time, sorted by manager."""
    entries = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        entries.append(names.deep({k: v for k, v in entry.items() if k != "time"}))
    return sorted(entries, key=lambda e: (e.get("manager", ""), e.get("operation", ""), e.get("subresource", "")))


def kube_event(event: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """A core/v1 Event about a Kustomization: what a user sees in ``kubectl events``/``flux events``."""
    meta = event.get("metadata") or {}
    source = event.get("source") or {}
    involved = event.get("involvedObject") or {}
    return {
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": message(str(event.get("message", "")), names),
        "annotations": names.deep(dict(meta.get("annotations") or {})),
        "involvedObject": names.deep({k: involved.get(k) for k in ("apiVersion", "kind", "namespace", "name")}),
        "source": dict(source),
        "reportingComponent": event.get("reportingComponent"),
        "action": event.get("action"),
    }


def webhook_event(body: Mapping[str, Any], names: Names) -> dict[str, Any]:
    """An event POSTed to ``--events-addr`` (``event.toolkit.fluxcd.io`` v1beta1), without its time, the
    object's uid and resourceVersion, and the reporting instance (the host name)."""
    involved = body.get("involvedObject") or {}
    return {
        "involvedObject": names.deep({k: involved.get(k) for k in ("apiVersion", "kind", "namespace", "name")}),
        "involvedObjectKeys": sorted(involved),
        "severity": body.get("severity"),
        "reason": body.get("reason"),
        "message": message(str(body.get("message", "")), names),
        "metadata": names.deep(dict(body.get("metadata") or {})),
        "reportingController": body.get("reportingController"),
        "keys": sorted(body),
    }


def collapse_repeats(items: list[Any]) -> list[Any]:
    """Consecutive equal items once (a retry loop's count depends on how long one watched)."""
    out: list[Any] = []
    for item in items:
        if not out or out[-1] != item:
            out.append(item)
    return out


def metric_series(samples: list[tuple[str, dict[str, str]]], names: Names, namespaces: set[str]) -> list[str]:
    """The series (name and labels, values dropped) that belong to one case: those labelled with one of its
    namespaces. Histogram buckets are kept (the ``le`` set is part of the contract)."""
    out = set()
    for name, labels in samples:
        if labels.get("namespace") not in namespaces:
            continue
        label_text = ",".join(f"{k}={names.text(v)}" for k, v in sorted(labels.items()))
        out.add(f"{name}{{{label_text}}}")
    return sorted(out)
