"""The corpus: each case a source revision (or a few) plus a Kustomization, and what happens to it.

A case is an async function of a ``Side`` (``harness.py``); it runs once per controller, at the same time,
in namespaces of its own. It only does what a user or source-controller would do — publish revisions,
create objects and Kustomizations, annotate, delete — then waits until the Kustomization settles and takes
a checkpoint. Everything compared is collected by the harness.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .harness import Case, CaseFn, Side, applied, attempted, handled, reason

REPO_ROOT = Path(__file__).resolve().parent.parent
SOPS = REPO_ROOT.parent / "shared" / "reference" / "testdata" / "sops"

CASES: list[Case] = []


def case(name: str, title: str, *, profile: str = "default", covers: tuple[str, ...] = (), timing: bool = False) -> Any:
    def register(fn: CaseFn) -> CaseFn:
        CASES.append(Case(name=name, title=title, run=fn, profile=profile, covers=covers, timing=timing))
        return fn
    return register


# ------------------------------------------------------------------------------------------ manifests


def dump(*docs: Mapping[str, Any]) -> str:
    return "---\n".join(yaml.safe_dump(dict(d), sort_keys=False) for d in docs)


def meta(name: str, namespace: str | None = None, *, labels: Mapping[str, str] | None = None,
         annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if namespace:
        out["namespace"] = namespace
    if labels:
        out["labels"] = dict(labels)
    if annotations:
        out["annotations"] = dict(annotations)
    return out


def configmap(name: str, namespace: str | None = None, data: Mapping[str, str] | None = None,
              **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, namespace, **kw),
            "data": dict(data if data is not None else {"key": "value"})}


def secret(name: str, namespace: str | None = None, data: Mapping[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta(name, namespace, **kw), "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}}


def service(name: str, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, namespace, **kw),
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}], "selector": {"app": name}}}


def deployment(name: str, namespace: str | None = None, *, replicas: int = 0, image: str = "ghcr.io/example/app:1.0",
               **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name, namespace, **kw),
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": image,
                                                           "ports": [{"containerPort": 8080}]}]}}}}


def kustomization_file(**fields: Any) -> str:
    return dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", **fields})


# ----------------------------------------------------------------------------- generation and overlays


@case("generated", "a plain directory: kustomization.yaml generated, a sub-directory with its own",
      covers=("generated kustomization.yaml",))
async def generated(s: Side) -> None:
    await s.publish({
        "app/cm.yaml": dump(configmap("one", s.ns), configmap("two", s.ns)),
        "app/svc.yml": dump(service("web", s.ns)),
        "app/nested/kustomization.yaml": kustomization_file(resources=["cm.yaml"], namespace=s.ns),
        "app/nested/cm.yaml": dump(configmap("nested")),
        "app/README.md": "not YAML, not read\n",
    }, step=1)
    await s.kustomization("app", path="./app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("prune", "a revision drops objects: pruned, except one annotated `prune: disabled`",
      covers=("prune", "kustomize.toolkit.fluxcd.io/prune: disabled"))
async def prune(s: Side) -> None:
    keep = {"kustomize.toolkit.fluxcd.io/prune": "disabled"}
    await s.publish({"cms.yaml": dump(configmap("stays", s.ns), configmap("goes", s.ns),
                                      configmap("kept", s.ns, annotations=keep), service("svc", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("first")
    await s.publish({"cms.yaml": dump(configmap("stays", s.ns, {"key": "changed"}))}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    await s.checkpoint("pruned")


@case("missing-source", "the sourceRef names no GitRepository", covers=("source not found",))
async def missing_source(s: Side) -> None:
    await s.kustomization("app", sourceRef={"kind": "GitRepository", "name": "nowhere"})
    await s.settle("app", until=reason("ArtifactFailed"))
    await s.checkpoint("failed")


@case("build-failure", "kustomization.yaml lists a file that is not there", covers=("kustomize build failure",))
async def build_failure(s: Side) -> None:
    await s.publish({"kustomization.yaml": kustomization_file(resources=["cm.yaml", "missing.yaml"]),
                     "cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")



@case("kustomization-file", "an existing kustomization.yaml: resources, a configMapGenerator, labels",
      covers=("path", "kustomization.yaml"))
async def kustomization_file_case(s: Side) -> None:
    await s.publish({
        "deploy/kustomization.yaml": kustomization_file(
            namespace=s.ns, resources=["svc.yaml"], labels=[{"pairs": {"team": "blue"}}],
            configMapGenerator=[{"name": "settings", "literals": ["mode=fast", "level=3"]}]),
        "deploy/svc.yaml": dump(service("web")),
    }, step=1)
    await s.kustomization("app", path="./deploy")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("patches", "`spec.patches`: a strategic merge patch and a JSON 6902 patch with a label selector",
      covers=("patches",))
async def patches(s: Side) -> None:
    await s.publish({"app.yaml": dump(deployment("web", s.ns, labels={"tier": "front"}),
                                      configmap("one", s.ns, labels={"tier": "front"}),
                                      configmap("two", s.ns))}, step=1)
    await s.kustomization("app", patches=[
        {"patch": f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {s.ns}\n"
                  "spec:\n  replicas: 0\n"
                  "  template:\n    metadata:\n      annotations:\n        patched: strategic\n"},
        {"patch": '[{"op": "add", "path": "/data/patched", "value": "json6902"}]',
         "target": {"kind": "ConfigMap", "labelSelector": "tier=front"}},
    ])
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("images", "`spec.images` merged with the kustomization.yaml's own entry (v1.9.4), a digest",
      covers=("images",))
async def images(s: Side) -> None:
    await s.publish({
        "kustomization.yaml": kustomization_file(
            resources=["deploy.yaml"], images=[{"name": "ghcr.io/example/app", "newTag": "1.1"}]),
        "deploy.yaml": dump(deployment("web", s.ns), deployment("worker", s.ns, image="ghcr.io/example/worker:1")),
    }, step=1)
    await s.kustomization("app", images=[
        {"name": "ghcr.io/example/app", "newName": "registry.example.com/app", "newTag": "2.0"},
        {"name": "ghcr.io/example/worker",
         "digest": "sha256:8d4ae5a1e9c7e1f6e7f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4"},
    ])
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


COMPONENT = kustomization_file(apiVersion="kustomize.config.k8s.io/v1alpha1", kind="Component",
                               labels=[{"pairs": {"component": "added"}}])


@case("components", "`spec.components`, one of them missing with `ignoreMissingComponents`",
      covers=("components", "ignoreMissingComponents"))
async def components(s: Side) -> None:
    await s.publish({"app/kustomization.yaml": kustomization_file(resources=["cm.yaml"]),
                     "app/cm.yaml": dump(configmap("one", s.ns)),
                     "components/labels/kustomization.yaml": COMPONENT}, step=1)
    await s.kustomization("app", path="./app", components=["../components/labels", "../components/absent"],
                          ignoreMissingComponents=True)
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("components-missing", "a missing component without `ignoreMissingComponents`: the build fails",
      covers=("components",))
async def components_missing(s: Side) -> None:
    await s.publish({"app/kustomization.yaml": kustomization_file(resources=["cm.yaml"]),
                     "app/cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", path="./app", components=["../components/absent"])
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("target-namespace", "`targetNamespace`: a Namespace in the build and objects without one",
      covers=("targetNamespace",))
async def target_namespace(s: Side) -> None:
    target = s.namespace_name("target")
    s.namespaces.append(target)
    await s.publish({"ns.yaml": dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target}}),
                     "cm.yaml": dump(configmap("one"), configmap("two", "elsewhere")),
                     "sa.yaml": dump({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app"}})},
                    step=1)
    await s.kustomization("app", targetNamespace=target)
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("name-prefix-suffix", "`namePrefix`/`nameSuffix` with a generated ConfigMap a Deployment refers to",
      covers=("namePrefix", "nameSuffix"))
async def name_prefix_suffix(s: Side) -> None:
    deploy = deployment("web", s.ns)
    deploy["spec"]["template"]["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "settings"}}]
    await s.publish({"kustomization.yaml": kustomization_file(
        resources=["deploy.yaml"], configMapGenerator=[{"name": "settings", "namespace": s.ns,
                                                        "literals": ["a=b"]}]),
        "deploy.yaml": dump(deploy)}, step=1)
    await s.kustomization("app", namePrefix="pre-", nameSuffix="-suf")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("common-metadata", "`commonMetadata` labels and annotations, overriding a manifest's own",
      covers=("commonMetadata",))
async def common_metadata(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns, labels={"team": "red", "keep": "me"},
                                               annotations={"note": "original"}), service("web", s.ns))}, step=1)
    await s.kustomization("app", commonMetadata={"labels": {"team": "blue", "env": "test"},
                                                 "annotations": {"note": "common", "owner": "platform"}})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("build-metadata", "`buildMetadata: [originAnnotations]`", covers=("buildMetadata",))
async def build_metadata(s: Side) -> None:
    await s.publish({"base/kustomization.yaml": kustomization_file(resources=["cm.yaml"]),
                     "base/cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", path="./base", buildMetadata=["originAnnotations"])
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("new-revision", "a second revision changes, adds and keeps objects", covers=("revision change",))
async def new_revision(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("same", s.ns), configmap("changes", s.ns, {"v": "1"}))}, step=1)
    await s.kustomization("app", annotations={"event.toolkit.fluxcd.io/team": "blue"})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("first")
    await s.publish({"cm.yaml": dump(configmap("same", s.ns), configmap("changes", s.ns, {"v": "2"}),
                                     configmap("added", s.ns))}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    await s.checkpoint("second")


@case("namespace-and-rbac", "a Namespace, a ClusterRole with ':' in its name and bindings in one revision",
      covers=("staged apply", "inventory RBAC names"))
async def namespace_and_rbac(s: Side) -> None:
    target = s.namespace_name("made")
    s.namespaces.append(target)
    role = s.names.add(f"conformance:reader-{s.id}", "<clusterrole>")
    await s.publish({"all.yaml": dump(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "readers:all", "namespace": target},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": target}]},
        configmap("inside", target))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("crd-and-cr", "a CustomResourceDefinition and a custom resource of it in one revision",
      covers=("CRD and CR in one revision",))
async def crd_and_cr(s: Side) -> None:
    group = widget_group(s)
    await s.publish({"crd.yaml": dump(widget_crd(group)),
                     "cr.yaml": dump({"apiVersion": f"{group}/v1", "kind": "Widget",
                                      "metadata": {"name": "first", "namespace": s.ns}, "spec": {"size": 3}})},
                    step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


# ------------------------------------------------------------------------------------- post-build


@case("postbuild-inline", "`postBuild.substitute`: defaults, escapes, a number quoted by hand",
      covers=("postBuild.substitute",))
async def postbuild_inline(s: Side) -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: " + s.ns + "\n"
            "data:\n  region: ${region:=eu-west-1}\n  literal: $${kept}\n  bare: $notavar\n"
            "  count: \"${count}\"\n  upper: ${name^^}\n  quoted: '\"${number}\"'\n")
    await s.publish({"cm.yaml": text}, step=1)
    await s.kustomization("app", postBuild={"substitute": {"name": "settings", "count": "three", "number": "4"}})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("postbuild-number", "a substituted number where the schema wants a string: the API server refuses it",
      covers=("postBuild type", "dry-run failure without a reason"))
async def postbuild_number(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("settings", s.ns, {"count": "${count}"}))}, step=1)
    await s.kustomization("app", postBuild={"substitute": {"count": "3"}})
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("postbuild-from", "`substituteFrom` a ConfigMap and a Secret, an optional one missing, inline wins",
      covers=("postBuild.substituteFrom", "optional"))
async def postbuild_from(s: Side) -> None:
    await s.create(configmap("vars", s.ns, {"color": "blue", "size": "large", "multi": "a\nb"}))
    await s.create(secret("secret-vars", s.ns, {"password": "hunter2", "size": "small"}))
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: " + s.ns + "\n"
            "data:\n  color: ${color}\n  size: ${size}\n  password: ${password}\n  multi: ${multi}\n"
            "  mode: ${mode}\n")
    await s.publish({"cm.yaml": text}, step=1)
    await s.kustomization("app", postBuild={
        "substitute": {"mode": "inline"},
        "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}, {"kind": "Secret", "name": "secret-vars"},
                           {"kind": "ConfigMap", "name": "absent", "optional": True}]})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("postbuild-from-missing", "`substituteFrom` a Secret that does not exist, not optional",
      covers=("postBuild.substituteFrom",))
async def postbuild_from_missing(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("app", s.ns, {"v": "${v}"}))}, step=1)
    await s.kustomization("app", postBuild={"substituteFrom": [{"kind": "Secret", "name": "absent"}]})
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("postbuild-strict", "a variable without a value in strict mode (the default)", covers=("postBuild strict",))
async def postbuild_strict(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("app", s.ns, {"v": "${known}", "w": "${unknown}"}))}, step=1)
    await s.kustomization("app", postBuild={"substitute": {"known": "yes"}})
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("postbuild-disabled", "a resource labelled `substitute: disabled` keeps its `${...}`; `Always` strategy",
      covers=("kustomize.toolkit.fluxcd.io/substitute: disabled", "substituteStrategy"))
async def postbuild_disabled(s: Side) -> None:
    await s.publish({"cm.yaml": dump(
        configmap("raw", s.ns, {"v": "${kept}"}, annotations={"kustomize.toolkit.fluxcd.io/substitute": "disabled"}),
        configmap("defaulted", s.ns, {"v": "${missing:=fallback}"}))}, step=1)
    await s.kustomization("app", postBuild={"substituteStrategy": "Always"})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


# ------------------------------------------------------------------------------------------ SOPS


def _sops_key_secret(s: Side, name: str, files: Mapping[str, Path]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": s.ns},
            "data": {key: base64.b64encode(path.read_bytes()).decode() for key, path in files.items()}}


@case("sops-age", "SOPS with an age key: an encrypted Secret and encrypted generator sources",
      covers=("decryption age", "secretGenerator files/envs"))
async def sops_age(s: Side) -> None:
    await s.create(_sops_key_secret(s, "sops-keys", {"identity.agekey": SOPS / "keys" / "age.txt"}))
    await s.publish({
        "secret.yaml": (SOPS / "algorithms" / "age.yaml").read_text(),
        "kustomization.yaml": kustomization_file(resources=["secret.yaml"], secretGenerator=[
            {"name": "from-env", "envs": ["env.env"]}, {"name": "from-file", "files": ["file.txt"]}]),
        "env.env": (SOPS / "envs" / "env.env").read_text(),
        "file.txt": (SOPS / "files" / "file.txt").read_text(),
    }, step=1)
    await s.kustomization("app", targetNamespace=s.ns,
                          decryption={"provider": "sops", "secretRef": {"name": "sops-keys"}})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("sops-pgp", "SOPS with an OpenPGP key", covers=("decryption OpenPGP",))
async def sops_pgp(s: Side) -> None:
    await s.create(_sops_key_secret(s, "sops-keys", {"pgp.asc": SOPS / "keys" / "pgp.asc"}))
    await s.publish({"secret.yaml": (SOPS / "algorithms" / "pgp.yaml").read_text()}, step=1)
    await s.kustomization("app", targetNamespace=s.ns,
                          decryption={"provider": "sops", "secretRef": {"name": "sops-keys"}})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("sops-wrong-key", "SOPS with an age key that is not a recipient", covers=("decryption failure",))
async def sops_wrong_key(s: Side) -> None:
    await s.create(_sops_key_secret(s, "sops-keys", {"identity.agekey": SOPS / "keys" / "age-global.txt"}))
    await s.publish({"secret.yaml": (SOPS / "algorithms" / "age.yaml").read_text()}, step=1)
    await s.kustomization("app", targetNamespace=s.ns,
                          decryption={"provider": "sops", "secretRef": {"name": "sops-keys"}})
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("sops-no-decryption", "an encrypted Secret without `spec.decryption`", covers=("SOPS guard",))
async def sops_no_decryption(s: Side) -> None:
    await s.publish({"secret.yaml": (SOPS / "algorithms" / "age.yaml").read_text(),
                     "cm.yaml": dump(configmap("plain", s.ns))}, step=1)
    await s.kustomization("app", targetNamespace=s.ns)
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


# ---------------------------------------------------------------------------------- dependencies


@case("depends-on-ready", "`dependsOn` a Kustomization that becomes ready later; when the dependent runs again",
      covers=("dependsOn ready", "dependency requeue"), timing=True)
async def depends_on_ready(s: Side) -> None:
    await s.publish({"base/cm.yaml": dump(configmap("base", s.ns)), "app/cm.yaml": dump(configmap("app", s.ns))},
                    step=1)
    await s.publish({}, source="base-src", step="base-empty")
    await s.remove_artifact("base-src")
    await s.kustomization("base", path="./base", sourceRef={"kind": "GitRepository", "name": "base-src"})
    await s.kustomization("app", path="./app", dependsOn=[{"name": "base"}])
    await s.settle("app", until=reason("DependencyNotReady"))
    await s.checkpoint("waiting")
    # right after one of the dependent's polls, the dependency's source gets its artifact
    await s.wait(lambda: _after_a_reconcile(s, "app"), within=30, what="a poll of app")
    await s.publish({"base/cm.yaml": dump(configmap("base", s.ns)), "app/cm.yaml": dump(configmap("app", s.ns))},
                    source="base-src", step=1)
    await s.settle("base", until=applied(s.revision(1)))
    base_ready = s.reconcile_ends("base")[-1]
    await s.settle("app", until=applied(s.revision(1)))
    app_done = [t for t in s.reconcile_ends("app") if t >= base_ready]
    latency = (app_done[0] - base_ready) if app_done else None
    s.record.requeue["dependent after its dependency is ready"] = [
        "no reconcile" if latency is None else "immediate" if latency < 1.5 else "next poll"]
    await s.checkpoint("ready")


async def _after_a_reconcile(s: Side, name: str) -> bool:
    import time
    ends = s.reconcile_ends(name)
    return bool(ends) and time.monotonic() - ends[-1] < 0.6


@case("depends-on-not-ready", "`dependsOn` a Kustomization that does not exist: polled every --requeue-dependency",
      covers=("dependsOn not ready",), timing=True)
async def depends_on_not_ready(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("app", s.ns))}, step=1)
    await s.kustomization("app", dependsOn=[{"name": "absent"}])
    await s.settle("app", until=reason("DependencyNotReady"))
    await s.time_requeues("app", label="while the dependency is missing", seconds=14,
                          candidates={"requeue-dependency": 4, "interval": 3600})
    await s.checkpoint("waiting")


@case("depends-on-ready-expr", "`dependsOn[].readyExpr`: one true, one false",
      covers=("dependsOn readyExpr",))
async def depends_on_ready_expr(s: Side) -> None:
    await s.publish({"base/cm.yaml": dump(configmap("base", s.ns)), "a/cm.yaml": dump(configmap("a", s.ns)),
                     "b/cm.yaml": dump(configmap("b", s.ns))}, step=1)
    await s.kustomization("base", path="./base")
    await s.settle("base", until=applied(s.revision(1)))
    await s.kustomization("yes", path="./a", dependsOn=[{
        "name": "base", "readyExpr": "dep.status.lastAppliedRevision == self.status.lastAttemptedRevision || "
                                     "dep.metadata.name == 'base'"}])
    await s.kustomization("no", path="./b", dependsOn=[{
        "name": "base", "readyExpr": "dep.metadata.labels['tier'] == 'none'"}])
    await s.settle("yes", until=applied(s.revision(1)))
    await s.settle("no", until=reason("DependencyNotReady"))
    await s.checkpoint("settled")


@case("ready-expr-invalid", "a `readyExpr` that does not compile: terminal", covers=("readyExpr compile error",))
async def ready_expr_invalid(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("app", s.ns))}, step=1)
    await s.kustomization("base", path="./")
    await s.settle("base", until=applied(s.revision(1)))
    await s.kustomization("app", dependsOn=[{"name": "base", "readyExpr": "dep.status.("}])
    await s.settle("app", until=reason("InvalidCELExpression"))
    await s.checkpoint("stalled")


# ------------------------------------------------------------------------------------ health


def widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {
                                   "type": "object", "properties": {
                                       "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                       "status": {"type": "object",
                                                  "x-kubernetes-preserve-unknown-fields": True}}}}}]},
    }


def widget_group(s: Side) -> str:
    """A group of this case and side, so that each case's Widget CRD is its own."""
    return s.names.add(f"{s.case.name}.{s.id}.conformance.test", "<group>")


