"""The scenarios of the fault-injection tests: what a user does, step by step, with a bounded wait for the
controller between steps. Each runs in its own namespace (``run.env``) and starts its controller(s) with
``run.start()``. Waits tolerate a crash in between: a restarted controller must get there too."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

from kustomize_controller.api.drift import DRIFT_DETECTION_ANNOTATION
from kustomize_controller.apply.selectors import NAME_LABEL, NAMESPACE_LABEL, PRUNE_KEY
from kustomize_controller.conversion.webhook import SECRET_NAME
from kustomize_controller.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from tests.integration.controller.conftest import KS_API, condition
from tests.integration.controller.manifests import configmap, deployment, kustomization
from tests.integration.controller.test_sops import SOPS_DATA
from tests.integration.faults.harness import FINALIZATION_FAULTS, LEASE_FAULTS, Scenario, ScenarioRun, until
from tests.integration.faults.oracle import KINDS, State

GROUP = "kustomize.toolkit.fluxcd.io"
V1BETA2 = f"{GROUP}/v1beta2"
RECONCILED = "t-1"  # the requestedAt token of scenarios that ask for a reconcile (a fixed value: compared)


async def create(run: ScenarioRun) -> None:
    env = run.env
    artifact = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b", {"x": "1"}),
                                  "web.yaml": deployment("web")})
    await run.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=artifact["revision"])


async def revision(run: ScenarioRun) -> None:
    env = run.env
    first = await env.publish({"a.yaml": configmap("a", {"v": "1"}), "b.yaml": configmap("b"),
                               "web.yaml": deployment("web")})
    await run.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=first["revision"])
    second = await env.publish({"a.yaml": configmap("a", {"v": "2"}), "c.yaml": configmap("c"),
                                "web.yaml": deployment("web", image="nginx:1.28")})
    await env.wait_ready(revision=second["revision"])


def deletion(policy: str) -> Scenario:
    async def drive(run: ScenarioRun) -> None:
        env = run.env
        artifact = await env.publish({"a.yaml": configmap("a"), "b.yaml": configmap("b")})
        await run.start()
        await env.create(env.kustomization(targetNamespace=env.namespace, deletionPolicy=policy))
        await env.wait_ready(revision=artifact["revision"])
        await env.delete_ks()
        await env.wait_gone(within=45)

    return Scenario(f"delete-{policy.lower()}", drive)


async def dependencies(run: ScenarioRun) -> None:
    env = run.env
    artifact = await env.publish({"a/cm.yaml": configmap("a"), "b/cm.yaml": configmap("b"),
                                  "c/cm.yaml": configmap("c")})
    await run.start()
    ns = env.namespace
    await env.create(env.kustomization("c", targetNamespace=ns, path="./c", dependsOn=[{"name": "b"}]))
    await env.create(env.kustomization("b", targetNamespace=ns, path="./b", dependsOn=[{"name": "a"}]))
    await env.create(env.kustomization("a", targetNamespace=ns, path="./a"))
    for name in ("a", "b", "c"):
        await env.wait_ready(name, revision=artifact["revision"], within=45)


async def health(run: ScenarioRun) -> None:
    """A health wait (released from its worker, the default) that ends when the Deployment rolls out."""
    env = run.env
    server = env.server
    server.cluster.simulate_workloads = False  # (an earlier run of the test switched it on)
    artifact = await env.publish({"web.yaml": deployment("web"), "cm.yaml": configmap("a")})
    await run.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, wait=True, timeout="2m"))

    async def waiting() -> bool:
        return condition(await env.get_ks(), "Ready") == ("Unknown", "Progressing") and \
            await env.exists("apps/v1", "Deployment", "web")

    await until(waiting, what="health check running")
    server.cluster.simulate_workloads = True  # the Deployment controller: rolled out, from now on
    server.resync_workload_status(env.namespace)
    await env.wait_ready(revision=artifact["revision"])


async def drift_warn(run: ScenarioRun) -> None:
    env = run.env
    artifact = await env.publish({"kustomization.yaml": kustomization("web.yaml", "cm.yaml"),
                                  "web.yaml": deployment("web"), "cm.yaml": configmap("settings")})
    await run.start()
    ks = env.kustomization(targetNamespace=env.namespace)
    ks["metadata"]["annotations"] = {DRIFT_DETECTION_ANNOTATION: "warn"}
    await env.create(ks)
    await env.wait_ready(revision=artifact["revision"])
    # a hot-fix, as `kubectl scale` writes it: kept and reported in warn mode
    await env.client.patch("apps/v1", "Deployment", "web", env.namespace, {"spec": {"replicas": 3}},
                           patch_type="merge", field_manager="kubectl-scale")
    await env.request_reconcile(token=RECONCILED)
    await env.wait_handled(RECONCILED, within=45)


async def sops(run: ScenarioRun) -> None:
    env = run.env
    key = (SOPS_DATA / "keys" / "age.txt").read_bytes()
    await env.client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "sops-age", "namespace": env.namespace},
                             "data": {"identity.agekey": base64.b64encode(key).decode()}})
    artifact = await env.publish({"secret.yaml": (SOPS_DATA / "algorithms" / "age.yaml").read_text(),
                                  "cm.yaml": configmap("a")})
    await run.start()
    await env.create(env.kustomization(targetNamespace=env.namespace, decryption={
        "provider": "sops", "secretRef": {"name": "sops-age"}}))
    await env.wait_ready(revision=artifact["revision"])


async def handover(run: ScenarioRun) -> None:
    """Two controllers with leader election; the leader dies (crash runs) in the middle of the rollouts and
    the standby takes the lease over once it expires."""
    env = run.env
    first = await env.publish({"a.yaml": configmap("a", {"v": "1"}), "b.yaml": configmap("b")})
    await run.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=first["revision"], within=45)
    second = await env.publish({"a.yaml": configmap("a", {"v": "2"}), "c.yaml": configmap("c")})
    await env.wait_ready(revision=second["revision"], within=45)


HOLD = "example.com/hold"  # a finalizer of another controller's, which the scenario itself removes


def held_configmap(name: str) -> str:
    """A ConfigMap that terminates only when the scenario lets it (its finalizer ``HOLD``)."""
    return configmap(name).replace("metadata:\n", f"metadata:\n  finalizers:\n    - {HOLD}\n", 1)


def _waiting(run: ScenarioRun, name: str) -> bool:
    """Whether a live controller of the run deleted the ConfigMap ``name`` and then read it again: it waits
    for it to terminate (``delete_all`` reads before it deletes, ``wait_for_termination`` after)."""
    alive = {i.user for i in run.alive()}
    deleted: set[str] = set()
    for record in run.env.server.requests.select(resource="configmaps", namespace=run.env.namespace, name=name):
        if record.user not in alive or record.status >= 400:
            continue
        if record.verb == "delete":
            deleted.add(record.user)
        elif record.verb == "get" and record.user in deleted:
            return True
    return False


def finalization(policy: str) -> Scenario:
    """A Kustomization deleted with ``deletionPolicy`` ``policy`` after a person took one of its objects
    over (our owner labels removed by hand); another object is excluded from pruning by its annotation.
    With ``WaitForTermination`` one object terminates only when a finalizer of someone else's is removed:
    the scenario removes it once a live controller waits for it, noting whether the Kustomization was
    still there (held by its finalizer) at that moment — a restarted controller must wait again, not
    release the Kustomization while what it deleted still terminates."""
    waits = policy == "WaitForTermination"

    async def drive(run: ScenarioRun) -> None:
        env = run.env
        ns = env.namespace
        files = {"a.yaml": configmap("a"), "b.yaml": configmap("b", {"x": "1"}), "c.yaml": configmap("c"),
                 "web.yaml": deployment("web"), "hand.yaml": configmap("hand"),
                 "keep.yaml": configmap("keep", annotations={PRUNE_KEY: "disabled"})}
        if waits:
            files["held.yaml"] = held_configmap("held")
        artifact = await env.publish(files)
        await run.start()
        await env.create(env.kustomization(targetNamespace=ns, deletionPolicy=policy))
        await env.wait_ready(revision=artifact["revision"])
        await env.client.patch("v1", "ConfigMap", "hand", ns,  # `kubectl label cm hand <our labels>-`
                               {"metadata": {"labels": {NAME_LABEL: None, NAMESPACE_LABEL: None}}},
                               patch_type="merge", field_manager="kubectl-label")
        run.mark("finalize")
        await env.delete_ks()
        if waits:
            async def waiting() -> bool:  # (or the Kustomization is gone: then nothing waits any more)
                return _waiting(run, "held") or not await env.exists(KS_API, "Kustomization", "app")

            await until(waiting, what="a controller waits for the held ConfigMap to terminate")
            run.checkpoint("waiting")  # a point without a write: the wait (``fin@waiting`` crashes here)
            await until(waiting, what="a live controller waits for the held ConfigMap to terminate")
            try:
                ks = await env.get_ks()
                run.facts["@held-while-terminating"] = ks["metadata"].get("finalizers")
            except NotFoundError:
                run.facts["@held-while-terminating"] = None
            await env.client.patch("v1", "ConfigMap", "held", ns, {"metadata": {"finalizers": None}},
                                   patch_type="merge")
        await env.wait_gone(within=45)

    async def facts(run: ScenarioRun) -> State:
        return dict(run.facts)

    return Scenario(f"finalize-{policy.lower()}", drive, faults=FINALIZATION_FAULTS, phase="finalize",
                    checkpoints=("waiting",) if waits else (), extra=facts)


SLOW_WRITE = 0.3  # seconds: below lease duration − renew deadline, as a write's latency must be


async def handover_apply(run: ScenarioRun) -> None:
    """Two controllers with leader election; the leader's writes of the managed objects are slow, so that
    a lease fault (``lease@j``, ``lease-deleted@j``) lands in the middle of its apply of revision 2; a
    revision 3 (every object changed, one pruned that revision 1 had, one that revision 2 added, and a new
    one) follows at once. Whoever leads must end with
    revision 3 everywhere: the old leader's writes must not undo the new one's."""
    env = run.env

    def files(version: str, names: str) -> dict[str, str]:
        return {f"{n}.yaml": configmap(n, {"v": version}) for n in names}

    first = await env.publish(files("1", "abcde"))
    await run.start()
    await env.create(env.kustomization(targetNamespace=env.namespace))
    await env.wait_ready(revision=first["revision"], within=45)
    leader = run.live()
    env.server.client_faults.hold(leader.user, path=r"/configmaps/", writes_only=True, seconds=SLOW_WRITE)
    run.mark("apply")
    await env.publish(files("2", "abcdeg"))

    async def applying() -> bool:
        return any(cm.get("data") == {"v": "2"} for cm in await env.client.list("v1", "ConfigMap", env.namespace))

    await until(applying, what="revision 2 being applied")
    third = await env.publish(files("3", "abcdf"))
    await env.wait_ready(revision=third["revision"], within=45)


async def fencing(run: ScenarioRun) -> State:
    """The writes of the first leader that the API server stored after the first write of another
    controller: none (the old leader stops before the new one starts, and its last request on the wire
    lands within the margin; ``runtime/leader.py``)."""
    first, others = run.instances[0].user, {i.user for i in run.instances[1:]}
    after: list[str] = []
    others_began = False
    for user, what in run.writes_landed():
        others_began = others_began or user in others
        if others_began and user == first:
            after.append(what)
    return {"@old-leader-writes-after-new-leader": after}


LEADER_ELECTION: dict[str, Any] = {
    "enable_leader_election": True,
    "leader_election_lease_duration": timedelta(seconds=3),
    "leader_election_renew_deadline": timedelta(seconds=2),
    "leader_election_retry_period": timedelta(milliseconds=200),
}

CREATE = Scenario("create", create)
REVISION = Scenario("revision", revision)
DELETE = deletion("Delete")
ORPHAN = deletion("Orphan")
DEPENDENCIES = Scenario("dependencies", dependencies)
HEALTH = Scenario("health", health)
DRIFT_WARN = Scenario("drift-warn", drift_warn)
SOPS = Scenario("sops", sops)
HANDOVER = Scenario("handover", handover, standby=True, settings=LEADER_ELECTION)
HANDOVER_APPLY = Scenario("handover-apply", handover_apply, standby=True, settings=LEADER_ELECTION,
                          faults=LEASE_FAULTS, phase="apply", extra=fencing)
FINALIZE_WAIT = finalization("WaitForTermination")
FINALIZE_ORPHAN = finalization("Orphan")



async def webhook(run: ScenarioRun) -> None:
    """The conversion webhook issues its certificate and points the CRD at itself; a user creates a
    Kustomization through v1beta2 (converted by that webhook), retrying while no webhook answers (after
    a crash, until the restarted controller has pointed the CRD at itself)."""
    env = run.env
    artifact = await env.publish({"a.yaml": configmap("a")})
    await run.start(webhook_addr="127.0.0.1:0", webhook_url="auto")
    old = {"apiVersion": V1BETA2, "kind": "Kustomization", "metadata": {"name": "app", "namespace": env.namespace},
           "spec": {"interval": "10m", "prune": True, "validation": "client", "targetNamespace": env.namespace,
                    "sourceRef": {"kind": "GitRepository", "name": "repo"}}}

    async def created() -> bool:
        crd = await env.client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"kustomizations.{GROUP}")
        if crd["spec"].get("conversion", {}).get("strategy") != "Webhook":
            return False  # not pointed at a webhook yet: the server's own conversion would lose fields
        try:
            await env.create(old)
        except AlreadyExistsError:
            return True  # an earlier attempt was stored
        except KubeError:
            return False  # conversion webhook unreachable
        return True

    await until(created, what="create through v1beta2")
    await env.wait_ready(revision=artifact["revision"], within=45)


async def webhook_facts(run: ScenarioRun) -> State:
    """The certificate Secret (its random keys left out), whether the CRD trusts its CA, and whether the
    Kustomization reads through v1beta2 (the CRD points at a live webhook)."""
    env = run.env
    try:
        secret = await env.client.get("v1", "Secret", SECRET_NAME, env.namespace)
    except NotFoundError:
        return {"@webhook": None}
    crd = await env.client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"kustomizations.{GROUP}")
    config = crd["spec"].get("conversion", {}).get("webhook", {}).get("clientConfig", {})
    trusted = base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(config.get("caBundle", ""))
    try:
        readable = (await env.client.get(V1BETA2, "Kustomization", "app", env.namespace))["apiVersion"] == V1BETA2
    except KubeError:
        readable = False
    return {"@webhook": {"type": secret.get("type"), "keys": sorted(secret.get("data") or {}),
                         "labels": (secret["metadata"].get("labels") or {}), "crd_trusts_ca": trusted,
                         "v1beta2_readable": readable}}


WEBHOOK = Scenario("webhook", webhook, kinds=tuple(k for k in KINDS if k[1] != "Secret"), extra=webhook_facts)
