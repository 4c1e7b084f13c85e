"""The swap both ways: a namespace reconciled by upstream's controller, then by ours, then by upstream's
again, on the same objects; and the CRD question.

1. **Upstream → ours.** Upstream's kustomize-controller reconciles a namespace of Kustomizations that
   cover the corpus' features (prune, patches and images on a Deployment with ``wait``, post-build from a
   ConfigMap, SOPS, ``dependsOn``, ``targetNamespace`` with a Namespace and an RBAC name with ``:``, a CRD
   with its resource, ``ssa: Ignore``/``IfNotPresent``, ``reconcile: disabled`` and a ``spec.ignore``
   path another manager writes). It is stopped and ours started with the same flags. Within one
   ``interval`` every Kustomization must be reconciled by ours and Ready with the same inventory and
   revision; no object may be re-created (same uid) or pruned, and no object written at all (same
   resourceVersion: ours finds nothing to change); every object's managed fields stay as they were (no
   new manager, no field moving: no conflict); no Warning event. The build digest is compared as well:
   the same digest means ours' history entry is upstream's, counted on.
2. **Ours → upstream.** While ours runs, a new revision changes, adds and removes objects, and a new
   Kustomization is created; then ours is stopped and upstream's started: the same checks.
3. **The CRD.** Ours' CRD (v1 storage, old versions served through the conversion webhook) replaces
   upstream's; ours runs and a Kustomization is written in ``v1beta2`` (with ``patchesStrategicMerge`` and
   ``validation``); ours is stopped and upstream's CRD re-applied as Flux would re-apply its
   ``gotk-components.yaml`` (server-side, forced, field manager ``kustomize-controller``); upstream starts.
   Recorded: the CRD's ``storedVersions``, how the object written in ``v1beta2`` reads in ``v1``, that
   upstream reconciles it, what the old versions answer, what ``spec.conversion`` holds and whether
   ``docs/deploy.md``'s reset patch is accepted.

Every check that fails is a line of ``SwapResult.failures``; ``python -m conformance --swap`` prints them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.harness import ControllerProcess
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import ApiError, NotFoundError
from kustomize_controller.testing.artifacts import ArtifactServer, publish_source
from tests.flux import assets as flux_assets
from tests.flux.process import FluxProcess

from .corpus import (
    REPO_ROOT,
    SOPS,
    configmap,
    deployment,
    dump,
    kustomization_file,
    meta,
    service,
    widget_crd,
)
from .harness import KS_API, RUN_LABEL, UPSTREAM, inventory_refs, parse_samples
from .metrics import scrape
from .receiver import EventsReceiver

INTERVAL = 60.0  # every Kustomization's interval: the swap must settle within one
SSA = "kustomize.toolkit.fluxcd.io/ssa"
OUR_CRD = REPO_ROOT / "manifests" / "crd" / "bases" / "kustomize.toolkit.fluxcd.io_kustomizations.yaml"


@dataclass
class ObjectState:
    uid: str
    resource_version: str
    managed: list[tuple[str, str, str, str]]  # manager, operation, subresource, fieldsV1


@dataclass
class Snapshot:
    kustomizations: dict[str, dict[str, Any]]
    objects: dict[str, ObjectState | None]


@dataclass
class SwapResult:
    steps: list[str] = field(default_factory=list)  # what was checked, in order, with timings
    failures: list[str] = field(default_factory=list)
    findings: dict[str, Any] = field(default_factory=dict)  # the CRD question's answers, digests
    seconds: float = 0.0

    def fail(self, message: str) -> None:
        self.failures.append(message)


class Swap:
    def __init__(self, *, kube: KubeClient, kubeconfig: str, artifacts: ArtifactServer, run_id: str,
                 logs: Path) -> None:
        self.kube = kube
        self.kubeconfig = kubeconfig
        self.artifacts = artifacts
        self.ns = f"swap-{run_id}"
        self.target = f"swap-{run_id}-target"
        self.run_id = run_id
        self.logs = logs
        self.group = f"swap-{run_id}.conformance.test"
        self.role = f"conformance:swap-{run_id}"
        self.result = SwapResult()
        self.extra: list[tuple[str, str, str, str]] = []  # objects tracked although no inventory lists them
        self._seq = 0

    # ------------------------------------------------------------------------------------ controllers
    async def _start(self, side: str, *, label: str) -> tuple[FluxProcess | ControllerProcess, EventsReceiver]:
        receiver = EventsReceiver()
        await receiver.start()
        flags = [f"--events-addr={receiver.url}", "--watch-all-namespaces=false", "--requeue-dependency=4s"]
        process: FluxProcess | ControllerProcess
        if side == UPSTREAM:
            process = FluxProcess(binary=flux_assets.binary(flux_assets.KUSTOMIZE_CONTROLLER),
                                  kubeconfig=self.kubeconfig, log_path=self.logs / f"swap-{label}.log",
                                  runtime_namespace=self.ns, args=flags)
        else:
            process = ControllerProcess(kubeconfig=self.kubeconfig, log_path=self.logs / f"swap-{label}.log",
                                        runtime_namespace=self.ns, extra_args=tuple(flags))
        await process.start()
        return process, receiver

    async def _stop(self, process: FluxProcess | ControllerProcess, receiver: EventsReceiver, label: str) -> None:
        code = await process.stop()
        await receiver.stop()
        if code not in (0, None):
            self.result.fail(f"{label}: the controller exited with {code} on SIGTERM")

    # ---------------------------------------------------------------------------------------- setup
    async def _publish(self, source: str, files: Mapping[str, str]) -> str:
        self._seq += 1
        revision = f"main@sha1:{self._seq:040x}"
        artifact = await self.artifacts.publish_files(files, name=f"gitrepository/{self.ns}/{source}",
                                                      revision=revision)
        await publish_source(self.kube, namespace=self.ns, name=source, artifact=artifact)
        return revision

    async def _ks(self, name: str, source: str, **spec: Any) -> None:
        await self.kube.create({
            "apiVersion": KS_API, "kind": "Kustomization",
            "metadata": {"name": name, "namespace": self.ns, "labels": {RUN_LABEL: self.run_id}},
            "spec": {"interval": f"{int(INTERVAL)}s", "prune": True, "path": "./",
                     "sourceRef": {"kind": "GitRepository", "name": source}, **spec}})

    def _plain_files(self, version: int) -> dict[str, str]:
        docs = [configmap("stays", self.ns, {"v": str(version)}), service("web", self.ns)]
        plain_service = {"apiVersion": "v1", "kind": "Service", "metadata": meta("bare", self.ns),
                         "spec": {"ports": [{"port": 80}], "selector": {"app": "bare"}}}
        docs.append(plain_service)
        if version == 1:
            docs.append(configmap("dropped-later", self.ns))
        else:
            docs.append(configmap("added-later", self.ns))
        return {"all.yaml": dump(*docs)}

    async def setup(self) -> None:
        ns = self.ns
        for name in (ns, self.target):
            await self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name, "labels": {RUN_LABEL: self.run_id}}})
        key = base64.b64encode((SOPS / "keys" / "age.txt").read_bytes()).decode()
        await self.kube.create({"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": "sops-keys", "namespace": ns}, "data": {"identity.agekey": key}})
        await self.kube.create(configmap("vars", ns, {"color": "blue"}))
        await self.kube.create(configmap("theirs", ns, {"owner": "someone else"}))
        await self.kube.create(configmap("once", ns, {"v": "theirs"}))
        await self.kube.create(configmap("hands-off", ns, {"v": "live"}))
        self.extra += [("v1", "ConfigMap", ns, n) for n in ("theirs", "once", "hands-off")]

        await self._publish("plain", self._plain_files(1))
        await self._ks("plain", "plain")

        workload = deployment("web", ns, image="ghcr.io/example/app:1.0")
        await self._publish("workload", {"kustomization.yaml": kustomization_file(
            resources=["deploy.yaml"], images=[{"name": "ghcr.io/example/app", "newTag": "1.1"}]),
            "deploy.yaml": dump(workload)})
        await self._ks("workload", "workload", wait=True, timeout="2m",
                       patches=[{"patch": '[{"op": "add", "path": "/metadata/annotations", "value": {"p": "1"}}]',
                                 "target": {"kind": "Deployment"}}],
                       images=[{"name": "ghcr.io/example/app", "newName": "registry.example.com/app"}])

        await self._publish("vars", {"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: painted\n"
                                                f"  namespace: {ns}\ndata:\n  color: ${{color}}\n"})
        await self._ks("vars", "vars", postBuild={"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]})

        await self._publish("secrets", {"secret.yaml": (SOPS / "algorithms" / "age.yaml").read_text()})
        await self._ks("secrets", "secrets", targetNamespace=ns,
                       decryption={"provider": "sops", "secretRef": {"name": "sops-keys"}})

        await self._publish("chain", {"base/cm.yaml": dump(configmap("base", ns)),
                                      "app/cm.yaml": dump(configmap("app", ns))})
        await self._ks("base", "chain", path="./base")
        await self._ks("app", "chain", path="./app", dependsOn=[{"name": "base"}])

        await self._publish("target", {"all.yaml": dump(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.target}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": self.role},
             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
            configmap("inside"), widget_crd(self.group),
            {"apiVersion": f"{self.group}/v1", "kind": "Widget", "metadata": {"name": "first"}, "spec": {"size": 1}})})
        await self._ks("target", "target", targetNamespace=self.target)

        await self._publish("modes", {"all.yaml": dump(
            configmap("theirs", ns, {"owner": "flux"}, annotations={SSA: "Ignore"}),
            configmap("once", ns, {"v": "flux"}, annotations={SSA: "IfNotPresent"}),
            configmap("hands-off", ns, {"v": "desired"}, labels={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}),
            configmap("tuned", ns, {"replicas": "1", "mode": "a"}))})
        await self._ks("modes", "modes", ignore=[{"paths": ["/data/replicas"], "target": {"kind": "ConfigMap",
                                                                                            "name": "tuned"}}])

    # ------------------------------------------------------------------------------------- observing
    async def _kustomizations(self) -> list[dict[str, Any]]:
        return await self.kube.list(KS_API, "Kustomization", self.ns)

    async def snapshot(self) -> Snapshot:
        kss = {}
        refs: set[tuple[str, str, str, str]] = set(self.extra)
        for ks in await self._kustomizations():
            status = ks.get("status") or {}
            kss[ks["metadata"]["name"]] = status
            refs.update(inventory_refs((status.get("inventory") or {}).get("entries") or []))
        objects: dict[str, ObjectState | None] = {}
        for ref in sorted(refs):
            key = "/".join(ref)
            try:
                obj = await self.kube.get(ref[0], ref[1], ref[3], ref[2] or None)
            except NotFoundError:
                objects[key] = None
                continue
            metadata = obj["metadata"]
            managed = sorted((e.get("manager", ""), e.get("operation", ""), e.get("subresource", ""),
                              json.dumps(e.get("fieldsV1"), sort_keys=True))
                             for e in metadata.get("managedFields") or [])
            objects[key] = ObjectState(metadata["uid"], metadata["resourceVersion"], managed)
        return Snapshot(kss, objects)

    async def wait_ready(self, what: str, *, since: float, metrics_url: str, within: float,
                         revisions: Mapping[str, str] | None = None, start: str = "the controller started") -> None:
        """Until every Kustomization was reconciled by the running controller (its reconcile counter) and
        is Ready for its generation (at ``revisions`` when given); a failure when ``within`` passes."""
        deadline = since + within
        last: Any = None
        while True:
            try:
                counts = {labels.get("name"): True for name, labels in parse_samples(await scrape(metrics_url))
                          if name == "gotk_reconcile_duration_seconds_count" and labels.get("namespace") == self.ns}
                pending = []
                for ks in await self._kustomizations():
                    name = ks["metadata"]["name"]
                    status = ks.get("status") or {}
                    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
                    ok = (name in counts and ready.get("status") == "True"
                          and ready.get("observedGeneration") == ks["metadata"]["generation"]
                          and (not revisions or status.get("lastAppliedRevision") == revisions.get(name,
                               status.get("lastAppliedRevision"))))
                    if not ok:
                        pending.append(f"{name}: {ready.get('reason')} {ready.get('message', '')[:200]!r} "
                                       f"(reconciled: {name in counts})")
                if not pending:
                    took = time.monotonic() - since
                    self.result.steps.append(f"{what}: every Kustomization reconciled and Ready {took:.1f}s after "
                                             f"{start} (interval {INTERVAL:.0f}s)")
                    return
                last = pending
            except (ApiError, OSError, RuntimeError) as err:
                last = err
            if time.monotonic() >= deadline:
                self.result.fail(f"{what}: not every Kustomization Ready within {within:.0f}s: {last}")
                return
            await asyncio.sleep(1.0)

    def compare(self, what: str, before: Snapshot, after: Snapshot, *, changed_by_design: set[str] = frozenset()
                ) -> None:
        """Same inventories and revisions; no object re-created, pruned or written; the same managers."""
        for name, status in before.kustomizations.items():
            now = after.kustomizations.get(name)
            if now is None:
                self.result.fail(f"{what}: Kustomization {name} is gone")
                continue
            for key in ("inventory", "lastAppliedRevision", "lastAttemptedRevision"):
                if status.get(key) != now.get(key):
                    self.result.fail(f"{what}: Kustomization {name}: {key} changed: "
                                     f"{status.get(key)} -> {now.get(key)}")
            old, new = status.get("history") or [], now.get("history") or []
            if old and new:
                same = old[0].get("digest") == new[0].get("digest")
                counted = same and len(new) == len(old) and new[0].get("totalReconciliations", 0) > old[0].get(
                    "totalReconciliations", 0)
                self.result.findings.setdefault("digests", {}).setdefault(what, {})[name] = (
                    "same digest, counted on" if counted else "same digest" if same else
                    f"different: {old[0].get('digest')} -> {new[0].get('digest')}")
        for key, state in before.objects.items():
            if key in changed_by_design:
                continue
            now_state = after.objects.get(key)
            if state is None:
                continue
            if now_state is None:
                self.result.fail(f"{what}: {key} was deleted")
                continue
            if now_state.uid != state.uid:
                self.result.fail(f"{what}: {key} was re-created")
            elif now_state.resource_version != state.resource_version:
                moved = sorted(set(now_state.managed) ^ set(state.managed))
                self.result.fail(f"{what}: {key} was written (resourceVersion {state.resource_version} -> "
                                 f"{now_state.resource_version}); managed fields changed: {moved or 'no'}")
            if now_state.managed != state.managed and now_state.uid == state.uid:
                added = sorted(set(now_state.managed) - set(state.managed))
                removed = sorted(set(state.managed) - set(now_state.managed))
                self.result.fail(f"{what}: {key}: field ownership changed: +{added} -{removed}")

    def warnings(self, what: str, receiver: EventsReceiver, since: float) -> None:
        for event in receiver.events:
            if event.at >= since and event.body.get("severity") == "error":
                self.result.fail(f"{what}: Warning event: {event.body.get('reason')}: "
                                 f"{str(event.body.get('message'))[:300]}")

    # ------------------------------------------------------------------------------------------ steps
    async def run(self) -> SwapResult:
        started = time.monotonic()
        await self.setup()
        upstream, receiver = await self._start(UPSTREAM, label="upstream-1")
        try:
            await self.wait_ready("upstream first", since=time.monotonic(), metrics_url=upstream.metrics_url,
                                  within=240)
            # an autoscaler's edit of a field spec.ignore leaves to it: neither controller may revert it
            await self.kube.patch("v1", "ConfigMap", "tuned", self.ns, {"data": {"replicas": "5"}},
                                  patch_type="merge", field_manager="autoscaler")
            await asyncio.sleep(3)  # the last status writes and events
            first = await self.snapshot()
        finally:
            await self._stop(upstream, receiver, "upstream first")

        ours, receiver = await self._start("ours", label="ours")
        try:
            t0 = time.monotonic()
            await self.wait_ready("upstream -> ours", since=t0, metrics_url=ours.metrics_url, within=INTERVAL)
            await asyncio.sleep(3)
            after_ours = await self.snapshot()
            self.compare("upstream -> ours", first, after_ours)
            self.warnings("upstream -> ours", receiver, t0)
            # created while ours runs: a new revision and a new Kustomization
            revision = await self._publish("plain", self._plain_files(2))
            await self._publish("late", {"cm.yaml": dump(configmap("late", self.ns))})
            await self._ks("late", "late")
            await self.wait_ready("ours applies a new revision and a new Kustomization", since=time.monotonic(),
                                  metrics_url=ours.metrics_url, within=120, revisions={"plain": revision},
                                  start="they were published")
            await asyncio.sleep(3)
            second = await self.snapshot()
        finally:
            await self._stop(ours, receiver, "ours")

        upstream, receiver = await self._start(UPSTREAM, label="upstream-2")
        try:
            t0 = time.monotonic()
            await self.wait_ready("ours -> upstream", since=t0, metrics_url=upstream.metrics_url, within=INTERVAL)
            await asyncio.sleep(3)
            self.compare("ours -> upstream", second, await self.snapshot())
            self.warnings("ours -> upstream", receiver, t0)
        finally:
            await self._stop(upstream, receiver, "upstream second")
        await self.crd_question()
        self.result.seconds = time.monotonic() - started
        return self.result

    # --------------------------------------------------------------------------------------- the CRD
    async def _crd(self) -> dict[str, Any]:
        return await self.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                   "kustomizations.kustomize.toolkit.fluxcd.io")

    async def _apply_crd(self, path: Path, manager: str) -> None:
        from .run import apply_crd

        await apply_crd(self.kube, path, manager=manager)

    async def crd_question(self) -> None:
        findings = self.result.findings.setdefault("crd", {})
        upstream_crd = next(iter(flux_assets.crd_files("kustomize.toolkit.fluxcd.io")))
        await self._apply_crd(OUR_CRD, "kustomize-controller-python-install")
        ours, receiver = await self._start("ours", label="ours-crd")
        try:
            # the controller points the CRD's conversion at its webhook
            for _ in range(60):
                crd = await self._crd()
                if (crd["spec"].get("conversion") or {}).get("strategy") == "Webhook":
                    break
                await asyncio.sleep(1)
            findings["served with ours' CRD"] = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
            await self._publish("old", {"deploy.yaml": dump(deployment("old", self.ns))})
            await self.kube.create({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1beta2", "kind": "Kustomization",
                "metadata": {"name": "old", "namespace": self.ns},
                "spec": {"interval": "1m", "path": "./", "prune": True, "validation": "client",
                         "sourceRef": {"kind": "GitRepository", "name": "old"},
                         "patchesStrategicMerge": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                    "metadata": {"name": "old", "namespace": self.ns},
                                                    "spec": {"minReadySeconds": 7}}]}})
            await self.wait_ready("ours with its CRD, an object written in v1beta2", since=time.monotonic(),
                                  metrics_url=ours.metrics_url, within=120, start="it was written")
            written = await self.kube.get(KS_API, "Kustomization", "old", self.ns)
            findings["v1beta2 object read in v1"] = {
                "spec.patches": written["spec"].get("patches"),
                "annotations": sorted(written["metadata"].get("annotations") or {}),
            }
        finally:
            await self._stop(ours, receiver, "ours with its CRD")
        crd = await self._crd()
        findings["storedVersions before the rollback"] = crd.get("status", {}).get("storedVersions")
        # back to upstream: Flux re-applies gotk-components.yaml (server-side, forced, its field manager)
        await self._apply_crd(upstream_crd, "kustomize-controller")
        crd = await self._crd()
        findings["served after upstream's CRD is re-applied"] = [v["name"] for v in crd["spec"]["versions"]
                                                                  if v.get("served")]
        findings["storedVersions after the rollback"] = crd.get("status", {}).get("storedVersions")
        findings["spec.conversion after the rollback"] = crd["spec"].get("conversion")
        try:
            await self.kube.get("kustomize.toolkit.fluxcd.io/v1beta2", "Kustomization", "old", self.ns)
            findings["a v1beta2 read after the rollback"] = "answered"
        except Exception as err:  # the kind is no longer served in that version
            findings["a v1beta2 read after the rollback"] = f"{type(err).__name__}: {str(err)[:200]}"
        upstream, receiver = await self._start(UPSTREAM, label="upstream-crd")
        try:
            t0 = time.monotonic()
            await self.wait_ready("upstream after the CRD rollback", since=t0, metrics_url=upstream.metrics_url,
                                  within=INTERVAL)
            self.warnings("upstream after the CRD rollback", receiver, t0)
            deployed = await self.kube.get("apps/v1", "Deployment", "old", self.ns)
            findings["the v1beta2 patchesStrategicMerge under upstream"] = (
                f"minReadySeconds={deployed['spec'].get('minReadySeconds')}")
        finally:
            await self._stop(upstream, receiver, "upstream after the CRD rollback")
        # docs/deploy.md's reset of the conversion the controller wrote
        try:
            await self.kube.patch("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                  "kustomizations.kustomize.toolkit.fluxcd.io", None,
                                  {"spec": {"conversion": {"strategy": "None", "webhook": None}}}, patch_type="merge")
            findings["docs/deploy.md's conversion reset"] = (await self._crd())["spec"].get("conversion")
        except ApiError as err:
            self.result.fail(f"docs/deploy.md's conversion reset was refused: {err}")
        with contextlib.suppress(ApiError):
            await self.kube.get(KS_API, "Kustomization", "old", self.ns)
