"""The oracle of the fault-injection tests: a run's end state, normalised so that two runs of one scenario
compare equal when the controller left the same thing behind.

What is compared, in the run's namespace: every object of the kinds listed (the scenario's managed objects,
its Kustomizations and sources), whole — labels (owner labels included), annotations, finalizers, data,
spec, managedFields (manager, operation, subresource, fields) — and of a Kustomization's status its
inventory, lastAppliedRevision, lastAttemptedRevision, lastHandledReconcileAt, observedGeneration and
every condition's type, status, reason and message. Left out: what differs between two faultless runs too
(resourceVersion, uid, timestamps, the namespace's random name, the artifact server's port,
durations inside messages). An object
present in one state and not the other shows up as a difference by itself: an orphan of a half-done
prune, an object deleted that should live, a Kustomization held by its finalizer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from tests.integration.controller.conftest import KS_API, ControllerEnv

State = dict[str, Any]

KINDS: tuple[tuple[str, str], ...] = (
    (KS_API, "Kustomization"),
    ("source.toolkit.fluxcd.io/v1", "GitRepository"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("apps/v1", "Deployment"),
)

_VOLATILE_META = ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "selfLink")
_KS_STATUS = ("inventory", "lastAppliedRevision", "lastAttemptedRevision", "lastHandledReconcileAt",
              "observedGeneration")
_LOOPBACK = re.compile(r"https?://127\.0\.0\.1:\d+")  # the artifact server's port differs per test
_DURATION = re.compile(r"\b\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b")


def normalise(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    text = _LOOPBACK.sub("<loopback>", json.dumps(obj, sort_keys=True).replace(namespace, "<ns>"))
    out: dict[str, Any] = json.loads(text)
    meta = out.get("metadata") or {}
    for key in _VOLATILE_META:
        meta.pop(key, None)
    for entry in meta.get("managedFields") or []:
        entry.pop("time", None)
    if "managedFields" in meta:  # the order of entries is the order of first writes: not compared
        meta["managedFields"] = sorted(meta["managedFields"], key=lambda e: json.dumps(e, sort_keys=True))
    if out.get("kind") == "Kustomization":
        status = out.get("status") or {}
        kept = {k: status[k] for k in _KS_STATUS if k in status}
        kept["conditions"] = sorted(
            ({"type": c.get("type"), "status": c.get("status"), "reason": c.get("reason"),
              "message": _DURATION.sub("<duration>", str(c.get("message", "")))}
             for c in status.get("conditions") or []), key=lambda c: str(c["type"]))
        out["status"] = kept
    else:
        _drop_times(out.get("status"))
    return out


def _drop_times(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k in value if k.endswith(("Time", "Timestamp"))]:
            del value[key]
        for item in value.values():
            _drop_times(item)
    elif isinstance(value, list):
        for item in value:
            _drop_times(item)


async def end_state(env: ControllerEnv, kinds: Iterable[tuple[str, str]] = KINDS) -> State:
    state: State = {}
    for api_version, kind in kinds:
        for obj in await env.client.list(api_version, kind, env.namespace):
            obj.setdefault("kind", kind)
            obj.setdefault("apiVersion", api_version)
            state[f"{kind}/{obj['metadata']['name']}"] = normalise(obj, env.namespace)
    return state


def differences(expected: State, actual: State) -> list[str]:
    """What differs, one line per object or fact (empty when equal)."""
    lines = []
    for key in sorted(set(expected) | set(actual)):
        if key not in actual:
            lines.append(f"{key}: missing")
        elif key not in expected:
            lines.append(f"{key}: should not exist: {json.dumps(actual[key].get('metadata'))}")
        elif expected[key] != actual[key]:
            lines.append(f"{key}: differs: {_first_difference(expected[key], actual[key])}")
    return lines


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: expected {json.dumps(a)}, got {json.dumps(b)}"
