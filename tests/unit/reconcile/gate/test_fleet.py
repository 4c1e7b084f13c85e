"""The fleet ConfigMap: read at most once per ttl, missing means none, broken fails closed for everyone."""

from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.kube.errors import ForbiddenError, NotFoundError
from kustomize_controller.reconcile.gate.fleet import FleetWindows, parse_configmap_ref
from kustomize_controller.reconcile.gate.windows import InvalidSyncWindowError
from kustomize_controller.runtime.clock import FakeClock

WINDOWS = """
- {kind: deny, schedule: '0 16 * * 5', duration: 64h, namespaces: ['prod-*']}
- {kind: allow, schedule: '0 9 * * 1-5', duration: 2h, selector: 'change-freeze=true'}
"""


class FakeClient:
    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer
        self.reads = 0

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.reads += 1
        assert (api_version, kind, name, namespace) == ("v1", "ConfigMap", "windows", "flux-system")
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def fleet(client: FakeClient, clock: FakeClock) -> FleetWindows:
    return FleetWindows(client=client, clock=clock, namespace="flux-system", name="windows")  # type: ignore[arg-type]


async def test_selects_and_caches_for_the_ttl() -> None:
    clock = FakeClock()
    client = FakeClient({"data": {"windows": WINDOWS}})
    windows = fleet(client, clock)
    prod = await windows.windows_for(namespace="prod-eu", name="web", labels={})
    assert [w.kind for w in prod] == ["deny"] and prod[0].source == "ConfigMap flux-system/windows data.windows[0]"
    frozen = await windows.windows_for(namespace="dev", name="web", labels={"change-freeze": "true"})
    assert [w.kind for w in frozen] == ["allow"]
    assert await windows.windows_for(namespace="dev", name="web", labels={}) == []
    assert client.reads == 1
    client.answer = {"data": {}}
    await clock.advance(10)
    assert await windows.windows_for(namespace="prod-eu", name="web", labels={}) == []
    assert client.reads == 2


@pytest.mark.parametrize("answer", [NotFoundError("ConfigMap/flux-system/windows: not found"), {"data": {}}, {}])
async def test_no_configmap_or_no_key_means_no_windows(answer: Any) -> None:
    assert await fleet(FakeClient(answer), FakeClock()).windows_for(namespace="a", name="b", labels={}) == []


async def test_a_broken_list_or_a_failed_read_fails_closed_for_everyone() -> None:
    bad = fleet(FakeClient({"data": {"windows": "- {kind: deny, schedule: '0 25 * * *', duration: 1h}"}}), FakeClock())
    where = r"ConfigMap flux-system/windows data.windows\[0\].*invalid schedule"
    with pytest.raises(InvalidSyncWindowError, match=where):
        await bad.windows_for(namespace="anything", name="x", labels={})
    denied = fleet(FakeClient(ForbiddenError("ConfigMap/flux-system/windows: forbidden")), FakeClock())
    with pytest.raises(InvalidSyncWindowError, match="cannot read the sync windows of ConfigMap flux-system/windows"):
        await denied.windows_for(namespace="anything", name="x", labels={})


def test_flag_value() -> None:
    assert parse_configmap_ref("flux-system/windows") == ("flux-system", "windows")
    for bad in ("windows", "/windows", "ns/", "a/b/c"):
        with pytest.raises(ValueError, match="NAMESPACE/NAME"):
            parse_configmap_ref(bad)
