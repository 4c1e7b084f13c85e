"""``RemoteClients.build``: a client that is not handed out is closed (its connections would leak)."""

from __future__ import annotations

import asyncio

import pytest

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import ClientConfig
from kustomize_controller.reconcile.tenancy import RemoteClients


@pytest.mark.parametrize("failure", [RuntimeError("exec plugin crashed"), asyncio.CancelledError()],
                         ids=["error", "cancelled"])
async def test_a_client_whose_probe_fails_is_closed(monkeypatch: pytest.MonkeyPatch,
                                                    failure: BaseException) -> None:
    closed: list[str] = []
    real_close = KubeClient.close

    async def recording_close(self: KubeClient) -> None:
        closed.append(self.config.server)
        await real_close(self)

    async def failing_configure(client: KubeClient, **_: object) -> object:
        raise failure

    monkeypatch.setattr(KubeClient, "close", recording_close)
    remotes = RemoteClients()
    monkeypatch.setattr(remotes.throttling, "configure", failing_configure)
    async with KubeClient.for_server("https://root.invalid") as base:
        with pytest.raises(type(failure)):
            await remotes.build(ClientConfig(server="https://remote.invalid"), base=base)
    assert closed[0] == "https://remote.invalid"
