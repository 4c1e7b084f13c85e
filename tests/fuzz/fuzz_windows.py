"""Change-management annotations: sync windows (a Kustomization's annotation, the fleet ConfigMap's
``windows``, with their cron, duration, time-zone and selector fields) and the approval annotations.

Input: ``<flags><4 bytes: seconds into 2024-2027, big-endian><text>``. Bit 0 of the flags reads the text
as fleet windows (selectors allowed). The same text is also given to the approval annotations and to
the ``--sync-windows-configmap`` flag parser.

Contract: ``parse_windows`` raises only ``InvalidSyncWindowError``, whose message names the source;
``evaluate`` of what parsed, at the instant, never raises and is consistent (allowed ⇔ no blocking
window; ``opens_at`` later than the instant); ``selects`` never raises; ``approval_mode`` raises only
``InvalidApprovalModeError``; ``approved_plan`` returns a stripped string; ``parse_configmap_ref``
raises only ``ValueError``.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

from kustomize_controller.api.changes import (
    APPROVAL_ANNOTATION,
    APPROVED_PLAN_ANNOTATION,
    InvalidApprovalModeError,
    approval_mode,
    approved_plan,
)
from kustomize_controller.reconcile.gate.fleet import parse_configmap_ref
from kustomize_controller.reconcile.gate.windows import InvalidSyncWindowError, evaluate, parse_windows
from tests.fuzz.harness import Target, text

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
_SOURCE = "Kustomization/apps/web annotation kustomize.toolkit.fluxcd.io/sync-windows"


def one_input(data: bytes) -> None:
    if len(data) < 5:
        return
    fleet = bool(data[0] & 1)
    now = _EPOCH + timedelta(seconds=int.from_bytes(data[1:5], "big") % (4 * 366 * 86400))
    value = text(data[5:])
    try:
        windows = parse_windows(value, source=_SOURCE, fleet=fleet)
    except InvalidSyncWindowError as err:
        assert _SOURCE in str(err), str(err)
        windows = []
    state = evaluate(windows, now)
    assert not (state.allowed and state.blocking), state
    if state.opens_at is not None:
        assert state.opens_at > now and not state.allowed, (state.opens_at, now)
    for window in windows:
        window.selects(namespace="prod-apps", name="web", labels={"tier": "prod", "team": "a"})
        window.describe()
    try:
        approval_mode({APPROVAL_ANNOTATION: value})
    except InvalidApprovalModeError as err:
        assert APPROVAL_ANNOTATION in str(err)
    plan = approved_plan({APPROVED_PLAN_ANNOTATION: value})
    assert plan == plan.strip()
    with contextlib.suppress(ValueError):
        parse_configmap_ref(value)


TARGET = Target(
    name="windows",
    one_input=one_input,
    contract="parse_windows: InvalidSyncWindowError only; evaluate/selects: nothing; approval_mode: "
             "InvalidApprovalModeError only; parse_configmap_ref: ValueError only",
    max_len=2048,
    dictionary=(b"- kind: deny\n", b"- kind: allow\n", b"  schedule: ", b"  duration: ", b"  timeZone: ",
                b"  manualSync: true\n", b"  namespaces: [", b"  names: [", b"  selector: ", b"* * * * *",
                b"0 22 * * *", b"L", b"W", b"#", b"/", b",", b"-", b"Europe/Berlin", b"America/New_York",
                b"in (a,b)", b"!=", b"notin", b"&a", b"*a", b"manual", b"auto", b"{", b"}"),
    seeded_runs=300,
)
