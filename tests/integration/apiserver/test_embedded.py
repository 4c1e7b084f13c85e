"""Behaviour only the embedded server can be asked for: history size, fault injection, request log, CLI."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from kustomize_controller.testing.apiserver import ApiServer

from .helpers import MERGE, call, cm_path, configmap, read_watch

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]


async def test_bounded_history_expires_old_versions():
    async with ApiServer(history_size=3) as server, server.session() as http:
        _, first = await call(http, "POST", cm_path("default"), body=configmap("h0"))
        for i in range(1, 5):
            await call(http, "POST", cm_path("default"), body=configmap(f"h{i}"))
        events = await read_watch(http, cm_path("default"),
                                  {"resourceVersion": first["metadata"]["resourceVersion"], "timeoutSeconds": "2"})
        assert [e["type"] for e in events] == ["ERROR"]
        assert events[0]["object"]["code"] == 410
        recent = str(server.resource_version - 1)
        events = await read_watch(http, cm_path("default"), {"resourceVersion": recent, "timeoutSeconds": "1"},
                                  until=1)
        assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "h4"


async def test_continue_token_expires_after_compaction(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    async with cluster.session() as http:
        for i in range(3):
            await call(http, "POST", cm_path(ns), body=configmap(f"c{i}"))
        _, page = await call(http, "GET", cm_path(ns), params={"limit": "1"})
        await call(http, "POST", cm_path(ns), body=configmap("later"))
        server.compact()
        status, body = await call(http, "GET", cm_path(ns), params={"limit": "1",
                                                                     "continue": page["metadata"]["continue"]})
        assert (status, body["reason"]) == (410, "Expired")


async def test_fail_next_requests_then_recover(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    rule = server.faults.fail(method="POST", path=r"/configmaps$", status=503, count=2, message="etcd is down")
    async with cluster.session() as http:
        for _ in range(2):
            status, body = await call(http, "POST", cm_path(ns), body=configmap("f"))
            assert (status, body["reason"], body["message"]) == (503, "ServiceUnavailable", "etcd is down")
        status, _ = await call(http, "POST", cm_path(ns), body=configmap("f"))
        assert status == 201
    assert rule.hits == 2


async def test_a_lost_answer_after_the_commit_stores_the_write(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    rule = server.faults.fail(method="POST", path=r"/configmaps$", status=500, count=1, message="timed out",
                              after_store=True)
    async with cluster.session() as http:
        status, _ = await call(http, "POST", cm_path(ns) + "?dryRun=All", body=configmap("g"))
        assert status == 201  # a dry-run stores nothing: not counted
        status, body = await call(http, "POST", cm_path(ns), body=configmap("g"))
        assert (status, body["message"]) == (500, "timed out")
        status, _ = await call(http, "GET", cm_path(ns, "g"))
        assert status == 200  # stored all the same
        status, _ = await call(http, "POST", cm_path(ns), body=configmap("h"))
        assert status == 201
    assert rule.hits == 1


async def test_a_dropped_connection_before_or_after_the_commit(cluster):
    """``drop=True``: no answer at all, the connection aborted — before serving (nothing stored) or, with
    ``after_store``, after storing (the client cannot tell which)."""
    server = cluster.require_server()
    ns = cluster.namespace
    before = server.faults.fail(method="POST", path=r"/configmaps$", count=1, drop=True)
    after = server.faults.fail(method="POST", path=r"/configmaps$", count=1, drop=True, after_store=True)
    async with cluster.session() as http:
        with pytest.raises(aiohttp.ClientError):
            await call(http, "POST", cm_path(ns), body=configmap("lost-before"))
        assert (await call(http, "GET", cm_path(ns, "lost-before")))[0] == 404
        with pytest.raises(aiohttp.ClientError):
            await call(http, "POST", cm_path(ns), body=configmap("lost-after"))
        assert (await call(http, "GET", cm_path(ns, "lost-after")))[0] == 200
        assert (await call(http, "POST", cm_path(ns), body=configmap("served")))[0] == 201
    assert (before.hits, after.hits) == (1, 1)
    # the one dropped before serving never reached the dispatcher: logged with status 499 and no verb
    assert [r.status for r in server.requests.writes(resource="configmaps", namespace=ns)] == [499, 201]
    assert [r.status for r in server.requests if r.path == cm_path(ns)] == [499, 499, 201]


async def test_latency_is_added(cluster):
    server = cluster.require_server()
    server.faults.delay(0.3, method="GET", path="/configmaps/slow", count=1)
    async with cluster.session() as http:
        await call(http, "POST", cm_path(cluster.namespace), body=configmap("slow"))
        loop = asyncio.get_running_loop()
        started = loop.time()
        status, _ = await call(http, "GET", cm_path(cluster.namespace, "slow"))
        assert status == 200
        assert loop.time() - started >= 0.3


async def test_close_all_watches_ends_streams(cluster):
    server = cluster.require_server()
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(cluster.namespace))
        watch = asyncio.create_task(read_watch(http, cm_path(cluster.namespace), {
            "timeoutSeconds": "60", "resourceVersion": listed["metadata"]["resourceVersion"]}))
        for _ in range(50):
            if server.watcher_count():
                break
            await asyncio.sleep(0.02)
        assert server.close_watches() >= 1
        events = await asyncio.wait_for(watch, 10)
        assert events == []
        assert server.watcher_count() == 0


async def test_rejected_delete_leaves_object(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    server.faults.reject_deletes(resource="configmaps", namespace=ns, name="keep", webhook="guard.example.com",
                                 message="protected")
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("keep"))
        status, body = await call(http, "DELETE", cm_path(ns, "keep"))
        assert status == 403
        assert body["message"] == 'admission webhook "guard.example.com" denied the request: protected'
        status, _ = await call(http, "GET", cm_path(ns, "keep"))
        assert status == 200


async def test_request_log_counts_writes(cluster):
    server = cluster.require_server()
    ns = cluster.namespace
    server.requests.clear()
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("log"))
        await call(http, "GET", cm_path(ns, "log"))
        await call(http, "PATCH", cm_path(ns, "log"), body={"data": {"a": "b"}}, content_type=MERGE,
                   params={"dryRun": "All"})
        await call(http, "PATCH", cm_path(ns, "log"), body={"data": {"a": "b"}}, content_type=MERGE)
    writes = server.requests.writes(resource="configmaps")
    assert [(w.verb, w.status) for w in writes] == [("create", 201), ("patch", 200)]
    assert len(server.requests.select(include_dry_run=True, writes_only=True, resource="configmaps")) == 3


async def test_command_line_server_serves_until_sigterm(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kustomize_controller.testing.apiserver", "--port", "0",
        "--kubeconfig-out", str(kubeconfig), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        url = line.decode().strip()
        assert url.startswith("https://127.0.0.1:")
        kubectl = REPO_ROOT / ".venv" / "bin" / "kubectl"
        if kubectl.exists():
            check = await asyncio.create_subprocess_exec(
                str(kubectl), "--kubeconfig", str(kubeconfig), "get", "namespaces", "-o", "name",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(check.communicate(), 60)
            assert check.returncode == 0, err.decode()
            assert "namespace/default" in out.decode().split()
            manifest = tmp_path / "cm.yaml"
            manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cli\n  namespace: default\n"
                                "data:\n  a: '1'\n")
            for extra in ([], ["--server-side"]):
                apply = await asyncio.create_subprocess_exec(
                    str(kubectl), "--kubeconfig", str(kubeconfig), "apply", *extra, "-f", str(manifest),
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                out, err = await asyncio.wait_for(apply.communicate(), 60)
                assert apply.returncode == 0, err.decode()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_namespace_stays_terminating_while_a_webhook_refuses_a_delete(cluster):
    server = cluster.require_server()
    name = cluster.namespace + "-w"
    rule = server.faults.reject_deletes(resource="configmaps", namespace=name, name="guarded")
    async with cluster.session() as http:
        await call(http, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
        await call(http, "POST", cm_path(name), body=configmap("guarded"))
        await call(http, "POST", cm_path(name), body=configmap("free"))
        status, _ = await call(http, "DELETE", f"/api/v1/namespaces/{name}")
        assert status == 200
        assert (await call(http, "GET", cm_path(name, "free")))[0] == 404
        assert (await call(http, "GET", cm_path(name, "guarded")))[0] == 200
        assert rule.hits == 1
        server.faults.clear()
        status, _ = await call(http, "DELETE", cm_path(name, "guarded"))
        assert status == 200
        assert (await call(http, "GET", f"/api/v1/namespaces/{name}"))[0] == 404


async def test_writes_to_the_all_namespaces_path_are_not_allowed(cluster):
    async with cluster.session() as http:
        status, body = await call(http, "POST", "/api/v1/configmaps", body=configmap("x"))
        assert (status, body["reason"]) == (405, "MethodNotAllowed")


async def test_too_many_requests_carries_retry_after(cluster):
    server = cluster.require_server()
    server.faults.fail(method="GET", path=r"/configmaps$", status=429, count=1)
    async with cluster.session() as http, http.get(cm_path(cluster.namespace)) as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "1"
        body = await resp.json()
        assert (body["reason"], body["details"]["retryAfterSeconds"]) == ("TooManyRequests", 1)


async def test_simulated_workloads_become_ready():
    from .helpers import deployment

    async with ApiServer(simulate_workloads=True) as server, server.session() as http:
        base = "/apis/apps/v1/namespaces/default/deployments"
        status, created = await call(http, "POST", base, body=deployment("sim", replicas=2))
        assert status == 201
        assert "availableReplicas" not in created.get("status", {})  # the write itself, before the controller
        _, obj = await call(http, "GET", f"{base}/sim")
        assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 1
        assert obj["status"]["availableReplicas"] == obj["status"]["updatedReplicas"] == 2
        assert {c["type"]: c["status"] for c in obj["status"]["conditions"]} == {"Available": "True",
                                                                                  "Progressing": "True"}
        await call(http, "PATCH", f"{base}/sim", body={"spec": {"replicas": 3}}, content_type=MERGE)
        _, obj = await call(http, "GET", f"{base}/sim")
        assert obj["status"]["observedGeneration"] == 2 and obj["status"]["readyReplicas"] == 3
        await call(http, "PATCH", f"{base}/sim/status", body={"status": {"availableReplicas": 0}},
                   content_type=MERGE)
        _, obj = await call(http, "GET", f"{base}/sim")
        assert obj["status"]["availableReplicas"] == 0  # a client's own status write is kept


async def test_populated_namespaces_have_what_real_clusters_put_there():
    async with ApiServer(populate_namespaces=True) as server, server.session() as http:
        await call(http, "POST", "/api/v1/namespaces", body={"metadata": {"name": "fresh"}})
        status, sa = await call(http, "GET", "/api/v1/namespaces/fresh/serviceaccounts/default")
        assert status == 200 and sa["metadata"]["namespace"] == "fresh"
        status, ca = await call(http, "GET", cm_path("fresh", "kube-root-ca.crt"))
        assert status == 200
        assert ca["data"]["ca.crt"] == server.ca_pem.decode()


async def test_exact_list_before_compaction_is_gone(cluster):
    server = cluster.require_server()
    async with cluster.session() as http:
        _, listed = await call(http, "GET", cm_path(cluster.namespace))
        await call(http, "POST", cm_path(cluster.namespace), body=configmap("later"))
        server.compact()
        status, body = await call(http, "GET", cm_path(cluster.namespace), params={
            "resourceVersion": listed["metadata"]["resourceVersion"], "resourceVersionMatch": "Exact"})
        assert (status, body["reason"]) == (410, "Expired")


async def test_restart_refuses_connections_cuts_open_ones_and_keeps_state(cluster):
    """``go_down()``/``come_back()`` as an API server restart: refused while down, every open connection
    (a watch included) cut without a clean end, then the same address serves the same objects, and a
    watch from the last resourceVersion seen resumes with what was written afterwards."""
    server = cluster.require_server()
    ns = cluster.namespace
    url = server.url
    async with cluster.session() as http:
        _, created = await call(http, "POST", cm_path(ns), body=configmap("kept"))
        rv = created["metadata"]["resourceVersion"]
        watch = asyncio.create_task(read_watch(http, cm_path(ns), {"timeoutSeconds": "60", "resourceVersion": rv}))
        for _ in range(50):
            if server.watcher_count():
                break
            await asyncio.sleep(0.02)
        assert await server.go_down() >= 1
        assert not server.serving
        with pytest.raises(aiohttp.ClientPayloadError):  # cut mid-stream: no terminating chunk
            await asyncio.wait_for(watch, 10)
        with pytest.raises(aiohttp.ClientConnectorError) as refused:
            await call(http, "GET", cm_path(ns, "kept"))
        assert refused.value.os_error.errno == errno.ECONNREFUSED
        assert server.watcher_count() == 0
        await server.come_back()
        assert server.url == url
        status, got = await call(http, "GET", cm_path(ns, "kept"))
        assert (status, got["metadata"]["resourceVersion"]) == (200, rv)
        await call(http, "POST", cm_path(ns), body=configmap("after"))
        events = await read_watch(http, cm_path(ns), {"timeoutSeconds": "5", "resourceVersion": rv}, until=1)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "after")]


async def test_restart_waits_then_serves_again(cluster):
    server = cluster.require_server()
    async with cluster.session() as http:
        await server.restart(down_for=0.1)
        assert server.serving
        status, _ = await call(http, "GET", cm_path(cluster.namespace))
        assert status == 200
    with pytest.raises(RuntimeError):
        await server.come_back()
