"""The seed documents' Kustomizations, in their original versions, apply with ``kubectl apply`` and get Ready.

Each file of ``../shared/reference/seed-kustomizations/`` is applied unchanged (``kubectl apply -f``,
``-n`` for files without a namespace) against the embedded API server, which converts through the
controller's webhook as kube-apiserver does; a source of the referenced name publishes the referenced
path. Then, through the file's own version: ``kubectl wait --for=condition=ready`` passes, and the
object reads back with every field the file wrote (nothing silently dropped).

The controller's webhook listens on loopback, which only the embedded server (on this machine) can
call; on a real cluster these run in e2e/ (with ``E2E_WEBHOOK_HOST``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from kustomize_controller.api.crdgen import build_crd
from kustomize_controller.kube.errors import AlreadyExistsError
from kustomize_controller.testing.apiserver import crdschema
from tests.conftest import REPO_ROOT, SHARED
from tests.integration.controller.conftest import ControllerEnv, condition
from tests.integration.controller.test_conversion_webhook import start_with_webhook, webhook_config

pytestmark = [pytest.mark.integration, pytest.mark.builder]

SEEDS = SHARED / "reference" / "seed-kustomizations"
GROUP = "kustomize.toolkit.fluxcd.io"
SCHEMAS = {v["name"]: v["schema"]["openAPIV3Schema"] for v in build_crd()["spec"]["versions"]}


def kubectl() -> str:
    return shutil.which("kubectl") or str(REPO_ROOT / ".venv" / "bin" / "kubectl")


async def run_kubectl(env: ControllerEnv, *args: str, check: bool = True) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        kubectl(), f"--kubeconfig={env.cluster.kubeconfig_path}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    code = proc.returncode or 0
    if check and code != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({code}): {err.decode()}{out.decode()}")
    return code, out.decode(), err.decode()


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(path.read_text()) if d]


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: nginx:1.27
"""


def config_map(name: str, namespace: str | None = None) -> str:
    ns = f"\n  namespace: {namespace}" if namespace else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{ns}\ndata:\n  from: seed\n"


async def make_namespace(env: ControllerEnv, name: str) -> None:
    """A namespace a seed document names (``flux-system``, ``webapp``…): not ``<namespace>-…``, so the
    controller of these tests watches every namespace; teardown deletes it with the test's own."""
    with contextlib.suppress(AlreadyExistsError):
        await env.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if name != env.namespace and name not in env.extra_namespaces:
        env.extra_namespaces.append(name)


async def publish(env: ControllerEnv, *, namespace: str, name: str, files: dict[str, str], kind: str = "GitRepository"
                  ) -> None:
    from kustomize_controller.testing.artifacts import publish_source

    artifact = await env.artifacts.publish_files(files, name=f"{namespace}/{name}")
    await publish_source(env.client, kind=kind, namespace=namespace, name=name, artifact=artifact)


async def prepare(env: ControllerEnv, seed: str) -> str:
    """Namespaces and sources the seed refers to; returns the namespace for ``kubectl apply -n``."""
    ns = env.namespace
    webapp = {"webapp/common/cm.yaml": config_map("common", ns),
              "webapp/backend/deploy.yaml": DEPLOYMENT.format(name="backend", namespace="dev")}
    if seed == "v1-bucket.yaml":
        await publish(env, namespace="default", name="kustomizebucket", kind="Bucket",
                      files={"cm.yaml": config_map("from-bucket", ns)})
    elif seed == "v1beta2-validation-client.yaml":
        await make_namespace(env, "flux-system")
        await publish(env, namespace="flux-system", name="flux-system",
                      files={"apps/my-app/overlays/production/cm.yaml": config_map("my-app", "flux-system")})
    elif seed in ("v1alpha1-health-check.yaml", "v1alpha1-depends-on.yaml"):
        await make_namespace(env, "dev")
        await publish(env, namespace=ns, name="webapp", files=webapp)
    elif seed == "v1alpha1-depends-on-cross-namespace.yaml":
        await make_namespace(env, "dev")
        await make_namespace(env, "istio-system")
        await publish(env, namespace="istio-system", name="istio",
                      files={"profiles/default/deploy.yaml": DEPLOYMENT.format(name="istiod",
                                                                             namespace="istio-system")})
        await publish(env, namespace=ns, name="webapp", files=webapp)
        await apply_file(env, SEEDS / "v1alpha1-depends-on.yaml", ns)  # `common`, as the document has it
    elif seed == "v1alpha1-service-account.yaml":
        ns = "webapp"  # the document applies it with `kubectl apply -n webapp`
        await make_namespace(env, "dev")
        await make_namespace(env, ns)
        await env.client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                 "metadata": {"name": "webapp-reconciler", "namespace": ns}})
        webapp["webapp/common/cm.yaml"] = config_map("common", ns)
        await publish(env, namespace=ns, name="webapp", files=webapp)
        await apply_file(env, SEEDS / "v1alpha1-depends-on.yaml", ns)
    elif seed == "v1alpha1-decryption.yaml":
        await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-pgp",
                                                                                  "namespace": ns}})
        await publish(env, namespace=ns, name="my-secrets", files={"cm.yaml": config_map("not-secret", ns)})
    else:
        raise AssertionError(f"no preparation for {seed}: add one")
    return ns


