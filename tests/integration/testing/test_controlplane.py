"""The real control plane (tests/controlplane) from KUBE_ASSETS: what a real cluster has, and nothing left after.

Skipped without the binaries (CI has none); `make test-real` runs it beside the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.controlplane import ControlPlane, missing_assets

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(missing_assets(os.environ.get("KUBE_ASSETS"))),
                                 reason=missing_assets(os.environ.get("KUBE_ASSETS")) or "-")]


def kubectl(config: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["kubectl", "--kubeconfig", str(config), *args], input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def eventually(probe, within: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.5)


def test_a_real_control_plane_starts_serves_and_leaves_nothing() -> None:
    plane = ControlPlane(assets=Path(os.environ["KUBE_ASSETS"]), users=("cp-harness-robot",))
    with plane:
        workdir, pids = plane.workdir, plane.pids()
        assert workdir is not None and set(pids) >= {"etcd", "kube-apiserver"}
        config = plane.admin_kubeconfig
        # an extra user is its own identity, with the admin's powers
        kubectl(plane.user_kubeconfig("cp-harness-robot"), "get", "namespaces", "-o", "name")
        version = json.loads(kubectl(config, "version", "-o", "json"))["serverVersion"]
        assert version["major"] == "1"
        # API priority and fairness and RBAC are on
        assert kubectl(config, "get", "flowschemas", "-o", "name")
        assert "clusterrole.rbac.authorization.k8s.io/cluster-admin" in kubectl(config, "get", "clusterroles",
                                                                                "-o", "name")
        if "kube-controller-manager" in pids:
            kubectl(config, "create", "namespace", "cp-harness")
            kubectl(config, "-n", "cp-harness", "create", "serviceaccount", "robot")
            assert kubectl(config, "-n", "cp-harness", "create", "token", "robot").count(".") == 2  # TokenRequest
            kubectl(config, "-n", "cp-harness", "create", "deployment", "web", "--image=example.invalid/web")
            assert eventually(lambda: kubectl(config, "-n", "cp-harness", "get", "replicasets", "-o", "name"))
            kubectl(config, "delete", "namespace", "cp-harness", "--timeout=120s")  # the namespace controller
        assert plane.audit_log.stat().st_size > 0
        assert eventually(lambda: '"username":"cp-harness-robot"' in plane.audit_log.read_text())
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert not workdir.exists()


@pytest.mark.timeout(300)  # a start and two restarts: ~15 s each on a quiet machine, several times that on a busy one
def test_the_api_server_restarts_on_the_same_address_with_its_data() -> None:
    with ControlPlane(assets=Path(os.environ["KUBE_ASSETS"]), controller_manager=False) as plane:
        config = plane.admin_kubeconfig
        kubectl(config, "create", "configmap", "kept", "-n", "default", "--from-literal=k=v")
        before = plane.pids()["kube-apiserver"]
        for grace in (0.0, 5.0):  # a crash, then a graceful stop (SIGKILL after 5 s if watches hold it)
            took = plane.restart_apiserver(grace=grace)
            assert 0 < took < 120
            assert plane.pids()["kube-apiserver"] != before
            before = plane.pids()["kube-apiserver"]
            # the same URL, CA and token; etcd kept the data
            assert kubectl(config, "get", "configmap", "kept", "-n", "default", "-o", "jsonpath={.data.k}") == "v"
            kubectl(config, "create", "configmap", f"after-{int(grace)}", "-n", "default")
        assert '"after-5"' in plane.audit_log.read_text()  # the restarted server audits into the same file
