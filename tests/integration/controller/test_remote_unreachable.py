"""A remote cluster (``spec.kubeConfig.secretRef``) whose API server is down: the reconcile fails with the
connection error, retried quickly as for the controller's own server, and the priority-and-fairness probe
of that server is not paid again on every attempt (``kube.flowcontrol.ThrottlingCache``)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator

import pytest
import yaml

from tests.integration.controller.conftest import ControllerEnv, condition, condition_message
from tests.integration.controller.manifests import configmap

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def _hanging_up_server() -> AsyncIterator[tuple[str, list[str]]]:
    """A listener that reads each request's head and hangs up without answering (an API server behind a
    load balancer while it restarts); yields its URL and the request lines it was sent."""
    lines: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            head = await reader.readuntil(b"\r\n\r\n")
            lines.append(head.split(b"\r\n", 1)[0].decode())
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", lines
    finally:
        server.close()
        await server.wait_closed()


def _kubeconfig(url: str) -> bytes:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "remote",
        "clusters": [{"name": "remote", "cluster": {"server": url}}],
        "users": [{"name": "remote", "user": {"token": "t"}}],
        "contexts": [{"name": "remote", "context": {"cluster": "remote", "user": "remote"}}],
    }
    return yaml.safe_dump(doc).encode()


async def test_a_remote_server_that_is_down_is_retried_quickly_and_probed_once(env: ControllerEnv) -> None:
    ns = env.namespace
    async with _hanging_up_server() as (url, lines):
        await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "remote", "namespace": ns},
                                 "data": {"value": base64.b64encode(_kubeconfig(url)).decode()}})
        await env.publish({"a.yaml": configmap("a")})
        await env.start()
        await env.create(env.kustomization(targetNamespace=ns, kubeConfig={"secretRef": {"name": "remote"}},
                                           retryInterval="10m"))
        # three attempts: the first, then the quick retries after 1 s and 2 s
        retrying = await env.wait_for(
            "app", lambda o: condition_message(o, "Reconciling").startswith("API server unreachable, retrying in 4s"),
            within=60)
    assert condition(retrying, "Reconciling") == ("True", "ProgressingWithRetry")
    assert condition(retrying, "Ready")[0] == "Unknown"
    # the error is the one the first request of the attempt met, as before the probe was remembered
    assert condition_message(retrying, "Reconciling") == (
        f"API server unreachable, retrying in 4s: ConfigMap/{ns}/a query failed: GET {url}/api/v1 failed: "
        "Server disconnected")
    # only the first attempt probed (aiohttp sends an idempotent request twice when the server hangs up,
    # hence "before any other request", not "once")
    first_other = next(i for i, line in enumerate(lines) if not line.startswith("GET /livez/ping "))
    assert first_other > 0, lines
    assert not [line for line in lines[first_other:] if line.startswith("GET /livez/ping ")], lines