async def apply_file(env: ControllerEnv, path: Path, namespace: str) -> str:
    """``kubectl apply -f path`` with ``namespace`` as the current context's namespace (a file mixing
    objects with and without a namespace, like the cross-namespace seed, cannot take ``-n``)."""
    kubeconfig = _kubeconfig_for(Path(env.cluster.kubeconfig_path), namespace)
    _, out, err = await run_kubectl(env, f"--kubeconfig={kubeconfig}", "apply", "-f", str(path))
    return out + err


def _kubeconfig_for(base: Path, namespace: str) -> Path:
    config = json.loads(base.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    kubeconfig = base.parent / f"kubeconfig-{namespace}"
    kubeconfig.write_text(json.dumps(config))
    return kubeconfig


SEED_FILES = sorted(p.name for p in SEEDS.glob("*.yaml"))


def test_every_seed_file_has_a_case() -> None:
    assert len(SEED_FILES) == 7, SEED_FILES


@pytest.mark.parametrize("seed", SEED_FILES)
async def test_seed_applies_unchanged_and_gets_ready(env: ControllerEnv, seed: str) -> None:
    server = env.cluster.require_server()
    server.cluster.simulate_workloads = True  # Deployments under health check become available
    await start_with_webhook(env, watch_all_namespaces=True)  # the documents name their namespaces
    namespace = await prepare(env, seed)
    path = SEEDS / seed
    output = await apply_file(env, path, namespace)
    for doc in documents(path):
        version = doc["apiVersion"].rpartition("/")[2]
        ns = doc["metadata"].get("namespace", namespace)
        name = doc["metadata"]["name"]
        resource = f"kustomizations.{version}.{GROUP}/{name}"
        if version != "v1":
            assert f"{GROUP}/{version} Kustomization is deprecated" in output, output
        await run_kubectl(env, "-n", ns, "wait", resource, "--for=condition=ready", "--timeout=60s")
        _, out, _ = await run_kubectl(env, "-n", ns, "get", resource, "-o", "json")
        back = json.loads(out)
        assert back["apiVersion"] == doc["apiVersion"]
        # every field written comes back as written (plus the version's schema defaults)
        expected = crdschema.prune_and_default(SCHEMAS[version], {"spec": doc["spec"]})["spec"]
        assert back["spec"] == expected
        ready = [c for c in back["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", back["status"]
        stored = await env.client.get(f"{GROUP}/v1", "Kustomization", name, ns)
        assert condition(stored, "Ready") == ("True", "ReconciliationSucceeded")
        if seed == "v1alpha1-service-account.yaml" and name == "backend":
            assert stored["spec"]["serviceAccountName"] == "webapp-reconciler"
        if seed == "v1beta2-validation-client.yaml":
            assert "validation" not in stored["spec"]
    # applying the same file again changes nothing (the conversion is stable: no spurious diff)
    generations = {d["metadata"]["name"]: (await env.client.get(f"{GROUP}/v1", "Kustomization", d["metadata"]["name"],
                                                                d["metadata"].get("namespace", namespace))
                                           )["metadata"]["generation"] for d in documents(path)}
    again = await apply_file(env, path, namespace)
    assert "configured" not in again, again
    for doc in documents(path):
        stored = await env.client.get(f"{GROUP}/v1", "Kustomization", doc["metadata"]["name"],
                                      doc["metadata"].get("namespace", namespace))
        assert stored["metadata"]["generation"] == generations[doc["metadata"]["name"]]


async def test_patches_strategic_merge_reach_the_cluster_and_the_v1beta2_view(env: ControllerEnv) -> None:
    env.cluster.require_server()
    await start_with_webhook(env)
    await publish(env, namespace=env.namespace, name="repo",
                  files={"cm.yaml": config_map("app"), "kustomization.yaml": "resources: [cm.yaml]\n"})
    doc = {"apiVersion": f"{GROUP}/v1beta2", "kind": "Kustomization",
           "metadata": {"name": "app", "namespace": env.namespace},
           "spec": {"interval": "5m", "prune": True, "targetNamespace": env.namespace,
                    "sourceRef": {"kind": "GitRepository", "name": "repo"},
                    "patchesStrategicMerge": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"},
                                               "data": {"patched": "yes"}}],
                    # the target names the targetNamespace: kustomize ran patchesJson6902 after moving
                    # objects there, so it matched the ConfigMap (which the artifact has without namespace)
                    "patchesJson6902": [{"target": {"version": "v1", "kind": "ConfigMap", "name": "app",
                                                    "namespace": env.namespace},
                                         "patch": [{"op": "add", "path": "/data/json", "value": "6902"}]}]}}
    await env.client.create(doc)
    await env.wait_ready("app")
    cm = await env.client.get("v1", "ConfigMap", "app", env.namespace)
    assert cm["data"] == {"from": "seed", "patched": "yes", "json": "6902"}
    view = await env.client.get(f"{GROUP}/v1beta2", "Kustomization", "app", env.namespace)
    stored = await env.client.get(f"{GROUP}/v1", "Kustomization", "app", env.namespace)
    assert "patchesStrategicMerge" in view["spec"], (view, stored)
    assert view["spec"]["patchesStrategicMerge"] == doc["spec"]["patchesStrategicMerge"]
    assert view["spec"]["patchesJson6902"] == doc["spec"]["patchesJson6902"]
    assert "patches" not in view["spec"]
    # a merge patch through v1beta2 works on the v1beta2 form and keeps the rest
    patched = await env.client.patch(f"{GROUP}/v1beta2", "Kustomization", "app", env.namespace,
                                     {"spec": {"validation": "server"}}, patch_type="merge")
    assert patched["spec"]["validation"] == "server"
    assert patched["spec"]["patchesStrategicMerge"] == doc["spec"]["patchesStrategicMerge"]


async def test_cross_namespace_service_account_is_refused_at_admission(env: ControllerEnv) -> None:
    env.cluster.require_server()
    await start_with_webhook(env)
    doc = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "Kustomization",
           "metadata": {"name": "app", "namespace": env.namespace},
           "spec": {"interval": "5m", "path": "./", "sourceRef": {"kind": "GitRepository", "name": "repo"},
                    "serviceAccount": {"name": "admin", "namespace": "kube-system"}}}
    path = Path(env.cluster.kubeconfig_path).parent / "cross.json"
    path.write_text(json.dumps(doc))
    code, _out, err = await run_kubectl(env, "apply", "-f", str(path), check=False)
    assert code != 0
    assert "spec.serviceAccount.namespace" in err and "spec.serviceAccountName" in err, err
    code, _, _ = await run_kubectl(env, "-n", env.namespace, "get", "kustomization", "app", check=False)
    assert code != 0  # nothing stored


