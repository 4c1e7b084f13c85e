"""Detect-only drift and the preview, as a user meets them (docs/drift.md): ``kubectl annotate`` switches a
Kustomization to ``drift-detection: warn``, a ``kubectl scale`` survives reconciles and is reported, and
``kustomize-controller diff`` (its own process) shows it with exit status 1 and writes nothing; switching
back to ``enabled`` reverts it and the diff is empty again."""

from __future__ import annotations

import asyncio

import pytest

from kustomize_controller.kube.errors import NotFoundError

from .harness import Scenario, controller_command, eventually, samples
from .test_drift import handled, request_reconcile

pytestmark = pytest.mark.timeout(300)

ANNOTATION = "kustomize.toolkit.fluxcd.io/drift-detection"
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: main
          image: nginx:1.27
"""


def condition(obj: dict[str, object], type_: str) -> dict[str, str] | None:
    status = obj.get("status") or {}
    assert isinstance(status, dict)
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


async def diff(scenario: Scenario, name: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *controller_command(), "diff", name, "-n", scenario.namespace, f"--kubeconfig={scenario.controller.kubeconfig}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return int(proc.returncode or 0), out.decode(), err.decode()


async def replicas(scenario: Scenario) -> int:
    return int((await scenario.kube.get("apps/v1", "Deployment", "web", scenario.namespace))["spec"]["replicas"])


async def test_warn_keeps_a_scale_and_diff_shows_it(scenario: Scenario) -> None:
    ns = scenario.namespace
    await scenario.publish({"kustomization.yaml": "resources:\n- web.yaml\n", "web.yaml": DEPLOYMENT})
    await scenario.create_kustomization("warn", targetNamespace=ns)
    await scenario.wait_ready("warn")
    code, out, err = await diff(scenario, "warn")
    assert (code, out) == (0, ""), err

    await scenario.kubectl("annotate", "--overwrite", "kustomization/warn", "-n", ns, f"{ANNOTATION}=warn")
    await eventually(lambda: scenario.kustomization("warn"), lambda ks: condition(ks, "Drifted") is not None,
                     within=120, what="the annotation change is reconciled")
    # what `kubectl scale` changes (the embedded API server has no /scale subresource)
    await scenario.kubectl("patch", "deployment/web", "-n", ns, "--type=merge", "-p", '{"spec":{"replicas":3}}')
    ks = await handled(scenario, "warn", await request_reconcile(scenario, "warn"))
    drifted = condition(ks, "Drifted")
    assert drifted is not None and (drifted["status"], drifted["reason"]) == ("True", "DriftDetected")
    assert drifted["message"].splitlines()[1:] == [f"Deployment/{ns}/web"]
    assert await replicas(scenario) == 3
    await eventually(scenario.metrics,
                     lambda text: [s.value for s in samples(text, "gotk_drift_objects", name="warn", namespace=ns)]
                     == [1.0], within=30, what="gotk_drift_objects 1")

    before = (await scenario.kube.get("apps/v1", "Deployment", "web", ns))["metadata"]["generation"]
    code, out, err = await diff(scenario, "warn")
    assert code == 1, err
    assert out.startswith(f"Deployment/{ns}/web configured\n") and "replicas: 1" in out
    after = await scenario.kube.get("apps/v1", "Deployment", "web", ns)
    assert (after["metadata"]["generation"], after["spec"]["replicas"]) == (before, 3)

    await scenario.kubectl("annotate", "--overwrite", "kustomization/warn", "-n", ns, f"{ANNOTATION}=enabled")
    await eventually(lambda: replicas(scenario), lambda n: n == 1, within=120, what="the scale reverted")
    code, out, err = await diff(scenario, "warn")
    assert (code, out) == (0, ""), err


async def test_diff_of_a_missing_kustomization_exits_2(scenario: Scenario) -> None:
    with pytest.raises(NotFoundError):
        await scenario.kustomization("nope")
    code, out, err = await diff(scenario, "nope")
    assert (code, out) == (2, "")
    assert f"Kustomization/{scenario.namespace}/nope not found" in err
