"""``kustomize-controller diff`` on a live cluster: silent and 0 when in sync, the edited field and 1 after
an out-of-band edit, prune's deletions with a local ``--path``, recreates for ``force``, masked Secrets —
and never a write: every resourceVersion is the same after any run."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from kustomize_controller.cli import main
from tests.integration.controller.conftest import KS_API, ControllerEnv
from tests.integration.controller.manifests import configmap, deployment, kustomization

pytestmark = pytest.mark.integration

SECRET = """apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: hunter2
"""


def files(**extra: str) -> dict[str, str]:
    base = {"cm.yaml": configmap("settings", {"mode": "safe"}), "web.yaml": deployment("web"), **extra}
    return {"kustomization.yaml": kustomization(*base), **base}


async def run_diff(env: ControllerEnv, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = ["diff", "app", "-n", env.namespace, "--kubeconfig", env.cluster.kubeconfig_path, *argv]
    code = await asyncio.to_thread(main, args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


async def versions(env: ControllerEnv) -> dict[str, str]:
    """What a write by the diff would change, for every object the test touches and the Kustomization:
    the resourceVersion, except for Deployments, whose status a real cluster's controller manager keeps
    writing (there: uid, generation, labels, annotations and spec)."""
    out: dict[str, str] = {}
    for api_version, kind in (("v1", "ConfigMap"), ("v1", "Secret"), ("apps/v1", "Deployment"),
                              (KS_API, "Kustomization")):
        for obj in await env.client.list(api_version, kind, env.namespace):
            meta = obj["metadata"]
            if kind == "Deployment":
                out[f"{kind}/{meta['name']}"] = json.dumps(
                    [meta["uid"], meta.get("generation"), meta.get("labels"), meta.get("annotations"), obj["spec"]],
                    sort_keys=True)
            else:
                out[f"{kind}/{meta['name']}"] = f"{meta['uid']}@{meta['resourceVersion']}"
    return out


def no_writes_since(env: ControllerEnv, mark: int) -> None:
    """Embedded server: not a single write that was not a dry-run (a real cluster has no request log)."""
    if env.cluster.server is None:
        return
    records = list(env.server.requests)[mark:]
    assert [r for r in records if r.is_write and not r.dry_run] == []


def log_mark(env: ControllerEnv) -> int:
    return len(env.server.requests) if env.cluster.server is not None else 0


async def applied(env: ControllerEnv, tree: dict[str, str], **spec: Any) -> None:
    """Apply ``tree`` with the controller, then stop it so nothing but the diff talks to the cluster."""
    artifact = await env.publish(tree)
    await env.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, **spec))
    await env.wait_ready(revision=artifact["revision"])
    await env.stop()


async def test_in_sync_prints_nothing_and_an_edit_shows_its_field(env: ControllerEnv) -> None:
    ns = env.namespace
    await applied(env, files())
    before, mark = await versions(env), log_mark(env)
    code, out, err = await run_diff(env)
    assert (code, out) == (0, ""), err
    no_writes_since(env, mark)
    assert "► " in err  # progress on stderr

    await env.client.patch("v1", "ConfigMap", "settings", ns, {"data": {"mode": "unsafe"}},
                           patch_type="merge", field_manager="kubectl-edit")
    edited, mark = await versions(env), log_mark(env)
    code, out, err = await run_diff(env)
    assert code == 1, err
    assert out.startswith(f"ConfigMap/{ns}/settings configured\n")
    assert "-  mode: unsafe\n" in out and "+  mode: safe\n" in out
    assert "managedFields" not in out and "resourceVersion" not in out
    assert "Deployment" not in out

    code, verbose, _ = await run_diff(env, "--verbose")
    assert code == 1 and f"Deployment/{ns}/web unchanged" in verbose

    code, text, _ = await run_diff(env, "--output", "json")
    doc = json.loads(text)
    assert code == 1 and doc["changed"] is True and doc["errors"] == []
    assert [(o["subject"], o["action"]) for o in doc["objects"]] == [(f"ConfigMap/{ns}/settings", "configured")]
    assert "+  mode: safe" in doc["objects"][0]["diff"]

    assert await versions(env) == edited
    no_writes_since(env, mark)
    assert edited["Kustomization/app"] == before["Kustomization/app"]


async def test_local_path_dropping_an_object_reports_it_deleted(env: ControllerEnv, tmp_path: Path) -> None:
    ns = env.namespace
    await applied(env, files())
    local = files(**{"cm.yaml": configmap("settings", {"mode": "safe"})})
    del local["web.yaml"]
    local["kustomization.yaml"] = kustomization("cm.yaml")
    for name, text in local.items():
        (tmp_path / name).write_text(text)
    before, mark = await versions(env), log_mark(env)
    code, out, err = await run_diff(env, "--path", str(tmp_path))
    assert code == 1, err
    assert out == f"Deployment/{ns}/web deleted\n"
    assert await env.exists("apps/v1", "Deployment", "web")
    assert await versions(env) == before
    no_writes_since(env, mark)


async def test_force_shows_a_recreate_and_secrets_are_masked(env: ControllerEnv) -> None:
    ns = env.namespace
    await applied(env, files(**{"secret.yaml": SECRET}), force=True)
    before = await versions(env)
    changed = files(**{"secret.yaml": SECRET.replace("hunter2", "correct-horse")})
    changed["web.yaml"] = deployment("web", app="web-v2")  # the selector is immutable
    await env.publish(changed)
    mark = log_mark(env)
    code, out, err = await run_diff(env)
    assert code == 1, err
    assert f"Deployment/{ns}/web would be recreated (" in out
    assert f"Secret/{ns}/creds configured" in out
    assert "*** (before)" in out and "*** (after)" in out
    assert "hunter2" not in out and "correct-horse" not in out
    assert "aHVudGVyMg" not in out  # nor base64 of it
    assert await versions(env) == before
    no_writes_since(env, mark)


async def test_errors_exit_2(env: ControllerEnv) -> None:
    code, out, err = await run_diff(env)
    assert (code, out) == (2, "")
    assert err.strip().endswith(f"error: Kustomization/{env.namespace}/app not found")


SOPS_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "testdata" / "sops"


@pytest.mark.skipif(not SOPS_DATA.is_dir(), reason="SOPS test data (../shared) not found")
async def test_sops_secrets_are_decrypted_with_the_kustomizations_own_key(env: ControllerEnv) -> None:
    import base64

    ns = env.namespace
    key = (SOPS_DATA / "keys" / "age.txt").read_bytes()
    await env.client.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sops-keys", "namespace": ns},
                             "data": {"identity.agekey": base64.b64encode(key).decode()}})
    artifact = await env.publish({"secret.yaml": (SOPS_DATA / "algorithms" / "age.yaml").read_text()})
    await env.create(env.kustomization(targetNamespace=ns, decryption={
        "provider": "sops", "secretRef": {"name": "sops-keys"}}))
    code, out, err = await run_diff(env)  # never reconciled yet: everything would be created
    assert (code, out) == (1, f"Secret/{ns}/age created\n"), err

    await env.start()
    await env.wait_ready(revision=artifact["revision"])
    await env.stop()
    code, out, err = await run_diff(env)  # the decrypted desired state is what is live
    assert (code, out) == (0, ""), err
    await env.client.patch("v1", "Secret", "age", ns, {"stringData": {"key": "tampered"}}, patch_type="merge",
                           field_manager="kubectl-edit")
    code, out, err = await run_diff(env)
    assert code == 1, err
    assert "*** (before)" in out and "*** (after)" in out
    for secret in ("tampered", "dGFtcGVyZWQ", "dmFsdWU"):  # plaintexts and their base64
        assert secret not in out


async def test_the_dry_run_impersonates_the_service_account(env: ControllerEnv) -> None:
    """Embedded server only: it enforces RBAC when asked to (the test cluster's RBAC is not ours to change)."""
    from tests.integration.controller.test_impersonation import create_sa, grant_configmaps

    ns = env.namespace
    server = env.server  # skips on a real cluster
    server.options.rbac = True
    await create_sa(env, "tenant")
    await env.publish({"cm.yaml": configmap("a")})
    await env.create(env.kustomization(targetNamespace=ns, serviceAccountName="tenant"))
    code, out, err = await run_diff(env)
    assert code == 2, out
    assert f'User "system:serviceaccount:{ns}:tenant" cannot' in err
    assert err.count("error: ") == 1 and f"error: ConfigMap/{ns}/a " in err
    await grant_configmaps(env, "tenant")
    code, out, err = await run_diff(env)
    assert (code, out) == (1, f"ConfigMap/{ns}/a created\n"), err


async def test_objects_in_a_namespace_the_revision_creates(env: ControllerEnv, tmp_path: Path) -> None:
    ns = env.namespace
    new_ns = f"{ns}-new"
    await applied(env, files())
    namespace = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {new_ns}\n"
    inside = configmap("inside").replace("metadata:\n", f"metadata:\n  namespace: {new_ns}\n")
    # without targetNamespace (which would move the new object too): namespaces spelled out
    local = {name: text.replace("metadata:\n", f"metadata:\n  namespace: {ns}\n", 1)
             for name, text in files().items() if name != "kustomization.yaml"}
    local.update({"ns.yaml": namespace, "inside.yaml": inside,
                  "kustomization.yaml": kustomization("cm.yaml", "web.yaml", "ns.yaml", "inside.yaml")})
    for name, text in local.items():
        (tmp_path / name).write_text(text)
    await env.patch_spec({"targetNamespace": None})
    code, out, err = await run_diff(env, "--path", str(tmp_path))
    assert code == 1, err
    assert f"Namespace/{new_ns} created\n" in out
    assert f"ConfigMap/{new_ns}/inside created (not validated: needs objects this revision creates first)\n" in out
    assert f"ConfigMap/{ns}/settings" not in out  # the same objects, in sync
    assert not [n for n in await env.client.list("v1", "Namespace") if n["metadata"]["name"] == new_ns]


async def test_the_preview_takes_over_the_managers_the_apply_takes_over(env: ControllerEnv) -> None:
    """The preview computes its apply options as the apply does (``reconcile/apply_options.py``): a field
    added by a manager named with ``--override-manager`` is reported ``configured``, and the controller
    with that flag then removes it; without the flag both leave it."""
    ns = env.namespace
    artifact = await env.publish(files())
    await env.start(override_managers=("lens",))
    await env.create(env.kustomization(targetNamespace=ns))
    await env.wait_ready(revision=artifact["revision"])
    await env.stop()
    await env.client.patch("v1", "ConfigMap", "settings", ns, {"data": {"extra": "added"}}, patch_type="merge",
                           field_manager="lens")
    before, mark = await versions(env), log_mark(env)

    code, out, err = await run_diff(env)  # a controller without --override-manager leaves lens's field
    assert (code, out) == (0, ""), err
    code, out, err = await run_diff(env, "--override-manager", "lens")
    assert code == 1, err
    assert out == (f"ConfigMap/{ns}/settings configured (field managers only: fields of kubectl, legacy or "
                   "overridden managers would be taken over)\n")
    assert await versions(env) == before
    no_writes_since(env, mark)

    await env.start(override_managers=("lens",))
    token = await env.request_reconcile()
    await env.wait_handled(token)
    live = await env.get("v1", "ConfigMap", "settings")
    assert live["data"] == {"mode": "safe"}  # the apply did what the preview said: lens's field is gone
    await env.stop()
    code, out, err = await run_diff(env, "--override-manager", "lens")
    assert (code, out) == (0, ""), err


async def test_warn_mode_drift_is_shown_as_a_change(env: ControllerEnv) -> None:
    """``drift-detection: warn`` does not filter the preview (docs/drift.md): an out-of-band edit is
    shown as the change it is and exits 1, although the controller then leaves it."""
    ns = env.namespace
    await applied(env, files())
    await env.client.patch(KS_API, "Kustomization", "app", ns,
                           {"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/drift-detection": "warn"}}},
                           patch_type="merge")
    await env.client.patch("v1", "ConfigMap", "settings", ns, {"data": {"mode": "unsafe"}}, patch_type="merge",
                           field_manager="kubectl-edit")
    code, out, err = await run_diff(env)
    assert code == 1, err
    assert out.startswith(f"ConfigMap/{ns}/settings configured\n")
    assert "-  mode: unsafe\n" in out and "+  mode: safe\n" in out
    assert "Deployment" not in out

    await env.start()
    token = await env.request_reconcile()
    await env.wait_handled(token)
    live = await env.get("v1", "ConfigMap", "settings")
    assert live["data"] == {"mode": "unsafe"}  # warn mode leaves the drift the preview showed
    await env.stop()
