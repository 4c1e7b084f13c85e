"""What the UI's pages show, computed from plain objects (pure: no I/O, time passed in).

Contract:
- ``state_of(ks)`` is one of ``STATES``, first match wins: ``suspended`` (``spec.suspend``); ``waiting for
  approval`` (``Approved=False ApprovalRequired``); ``held by a window`` (``SyncAllowed=False``); ``failing``
  (``Ready=False``, its reason shown); ``reconciling`` (``Ready=Unknown``, or ``Reconciling=True`` for a
  generation not observed yet); ``drifted`` (``Drifted=True``); ``ready`` (``Ready=True``); ``pending`` (no
  ``Ready`` condition: never reconciled). A held plan keeps ``Ready`` describing what is applied, which is
  why the gates are looked at before ``Ready``.
- ``fleet_row`` reads only ``metadata``, ``spec.sourceRef``/``suspend`` and ``status``; ``counts`` counts
  rows per state.
- ``dependency_graph`` gives Cytoscape elements: a compound node per namespace, a node per Kustomization
  (and per missing dependency, state ``missing``), an edge dependency → dependent. A node is ``blocked``
  when a dependency it waits for (directly or through others) is not ready for its generation — the
  check the controller makes before reconciling it.
- ``inventory_tree`` groups ``status.inventory`` as namespace → kind → objects (``""``: cluster-scoped).
- ``windows_view`` is what the gate would evaluate for a Kustomization now: its annotation's windows and
  the fleet's that select it, each with whether it is active, when it ends, when it next starts.
- ``side_by_side`` turns a unified diff (``apply/preview.render_diff``) into rows of two columns.
Nothing here reads a Secret or any value of an applied object: rows hold what the Kustomization says.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kustomize_controller.api.changes import (
    APPROVAL_REQUIRED_REASON,
    APPROVED_CONDITION,
    SYNC_ALLOWED_CONDITION,
    SYNC_WINDOWS_ANNOTATION,
    ApprovalMode,
    InvalidApprovalModeError,
    approval_mode,
)
from kustomize_controller.api.drift import DRIFTED_CONDITION
from kustomize_controller.api.inventory import InventoryIdError, parse_inventory_id
from kustomize_controller.api.meta import parse_time
from kustomize_controller.reconcile.gate.approval import with_record
from kustomize_controller.reconcile.gate.fleet import DATA_KEY as FLEET_DATA_KEY
from kustomize_controller.reconcile.gate.windows import (
    InvalidSyncWindowError,
    SyncWindow,
    WindowState,
    evaluate,
    last_start,
    next_start,
    parse_windows,
)
from kustomize_controller.reconcile.ordering import dependency_keys, object_key

Obj = Mapping[str, Any]
__all__ = ["object_key", "parse_time"]  # re-exported for the server, which reads through this module

SUSPENDED, WAITING, HELD, FAILING, RECONCILING, DRIFTED, READY, PENDING = (
    "suspended", "waiting for approval", "held by a window", "failing", "reconciling", "drifted", "ready", "pending",
)
#: every state, in the order the counts show them
STATES = (READY, RECONCILING, FAILING, WAITING, HELD, DRIFTED, SUSPENDED, PENDING)
MISSING = "missing"  # a dependency that is not in the cache (graph only)
_CSS = {READY: "ready", RECONCILING: "reconciling", FAILING: "failing", WAITING: "waiting", HELD: "held",
        DRIFTED: "drifted", SUSPENDED: "suspended", PENDING: "pending", MISSING: "missing"}
_SHORT_DIGEST = re.compile(r"(sha1|sha256|sha384|sha512|blake3):([0-9a-f]{12})[0-9a-f]+")


def css_class(state: str) -> str:
    """A CSS-safe name for a state (``waiting for approval`` → ``waiting``)."""
    return _CSS.get(state, "pending")


def _status(ks: Obj) -> Mapping[str, Any]:
    status = ks.get("status")
    return status if isinstance(status, Mapping) else {}


def _meta(ks: Obj) -> Mapping[str, Any]:
    meta = ks.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(ks: Obj) -> Mapping[str, Any]:
    spec = ks.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def approval_manual(ks: Obj) -> bool:
    """The Kustomization waits for approvals (``approval: manual``; an invalid value is not approvable)."""
    try:
        return approval_mode(_meta(ks).get("annotations")) is ApprovalMode.MANUAL
    except InvalidApprovalModeError:
        return False


def condition(ks: Obj, type_: str) -> Mapping[str, Any] | None:
    for cond in _status(ks).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def _is(cond: Mapping[str, Any] | None, status: str) -> bool:
    return cond is not None and cond.get("status") == status


def ready_for_generation(ks: Obj) -> bool:
    """Ready=True for the current generation: what a dependent waits for (``reconcile/dependencies.py``)."""
    generation = _meta(ks).get("generation")
    return _is(condition(ks, "Ready"), "True") and _status(ks).get("observedGeneration") == generation


def state_of(ks: Obj) -> tuple[str, str]:
    """The state (module contract) and the reason shown with it (the deciding condition's reason)."""
    if _spec(ks).get("suspend") is True:
        return SUSPENDED, ""
    approved = condition(ks, APPROVED_CONDITION)
    if _is(approved, "False") and approved is not None and approved.get("reason") == APPROVAL_REQUIRED_REASON:
        return WAITING, str(approved.get("reason") or "")
    sync = condition(ks, SYNC_ALLOWED_CONDITION)
    if _is(sync, "False") and sync is not None:
        return HELD, str(sync.get("reason") or "")
    ready = condition(ks, "Ready")
    if ready is None:
        return PENDING, ""
    reason = str(ready.get("reason") or "")
    if ready.get("status") == "False":
        return FAILING, reason
    reconciling = condition(ks, "Reconciling")
    unobserved = _status(ks).get("observedGeneration") != _meta(ks).get("generation")
    if ready.get("status") != "True" or (_is(reconciling, "True") and unobserved):
        return RECONCILING, reason
    if _is(condition(ks, DRIFTED_CONDITION), "True"):
        return DRIFTED, str((condition(ks, DRIFTED_CONDITION) or {}).get("reason") or "")
    return READY, reason


def short_revision(revision: str) -> str:
    """``main@sha1:67e2c98a1b2c…`` with the digest cut to 12 hex digits (the full one goes in a title)."""
    return _SHORT_DIGEST.sub(r"\1:\2", revision)


def last_applied_at(ks: Obj) -> datetime | None:
    """When the applied revision was last reconciled successfully (the history), else Ready's transition."""
    best: datetime | None = None
    for entry in _status(ks).get("history") or []:
        if isinstance(entry, Mapping) and entry.get("lastReconciledStatus") == "ReconciliationSucceeded":
            moment = parse_time(entry.get("lastReconciled"))
            if moment is not None and (best is None or moment > best):
                best = moment
    if best is None and _is(condition(ks, "Ready"), "True"):
        best = parse_time((condition(ks, "Ready") or {}).get("lastTransitionTime"))
    return best


def source_ref(ks: Obj) -> tuple[str, str, str]:
    """(kind, namespace, name) of ``spec.sourceRef``, the namespace defaulting to the Kustomization's."""
    ref = _spec(ks).get("sourceRef")
    ref = ref if isinstance(ref, Mapping) else {}
    return str(ref.get("kind") or ""), str(ref.get("namespace") or _meta(ks).get("namespace") or ""), \
        str(ref.get("name") or "")


@dataclass(frozen=True)
class Row:
    key: str  # namespace/name
    namespace: str
    name: str
    state: str
    reason: str
    message: str
    revision: str
    attempted: str  # lastAttemptedRevision when it differs from the applied one
    applied_at: datetime | None
    source: str  # Kind/namespace/name
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def css(self) -> str:
        return css_class(self.state)


def fleet_row(ks: Obj) -> Row:
    meta, status = _meta(ks), _status(ks)
    state, reason = state_of(ks)
    ready = condition(ks, "Ready") or {}
    gate = condition(ks, APPROVED_CONDITION) if state == WAITING else \
        condition(ks, SYNC_ALLOWED_CONDITION) if state == HELD else None
    # the machine-readable approval record that ends an Approved message (reconcile/gate/approval.py) is left
    # out of the fleet's one line; the Kustomization's page shows the conditions as they are
    message = with_record(str((gate or ready).get("message") or ""), None)
    revision = str(status.get("lastAppliedRevision") or "")
    attempted = str(status.get("lastAttemptedRevision") or "")
    kind, src_ns, src_name = source_ref(ks)
    labels = meta.get("labels")
    return Row(
        key=str(object_key(ks)), namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        state=state, reason=reason, message=message, revision=revision,
        attempted=attempted if attempted and attempted != revision else "",
        applied_at=last_applied_at(ks), source=f"{kind}/{src_ns}/{src_name}" if kind else "",
        labels=dict(labels) if isinstance(labels, Mapping) else {},
    )


def counts(rows: Iterable[Row]) -> list[tuple[str, int]]:
    """(state, count) for every state with at least one row, in ``STATES`` order, after ``("all", n)``."""
    seen = Counter(row.state for row in rows)
    return [("all", sum(seen.values()))] + [(state, seen[state]) for state in STATES if seen[state]]


# --- the dependency graph ------------------------------------------------------------------------------


def dependency_graph(kustomizations: Iterable[Obj]) -> list[dict[str, Any]]:
    """Cytoscape elements of the ``dependsOn`` graph (module contract)."""
    by_key = {str(object_key(ks)): ks for ks in kustomizations}
    deps = {key: [str(d) for d in dependency_keys(ks)] for key, ks in by_key.items()}
    missing = sorted({d for ds in deps.values() for d in ds if d not in by_key})
    blocked = _blocked(by_key, deps)
    namespaces = sorted({key.split("/", 1)[0] for key in [*by_key, *missing]})
    elements: list[dict[str, Any]] = [
        {"data": {"id": f"ns:{ns}", "label": ns, "kind": "namespace"}} for ns in namespaces
    ]
    for key, ks in sorted(by_key.items()):
        state, reason = state_of(ks)
        elements.append({"data": {"id": key, "label": key.split("/", 1)[1], "parent": f"ns:{key.split('/', 1)[0]}",
                                  "state": css_class(state), "stateText": state, "reason": reason,
                                  "blocked": key in blocked, "kind": "kustomization"}})
    for key in missing:
        elements.append({"data": {"id": key, "label": key.split("/", 1)[1], "parent": f"ns:{key.split('/', 1)[0]}",
                                  "state": MISSING, "stateText": "not found", "reason": "",
                                  "blocked": False, "kind": "missing"}})
    for key, ds in sorted(deps.items()):
        for dep in ds:
            elements.append({"data": {"id": f"{dep}->{key}", "source": dep, "target": key}})
    return elements


def _blocked(by_key: Mapping[str, Obj], deps: Mapping[str, Sequence[str]]) -> set[str]:
    """Keys with a dependency, direct or transitive, that is not ready for its generation."""
    out: set[str] = set()
    memo: dict[str, bool] = {}

    def waits(key: str, path: frozenset[str]) -> bool:
        if key in memo:
            return memo[key]
        result = False
        for dep in deps.get(key, ()):
            ks = by_key.get(dep)
            if ks is None or not ready_for_generation(ks) or (dep not in path and waits(dep, path | {key})):
                result = True
                break
        memo[key] = result
        return result

    for key in by_key:
        if waits(key, frozenset({key})):
            out.add(key)
    return out


# --- the inventory -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InventoryItem:
    id: str  # the inventory id, what the page asks about
    namespace: str
    name: str
    group: str
    kind: str
    version: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def subject(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


def inventory_items(ks: Obj) -> list[InventoryItem]:
    inventory = _status(ks).get("inventory")
    entries = inventory.get("entries") if isinstance(inventory, Mapping) else None
    out: list[InventoryItem] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        try:
            oid = parse_inventory_id(str(entry.get("id") or ""))
        except InventoryIdError:
            continue
        out.append(InventoryItem(id=str(entry["id"]), namespace=oid.namespace, name=oid.name, group=oid.group,
                                 kind=oid.kind, version=str(entry.get("v") or "")))
    return out


def inventory_tree(items: Iterable[InventoryItem]) -> list[tuple[str, list[tuple[str, list[InventoryItem]]]]]:
    """namespace → kind (``Kind.group``) → objects, each level sorted; cluster-scoped objects under ``""``."""
    tree: dict[str, dict[str, list[InventoryItem]]] = defaultdict(lambda: defaultdict(list))
    for item in items:
        tree[item.namespace][f"{item.kind}.{item.group}" if item.group else item.kind].append(item)
    return [(ns, [(kind, sorted(objs, key=lambda i: i.name)) for kind, objs in sorted(kinds.items())])
            for ns, kinds in sorted(tree.items())]


# --- diffs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffRow:
    kind: str  # "same", "changed", "removed", "added", "hunk"
    left: str
    right: str


def side_by_side(diff: str) -> list[DiffRow]:
    """Rows of a unified diff in two columns (module contract): runs of removed lines are paired with the
    added lines that follow them; a hunk header becomes a ``hunk`` row."""
    rows: list[DiffRow] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            left = removed[i] if i < len(removed) else ""
            right = added[i] if i < len(added) else ""
            kind = "changed" if i < len(removed) and i < len(added) else "removed" if i < len(removed) else "added"
            rows.append(DiffRow(kind, left, right))
        removed.clear()
        added.clear()

    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")) and not rows and not removed and not added:
            continue
        if line.startswith("@@"):
            flush()
            rows.append(DiffRow("hunk", line, line))
        elif line.startswith("-"):
            if added:
                flush()
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        else:
            flush()
            text = line[1:] if line.startswith(" ") else line
            rows.append(DiffRow("same", text, text))
    flush()
    return rows


# --- sync windows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowRow:
    window: SyncWindow
    active: bool
    ends_at: datetime | None  # active: when this firing ends
    next_start: datetime | None  # the next firing after now (None: none within a year)


@dataclass(frozen=True)
class WindowsView:
    rows: list[WindowRow]
    state: WindowState | None  # None: no window applies
    errors: list[str]


def parse_fleet_windows(configmap: Obj | None, *, source: str) -> tuple[list[SyncWindow], str]:
    """The fleet ConfigMap's windows (``data.windows``) and the error when they are invalid (fail closed, as
    ``reconcile/gate/fleet.py``); no ConfigMap or no key: no windows."""
    data = configmap.get("data") if configmap is not None else None
    text = data.get(FLEET_DATA_KEY) if isinstance(data, Mapping) else None
    if text is None:
        return [], ""
    try:
        return parse_windows(str(text), source=f"{source} data.{FLEET_DATA_KEY}", fleet=True), ""
    except InvalidSyncWindowError as err:
        return [], str(err)


def windows_view(ks: Obj, *, fleet: Sequence[SyncWindow], fleet_error: str, now: datetime) -> WindowsView:
    """The windows that apply to ``ks`` — its annotation's and the fleet's that select it — and what they say
    at ``now`` (``reconcile/gate/windows.evaluate``, the gate's own rules)."""
    meta = _meta(ks)
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    found: list[SyncWindow] = []
    errors: list[str] = [fleet_error] if fleet_error else []
    text = annotations.get(SYNC_WINDOWS_ANNOTATION)
    if text is not None:
        try:
            found += parse_windows(str(text),
                                   source=f"Kustomization/{namespace}/{name} annotation {SYNC_WINDOWS_ANNOTATION}")
        except InvalidSyncWindowError as err:
            errors.append(str(err))
    found += [w for w in fleet if w.selects(namespace=namespace, name=name, labels=labels)]
    return windows_table(found, now=now, errors=errors)


def windows_table(windows: Sequence[SyncWindow], *, now: datetime, errors: Sequence[str] = ()) -> WindowsView:
    rows = []
    for window in windows:
        started = last_start(window, now)
        rows.append(WindowRow(window=window, active=started is not None,
                              ends_at=started + window.duration if started is not None else None,
                              next_start=next_start(window, now)))
    return WindowsView(rows=rows, state=evaluate(windows, now) if windows else None, errors=list(errors))