async def test_with_the_controller_down_v1_works_and_old_versions_fail(env: ControllerEnv) -> None:
    env.cluster.require_server()
    config = await start_with_webhook(env)
    await env.client.create(env.kustomization("app", path="./"))
    seen = await env.client.get(f"{GROUP}/v1beta1", "Kustomization", "app", env.namespace)
    assert seen["apiVersion"] == f"{GROUP}/v1beta1"
    await env.stop()
    assert (await env.client.get(f"{GROUP}/v1", "Kustomization", "app", env.namespace))["spec"]["path"] == "./"
    await env.client.patch(f"{GROUP}/v1", "Kustomization", "app", env.namespace, {"spec": {"suspend": True}},
                           patch_type="merge")
    code, _, err = await run_kubectl(env, "-n", env.namespace, "get", f"kustomizations.v1beta2.{GROUP}", "app",
                                     check=False)
    assert code != 0
    assert f"conversion webhook for {GROUP}/v1, Kind=Kustomization failed" in err, err
    await start_with_webhook(env)  # back: old versions work again
    await webhook_config(env, not_url=config["url"])
    seen = await env.client.get(f"{GROUP}/v1beta2", "Kustomization", "app", env.namespace)
    assert seen["spec"]["suspend"] is True


async def test_server_side_apply_through_an_old_version(env: ControllerEnv) -> None:
    env.cluster.require_server()
    await start_with_webhook(env)
    ns = env.namespace
    await publish(env, namespace=ns, name="webapp", files={"webapp/common/cm.yaml": config_map("common", ns)})
    path = SEEDS / "v1alpha1-depends-on.yaml"
    kubeconfig = _kubeconfig_for(Path(env.cluster.kubeconfig_path), ns)
    await run_kubectl(env, f"--kubeconfig={kubeconfig}", "apply", "--server-side", "-f", str(path))
    await run_kubectl(env, "-n", ns, "wait", f"kustomizations.v1alpha1.{GROUP}/common", "--for=condition=ready",
                      "--timeout=60s")
    _, out, _ = await run_kubectl(env, "-n", ns, "get", f"kustomizations.v1alpha1.{GROUP}/backend", "-o", "json")
    assert json.loads(out)["spec"]["dependsOn"] == [{"name": "common"}]
    _, out, _ = await run_kubectl(env, f"--kubeconfig={kubeconfig}", "apply", "--server-side", "-f", str(path))
    assert "serverside-applied" in out