async def _widgets(s: Side, *pending: tuple[str, dict[str, Any]]) -> str:
    """The Widget CRD of this side (installed by the test, as a platform team would), its group; then the
    ``pending`` widgets (name, status) created by the test with that status, so that they are not ready when
    the Kustomization first applies them (a custom resource without status counts as ready)."""
    group = widget_group(s)
    await s.create(widget_crd(group))

    async def established() -> bool:
        crd = await s.kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"widgets.{group}")
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    await s.wait(established, within=30, what="the Widget CRD established")
    for name, status in pending:
        await s.create(widget(group, name, s.ns))
        await s.patch_status(f"{group}/v1", "Widget", name, status)
    return group


def widget(group: str, name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name, "namespace": namespace},
            "spec": {"size": 1}}


PROGRESSING = {"observedGeneration": 1, "conditions": [
    {"type": "Ready", "status": "False", "reason": "Progressing", "message": "starting",
     "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1},
    {"type": "Reconciling", "status": "True", "reason": "Progressing", "message": "starting",
     "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}


def _healthy_unknown(obj: dict[str, Any]) -> bool:
    from .harness import condition
    healthy = condition(obj, "Healthy") or {}
    return healthy.get("status") == "Unknown"


def _ready_condition(status: str, reason_: str, message: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason_, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}


@case("health-checks", "`healthChecks` on a custom resource that becomes Ready while the controller waits",
      covers=("healthChecks", "timeout"))
async def health_checks(s: Side) -> None:
    group = await _widgets(s, ("first", PROGRESSING))
    await s.publish({"w.yaml": dump(widget(group, "first", s.ns)), "cm.yaml": dump(configmap("one", s.ns))},
                    step=1)
    await s.kustomization("app", timeout="2m", healthChecks=[
        {"apiVersion": f"{group}/v1", "kind": "Widget", "name": "first", "namespace": s.ns}])
    await s.settle("app", until=_healthy_unknown, finished=False)
    await s.checkpoint("waiting")
    await s.patch_status(f"{group}/v1", "Widget", "first", {
        "observedGeneration": 1, "conditions": [_ready_condition("True", "Succeeded", "ready")]})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("healthy")


@case("health-check-timeout", "`healthChecks` on a custom resource that never becomes ready: `timeout` (30s)",
      covers=("healthChecks timeout",))
async def health_check_timeout(s: Side) -> None:
    group = await _widgets(s, ("stuck", PROGRESSING))
    await s.publish({"w.yaml": dump(widget(group, "stuck", s.ns))}, step=1)
    await s.kustomization("app", timeout="30s", healthChecks=[
        {"apiVersion": f"{group}/v1", "kind": "Widget", "name": "stuck", "namespace": s.ns}])
    await s.settle("app", until=reason("HealthCheckFailed"), within=150)
    await s.checkpoint("failed")


@case("health-check-stalled", "`healthChecks` on a custom resource that reports Stalled: fails early",
      covers=("healthChecks fail-fast",))
async def health_check_stalled(s: Side) -> None:
    group = await _widgets(s, ("broken", PROGRESSING))
    await s.publish({"w.yaml": dump(widget(group, "broken", s.ns))}, step=1)
    await s.kustomization("app", timeout="2m", healthChecks=[
        {"apiVersion": f"{group}/v1", "kind": "Widget", "name": "broken", "namespace": s.ns}])
    await s.settle("app", until=_healthy_unknown, finished=False)
    await s.patch_status(f"{group}/v1", "Widget", "broken", {"observedGeneration": 1, "conditions": [
        {"type": "Stalled", "status": "True", "reason": "Broken", "message": "it broke",
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
    await s.settle("app", until=reason("HealthCheckFailed"))
    await s.checkpoint("failed")


@case("wait", "`wait: true` over ConfigMaps, a Service and a Deployment with 0 replicas", covers=("wait",))
async def wait_case(s: Side) -> None:
    await s.publish({"all.yaml": dump(configmap("one", s.ns), service("web", s.ns), deployment("web", s.ns))},
                    step=1)
    await s.kustomization("app", wait=True, timeout="2m")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("health-check-exprs", "`healthCheckExprs` for a custom kind: in progress, then current",
      covers=("healthCheckExprs",))
async def health_check_exprs(s: Side) -> None:
    group = await _widgets(s, ("first", {"phase": "Pending"}))
    await s.publish({"w.yaml": dump(widget(group, "first", s.ns))}, step=1)
    await s.kustomization("app", wait=True, timeout="2m", healthCheckExprs=[{
        "apiVersion": f"{group}/v1", "kind": "Widget", "inProgress": "status.phase == 'Pending'",
        "failed": "status.phase == 'Failed'", "current": "status.phase == 'Running'"}])
    await s.settle("app", until=_healthy_unknown, finished=False)
    await s.checkpoint("waiting")
    await s.patch_status(f"{group}/v1", "Widget", "first", {"phase": "Running"})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("healthy")


@case("health-check-exprs-failed", "`healthCheckExprs` whose `failed` expression holds", covers=("healthCheckExprs",))
async def health_check_exprs_failed(s: Side) -> None:
    group = await _widgets(s, ("first", {"phase": "Starting"}))
    await s.publish({"w.yaml": dump(widget(group, "first", s.ns))}, step=1)
    await s.kustomization("app", wait=True, timeout="2m", healthCheckExprs=[{
        "apiVersion": f"{group}/v1", "current": "status.phase == 'Running'",
        "failed": "status.phase == 'Failed'"}])
    await s.settle("app", until=_healthy_unknown, finished=False)
    await s.patch_status(f"{group}/v1", "Widget", "first", {"phase": "Failed"})
    await s.settle("app", until=reason("HealthCheckFailed"))
    await s.checkpoint("failed")


@case("health-check-exprs-invalid", "a `healthCheckExprs` expression that does not compile: terminal",
      covers=("healthCheckExprs compile error",))
async def health_check_exprs_invalid(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", wait=True, healthCheckExprs=[{
        "apiVersion": "example.com/v1", "kind": "Thing", "current": "status.ready =="}])
    await s.settle("app", until=reason("InvalidCELExpression"))
    await s.checkpoint("stalled")


def job(name: str, namespace: str) -> dict[str, Any]:
    # managedBy: the kube-controller-manager's Job controller leaves it alone; the test plays the Job's controller
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(name, namespace),
            "spec": {"managedBy": "conformance.test/external", "backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "run", "image": "ghcr.io/example/job:1"}]}}}}


def _job_status(outcome: str) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    if outcome == "Complete":
        return {"startTime": now, "completionTime": now, "succeeded": 1, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now, "lastProbeTime": now},
            {"type": "Complete", "status": "True", "lastTransitionTime": now, "lastProbeTime": now}]}
    return {"startTime": now, "failed": 1, "conditions": [
        {"type": t, "status": "True", "reason": "BackoffLimitExceeded",
         "message": "Job has reached the specified backoff limit", "lastTransitionTime": now, "lastProbeTime": now}
        for t in ("FailureTarget", "Failed")]}


@case("job", "a Job with `wait: true`: waited for until it completes", covers=("Job health",))
async def job_case(s: Side) -> None:
    await s.publish({"job.yaml": dump(job("migrate", s.ns))}, step=1)
    await s.kustomization("app", wait=True, timeout="2m")
    await s.settle("app", until=_healthy_unknown, finished=False)
    await s.checkpoint("running")
    await s.patch_status("batch/v1", "Job", "migrate", _job_status("Complete"))
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("complete")


@case("job-failed", "a Job with `wait: true` that fails", covers=("Job health",))
async def job_failed(s: Side) -> None:
    await s.publish({"job.yaml": dump(job("migrate", s.ns))}, step=1)
    await s.kustomization("app", wait=True, timeout="2m")
    await s.settle("app", until=_healthy_unknown, finished=False)
    await s.patch_status("batch/v1", "Job", "migrate", _job_status("Failed"))
    await s.settle("app", until=reason("HealthCheckFailed"))
    await s.checkpoint("failed")


# ------------------------------------------------------------------------------------------ apply


@case("force-immutable", "`force: true` and an immutable field changed: the object is recreated",
      covers=("force",))
async def force_immutable(s: Side) -> None:
    await s.publish({"cm.yaml": dump({**configmap("frozen", s.ns, {"v": "1"}), "immutable": True})}, step=1)
    await s.kustomization("app", force=True)
    await s.settle("app", until=applied(s.revision(1)))
    await s.publish({"cm.yaml": dump({**configmap("frozen", s.ns, {"v": "2"}), "immutable": True})}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    await s.checkpoint("recreated")


@case("immutable-without-force", "an immutable field changed without `force`: the dry-run fails",
      covers=("immutable field error",))
async def immutable_without_force(s: Side) -> None:
    await s.publish({"cm.yaml": dump({**configmap("frozen", s.ns, {"v": "1"}), "immutable": True})}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.publish({"cm.yaml": dump({**configmap("frozen", s.ns, {"v": "2"}), "immutable": True})}, step=2)
    await s.settle("app", until=attempted(s.revision(2)))
    await s.checkpoint("failed")


@case("force-annotation", "`kustomize.toolkit.fluxcd.io/force: enabled` on one object", covers=("force annotation",))
async def force_annotation(s: Side) -> None:
    forced = {"kustomize.toolkit.fluxcd.io/force": "enabled"}
    await s.publish({"cm.yaml": dump({**configmap("frozen", s.ns, {"v": "1"}, annotations=forced),
                                      "immutable": True})}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.publish({"cm.yaml": dump({**configmap("frozen", s.ns, {"v": "2"}, annotations=forced),
                                      "immutable": True})}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    await s.checkpoint("recreated")


@case("dry-run-failure", "an object the API server rejects: the dry-run fails, nothing of its stage applied",
      covers=("apply failure",))
async def dry_run_failure(s: Side) -> None:
    bad = service("web", s.ns)
    bad["spec"]["type"] = "Bogus"
    await s.publish({"all.yaml": dump(configmap("one", s.ns), bad)}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=attempted(s.revision(1)))
    s.watch_ref("v1", "ConfigMap", "one", s.ns)
    await s.checkpoint("failed")


SSA = "kustomize.toolkit.fluxcd.io/ssa"


@case("ssa-ignore", "`ssa: Ignore`: an existing object is left alone, and not pruned", covers=("ssa: Ignore",))
async def ssa_ignore(s: Side) -> None:
    await s.create(configmap("theirs", s.ns, {"owner": "someone else"}))
    await s.publish({"cm.yaml": dump(configmap("theirs", s.ns, {"owner": "flux"}, annotations={SSA: "Ignore"}),
                                     configmap("ours", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")
    await s.publish({"cm.yaml": dump(configmap("ours", s.ns))}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    s.watch_ref("v1", "ConfigMap", "theirs", s.ns)
    await s.checkpoint("pruned")


@case("ssa-if-not-present", "`ssa: IfNotPresent`: created when absent, never changed once there",
      covers=("ssa: IfNotPresent",))
async def ssa_if_not_present(s: Side) -> None:
    await s.create(configmap("existing", s.ns, {"v": "theirs"}))
    once = {SSA: "IfNotPresent"}
    await s.publish({"cm.yaml": dump(configmap("existing", s.ns, {"v": "flux"}, annotations=once),
                                     configmap("created", s.ns, {"v": "1"}, annotations=once))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.publish({"cm.yaml": dump(configmap("existing", s.ns, {"v": "flux"}, annotations=once),
                                     configmap("created", s.ns, {"v": "2"}, annotations=once))}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    await s.checkpoint("second")


@case("ssa-merge", "`ssa: Merge` keeps a kubectl edit; the default takes it over and reverts it",
      covers=("ssa: Merge", "managed-fields takeover"))
async def ssa_merge(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("merged", s.ns, annotations={SSA: "Merge"}),
                                     configmap("overridden", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    for name in ("merged", "overridden"):
        await s.kube.patch("v1", "ConfigMap", name, s.ns,
                           {"metadata": {"labels": {"edited": "by-hand"}}, "data": {"key": "edited", "extra": "x"}},
                           patch_type="merge", field_manager="kubectl-edit")
    await s.request_reconcile("app", "after-edit")
    await s.settle("app", until=handled("after-edit"))
    await s.checkpoint("reconciled")


@case("reconcile-disabled", "`reconcile: disabled` on a manifest: skipped, and an existing object kept",
      covers=("kustomize.toolkit.fluxcd.io/reconcile: disabled",))
async def reconcile_disabled(s: Side) -> None:
    await s.create(configmap("hands-off", s.ns, {"v": "live"}))
    await s.publish({"cm.yaml": dump(configmap("hands-off", s.ns, {"v": "desired"},
                                               labels={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}),
                                     configmap("managed", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("drift-correction", "an edit by another manager and a deleted object: corrected on the next reconcile",
      covers=("drift detection",))
async def drift_correction(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("edited", s.ns, {"v": "desired"}), configmap("deleted", s.ns),
                                     configmap("untouched", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.kube.patch("v1", "ConfigMap", "edited", s.ns, {"data": {"v": "hot-fix", "added": "x"}},
                       patch_type="merge", field_manager="hot-fixer")
    await s.kube.delete("v1", "ConfigMap", "deleted", s.ns)
    await s.request_reconcile("app", "after-drift")
    await s.settle("app", until=handled("after-drift"))
    await s.checkpoint("corrected")


@case("spec-ignore", "`spec.ignore`: an ignored field edited by another manager survives",
      covers=("spec.ignore",))
async def spec_ignore(s: Side) -> None:
    await s.publish({"all.yaml": dump(configmap("tuned", s.ns, {"replicas": "1", "mode": "a"}),
                                      configmap("other", s.ns, {"replicas": "1"}))}, step=1)
    await s.kustomization("app", ignore=[{"paths": ["/data/replicas"], "target": {"kind": "ConfigMap",
                                                                                   "name": "tun.*"}}])
    await s.settle("app", until=applied(s.revision(1)))
    for name in ("tuned", "other"):
        await s.kube.patch("v1", "ConfigMap", name, s.ns, {"data": {"replicas": "5"}}, patch_type="merge",
                           field_manager="autoscaler")
    await s.request_reconcile("app", "after-scale")
    await s.settle("app", until=handled("after-scale"))
    await s.checkpoint("reconciled")


# ---------------------------------------------------------------------------------- prune, deletion


@case("prune-disabled-spec", "`prune: false`: a dropped object stays", covers=("prune: false",))
async def prune_false(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("stays", s.ns), configmap("dropped", s.ns))}, step=1)
    await s.kustomization("app", prune=False)
    await s.settle("app", until=applied(s.revision(1)))
    await s.publish({"cm.yaml": dump(configmap("stays", s.ns))}, step=2)
    await s.settle("app", until=applied(s.revision(2)))
    await s.checkpoint("second")


async def _deletion(s: Side, **spec: Any) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns), service("svc", s.ns),
                                     configmap("kept", s.ns, annotations={"kustomize.toolkit.fluxcd.io/prune":
                                                                          "disabled"}))}, step=1)
    await s.kustomization("app", **spec)
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")
    await s.delete_ks("app")
    await s.checkpoint("deleted")


@case("deletion-mirror-prune", "deleting a Kustomization with `prune: true` (MirrorPrune)",
      covers=("deletionPolicy MirrorPrune",))
async def deletion_mirror_prune(s: Side) -> None:
    await _deletion(s)


@case("deletion-mirror-no-prune", "deleting a Kustomization with `prune: false` (MirrorPrune): objects stay",
      covers=("deletionPolicy MirrorPrune",))
async def deletion_mirror_no_prune(s: Side) -> None:
    await _deletion(s, prune=False)


@case("deletion-delete", "`deletionPolicy: Delete` with `prune: false`", covers=("deletionPolicy Delete",))
async def deletion_delete(s: Side) -> None:
    await _deletion(s, prune=False, deletionPolicy="Delete")


@case("deletion-orphan", "`deletionPolicy: Orphan` with `prune: true`", covers=("deletionPolicy Orphan",))
async def deletion_orphan(s: Side) -> None:
    await _deletion(s, deletionPolicy="Orphan")


@case("deletion-wait", "`deletionPolicy: WaitForTermination`: an object held by a finalizer for a while",
      covers=("deletionPolicy WaitForTermination",))
async def deletion_wait(s: Side) -> None:
    held = configmap("held", s.ns)
    held["metadata"]["finalizers"] = ["conformance.test/hold"]
    await s.publish({"cm.yaml": dump(held, configmap("free", s.ns))}, step=1)
    await s.kustomization("app", deletionPolicy="WaitForTermination", timeout="1m")
    await s.settle("app", until=applied(s.revision(1)))
    await s.kube.delete("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "app", s.ns)

    async def terminating() -> bool:
        obj = await s.kube.get("v1", "ConfigMap", "held", s.ns)
        return bool(obj["metadata"].get("deletionTimestamp"))

    await s.wait(terminating, within=60, what="ConfigMap held terminating")
    await s.sleep(3)
    await s.checkpoint("waiting")
    await s.kube.patch("v1", "ConfigMap", "held", s.ns, {"metadata": {"finalizers": None}}, patch_type="merge")
    await s.delete_ks("app")
    await s.checkpoint("deleted")


@case("deletion-sa-missing", "deleting a Kustomization whose impersonated ServiceAccount is gone",
      covers=("deletion without the impersonation ServiceAccount",))
async def deletion_sa_missing(s: Side) -> None:
    await _grant(s, "deployer")
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", serviceAccountName="deployer")
    await s.settle("app", until=applied(s.revision(1)))
    await s.kube.delete("v1", "ServiceAccount", "deployer", s.ns)
    await s.delete_ks("app")
    await s.checkpoint("deleted")


@case("suspend", "`suspend: true`: nothing applied until resumed", covers=("suspend",))
async def suspend(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", suspend=True)

    async def finalized() -> bool:
        return "finalizers.fluxcd.io" in ((await s.get_ks("app")).get("metadata") or {}).get("finalizers", [])

    await s.wait(finalized, within=60, what="the finalizer on a suspended Kustomization")
    await s.sleep(4)
    s.watch_ref("v1", "ConfigMap", "one", s.ns)
    await s.checkpoint("suspended")
    await s.patch_ks("app", {"spec": {"suspend": False}})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("resumed")


# ---------------------------------------------------------------------------------- sources, fetch


@case("missing-path", "`path` that is not in the artifact", covers=("kustomization path not found",))
async def missing_path(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", path="./nowhere")
    await s.settle("app", until=reason("ArtifactFailed"))
    await s.checkpoint("failed")


@case("artifact-missing", "a GitRepository without an artifact: polled every --requeue-dependency",
      covers=("artifact not found",), timing=True)
async def artifact_missing(s: Side) -> None:
    await s.publish({}, step="empty")
    await s.remove_artifact()
    await s.kustomization("app")
    await s.settle("app", until=reason("ArtifactFailed"))
    await s.time_requeues("app", label="while the source has no artifact", seconds=14,
                          candidates={"requeue-dependency": 4, "interval": 3600})
    await s.checkpoint("failed")
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("recovered")


@case("artifact-404", "the artifact URL answers 404", covers=("artifact 404",))
async def artifact_404(s: Side) -> None:
    artifact = await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    s.artifacts.unpublish(artifact["path"])
    await s.kustomization("app")
    await s.settle("app", until=reason("ArtifactFailed"))
    await s.checkpoint("failed")


@case("digest-mismatch", "the artifact's bytes do not match `status.artifact.digest`", covers=("digest mismatch",))
async def digest_mismatch(s: Side) -> None:
    artifact = await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    s.artifacts.corrupt(artifact["path"])
    await s.kustomization("app")
    await s.settle("app", until=reason("ArtifactFailed"))
    await s.checkpoint("failed")


@case("oci-source", "an OCIRepository with an origin revision", covers=("sourceRef OCIRepository",
                                                                        "lastAppliedOriginRevision"))
async def oci_source(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, kind="OCIRepository", source="oci", step=1,
                    metadata={"org.opencontainers.image.revision": "main@sha1:0123456789abcdef0123456789abcdef01234567",
                              "org.opencontainers.image.source": "https://github.com/example/app"})
    await s.kustomization("app", sourceRef={"kind": "OCIRepository", "name": "oci"})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("bucket-source", "a Bucket source", covers=("sourceRef Bucket",))
async def bucket_source(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, kind="Bucket", source="bucket", step=1)
    await s.kustomization("app", sourceRef={"kind": "Bucket", "name": "bucket"})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("cross-namespace-source", "a source in another namespace (allowed by default)",
      covers=("sourceRef.namespace",))
async def cross_namespace_source(s: Side) -> None:
    other = await s.make_namespace("sources")
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, namespace=other, step=1)
    await s.kustomization("app", sourceRef={"kind": "GitRepository", "name": "src", "namespace": other})
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("external-artifact-gated", "an ExternalArtifact source while its feature gate is off",
      covers=("ExternalArtifact gate",))
async def external_artifact_gated(s: Side) -> None:
    await s.kustomization("app", sourceRef={"kind": "ExternalArtifact", "name": "ext"})
    await s.settle("app", until=reason("AccessDenied"))
    await s.checkpoint("stalled")


# ------------------------------------------------------------------------------------- impersonation


async def _grant(s: Side, account: str, *, resources: tuple[str, ...] = ("configmaps", "services")) -> None:
    await s.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": s.ns}})
    await s.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": account, "namespace": s.ns},
                    "rules": [{"apiGroups": [""], "resources": list(resources), "verbs": ["*"]}]})
    await s.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": account, "namespace": s.ns},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
                    "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": s.ns}]})


@case("impersonation-allowed", "`serviceAccountName` with RBAC for what it applies", covers=("serviceAccountName",))
async def impersonation_allowed(s: Side) -> None:
    await _grant(s, "deployer")
    await s.publish({"cm.yaml": dump(configmap("one", s.ns), service("web", s.ns))}, step=1)
    await s.kustomization("app", serviceAccountName="deployer")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("impersonation-denied", "`serviceAccountName` without RBAC for a Service it applies",
      covers=("serviceAccountName forbidden",))
async def impersonation_denied(s: Side) -> None:
    await _grant(s, "deployer", resources=("configmaps",))
    await s.publish({"cm.yaml": dump(configmap("one", s.ns), service("web", s.ns))}, step=1)
    await s.kustomization("app", serviceAccountName="deployer")
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("lockdown-default-sa", "`--default-service-account`: impersonated without `serviceAccountName`",
      profile="lockdown", covers=("--default-service-account",))
async def lockdown_default_sa(s: Side) -> None:
    await _grant(s, "tenant")
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("applied")


@case("lockdown-default-sa-missing", "`--default-service-account` naming an account the namespace lacks",
      profile="lockdown", covers=("--default-service-account",))
async def lockdown_default_sa_missing(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("failed")


@case("lockdown-cross-namespace", "`--no-cross-namespace-refs`: a source in another namespace is refused",
      profile="lockdown", covers=("--no-cross-namespace-refs",))
async def lockdown_cross_namespace(s: Side) -> None:
    other = await s.make_namespace("sources")
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, namespace=other, step=1)
    await s.kustomization("app", sourceRef={"kind": "GitRepository", "name": "src", "namespace": other})
    await s.settle("app", until=reason("AccessDenied"))
    await s.checkpoint("stalled")


# ----------------------------------------------------------------------------- watches and timing


@case("requested-at", "`reconcile.fluxcd.io/requestedAt`: handled and recorded", covers=("requestedAt",))
async def requested_at(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=applied(s.revision(1)))
    await s.request_reconcile("app", "2026-01-01T00:00:00.000000000Z")
    await s.settle("app", until=handled("2026-01-01T00:00:00.000000000Z"))
    await s.checkpoint("handled")


@case("config-watch", "a `substituteFrom` ConfigMap labelled for watching changes: reconciled again",
      covers=("reconcile.fluxcd.io/watch",))
async def config_watch(s: Side) -> None:
    await s.create(configmap("vars", s.ns, {"color": "blue"}, labels={"reconcile.fluxcd.io/watch": "Enabled"}))
    await s.publish({"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: " + s.ns +
                     "\ndata:\n  color: ${color}\n"}, step=1)
    await s.kustomization("app", postBuild={"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]})
    await s.settle("app", until=applied(s.revision(1)))
    await s.kube.patch("v1", "ConfigMap", "vars", s.ns, {"data": {"color": "green"}}, patch_type="merge")

    async def recolored() -> bool:
        return (await s.kube.get("v1", "ConfigMap", "app", s.ns))["data"]["color"] == "green"

    await s.wait(recolored, within=60, what="ConfigMap app recoloured")
    await s.settle("app")
    await s.checkpoint("reconciled")


@case("interval", "a successful Kustomization with `interval: 10s`: when it runs again",
      covers=("interval",), timing=True)
async def interval_case(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, step=1)
    await s.kustomization("app", interval="10s")
    await s.settle("app", until=applied(s.revision(1)))
    await s.time_requeues("app", label="after success", seconds=24, candidates={"interval": 10})
    await s.checkpoint("applied")


@case("retry-interval", "a failing Kustomization with `retryInterval: 6s` and `interval: 1h`",
      covers=("retryInterval",), timing=True)
async def retry_interval(s: Side) -> None:
    await s.publish({"cm.yaml": dump(configmap("app", s.ns, {"v": "${unset}"}))}, step=1)
    await s.kustomization("app", retryInterval="6s", postBuild={"substitute": {"known": "x"}})
    await s.settle("app", until=attempted(s.revision(1)))
    await s.time_requeues("app", label="after a failure", seconds=16,
                          candidates={"retryInterval": 6, "interval": 3600, "requeue-dependency": 4})
    await s.checkpoint("failed")


@case("missing-source-retry", "the source does not exist, `retryInterval: 6s`: when it is looked for again",
      covers=("source not found requeue",), timing=True)
async def missing_source_retry(s: Side) -> None:
    await s.kustomization("app", retryInterval="6s", sourceRef={"kind": "GitRepository", "name": "later"})
    await s.settle("app", until=reason("ArtifactFailed"))
    await s.time_requeues("app", label="while the source is missing", seconds=16,
                          candidates={"retryInterval": 6, "requeue-dependency": 4})
    await s.publish({"cm.yaml": dump(configmap("one", s.ns))}, source="later", step=1)
    await s.settle("app", until=applied(s.revision(1)))
    await s.checkpoint("recovered")


@case("built-in-kinds", "a dozen built-in kinds written minimally, one with a field its schema lacks",
      covers=("typed normalisation",))
async def built_in_kinds(s: Side) -> None:
    ns = s.ns
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("db", ns),
           "spec": {"replicas": 0, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db"}},
                                 "spec": {"containers": [{"name": "db", "image": "db:1"}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}
    daemon = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("agent", ns),
              "spec": {"selector": {"matchLabels": {"app": "agent"}},
                       "template": {"metadata": {"labels": {"app": "agent"}},
                                    "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}}}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("nightly", ns),
            "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "OnFailure", "containers": [{"name": "run", "image": "job:1"}]}}}}}}
    plain_service = {"apiVersion": "v1", "kind": "Service", "metadata": meta("plain", ns),
                     "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta("claim", ns),
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta("deny", ns),
              "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta("web", ns),
               "spec": {"rules": [{"host": "web.example.com", "http": {"paths": [
                   {"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "plain", "port": {"number": 80}}}}]}}]}}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": meta("web", ns),
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 1, "maxReplicas": 3}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta("web", ns),
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta("quota", ns),
             "spec": {"hard": {"pods": "10"}}}
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta("limits", ns),
              "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("runner", ns)}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("view", ns),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": ns}]}
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": s.unique("high")}, "value": 1000}
    stray = deployment("stray", ns)
    stray["spec"]["replica"] = 2  # a typo: not in the schema
    await s.publish({"all.yaml": dump(sts, daemon, cron, plain_service, claim, policy, ingress, hpa, pdb, quota,
                                      limits, account, binding, priority, stray)}, step=1)
    await s.kustomization("app")
    await s.settle("app", until=attempted(s.revision(1)))
    await s.checkpoint("applied")
