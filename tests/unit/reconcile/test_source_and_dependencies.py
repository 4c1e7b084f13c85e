from collections.abc import Mapping
from typing import Any

import pytest

from kustomize_controller.api.kustomization import parse_kustomization
from kustomize_controller.reconcile.dependencies import (
    BoolProgram,
    DependencyNotReadyError,
    DependencyTerminalError,
    check_dependencies,
)
from kustomize_controller.reconcile.source import (
    AccessDeniedError,
    SourceAccess,
    SourceNotFoundError,
    SourceReadError,
    get_source,
    origin_revision,
)

ARTIFACT = {
    "path": "p", "url": "http://src/a.tar.gz", "revision": "main@sha1:abc",
    "digest": "sha256:" + "0" * 64, "lastUpdateTime": "2026-01-01T00:00:00Z",
    "metadata": {"org.opencontainers.image.revision": "v1@sha1:def"},
}


def ks(name: str = "app", ns: str = "apps", *, source: dict[str, Any] | None = None,
       depends_on: list[dict[str, Any]] | None = None, status: dict[str, Any] | None = None,
       generation: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "interval": "5m", "prune": True,
        "sourceRef": source or {"kind": "GitRepository", "name": "repo"},
    }
    if depends_on:
        spec["dependsOn"] = depends_on
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": ns, "generation": generation},
        "spec": spec, "status": status or {},
    }


class Reader:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]], fail: bool = False,
                 cached: bool = False) -> None:
        self.objects = objects
        self.fail = fail
        self.cached = cached
        self.calls: list[tuple[str, str, str]] = []

    def reads_cache(self, kind: str) -> bool:
        return self.cached

    async def get_source(self, *, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append((kind, namespace, name))
        if self.fail:
            raise RuntimeError("connection refused")
        return self.objects.get((kind, namespace, name))


def git(ns: str, name: str, artifact: dict[str, Any] | None = ARTIFACT) -> dict[str, Any]:
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": name, "namespace": ns},
            "status": {"artifact": artifact} if artifact else {}}


async def test_source_namespace_defaults_and_origin_revision() -> None:
    reader = Reader({("GitRepository", "apps", "repo"): git("apps", "repo")})
    src = await get_source(parse_kustomization(ks()), reader=reader, access=SourceAccess())
    assert reader.calls == [("GitRepository", "apps", "repo")]
    assert src.get_artifact() is not None
    assert origin_revision(src) == "v1@sha1:def"


async def test_cross_namespace_blocked_with_upstream_message() -> None:
    k = parse_kustomization(ks(source={"kind": "GitRepository", "name": "repo", "namespace": "flux-system"}))
    with pytest.raises(AccessDeniedError) as err:
        await get_source(k, reader=Reader({}), access=SourceAccess(no_cross_namespace_refs=True))
    assert str(err.value) == (
        "can't access 'GitRepository/flux-system/repo', cross-namespace references have been blocked"
    )


async def test_external_artifact_needs_gate() -> None:
    k = parse_kustomization(ks(source={"kind": "ExternalArtifact", "name": "ea"}))
    with pytest.raises(AccessDeniedError, match="ExternalArtifact feature gate is disabled"):
        await get_source(k, reader=Reader({}), access=SourceAccess())


async def test_missing_and_failing_reads() -> None:
    k = parse_kustomization(ks(source={"kind": "OCIRepository", "name": "oci"}))
    missing = r'ocirepositories\.source\.toolkit\.fluxcd\.io "oci" not found'
    with pytest.raises(SourceNotFoundError, match=missing):
        await get_source(k, reader=Reader({}), access=SourceAccess())
    with pytest.raises(SourceReadError, match="unable to get source 'apps/oci': connection refused"):
        await get_source(k, reader=Reader({}, fail=True), access=SourceAccess())


async def test_missing_source_in_the_cache_is_named_by_kind() -> None:
    # controller-runtime's cache reader names the resource by its kind (upstream's default read path);
    # the API server (DirectSourceFetch) by its plural, as in the test above
    k = parse_kustomization(ks(source={"kind": "GitRepository", "name": "repo"}))
    with pytest.raises(SourceNotFoundError) as err:
        await get_source(k, reader=Reader({}, cached=True), access=SourceAccess())
    assert str(err.value) == 'GitRepository.source.toolkit.fluxcd.io "repo" not found'


def ready_dep(name: str, *, revision: str = "main@sha1:abc", generation: int = 1, observed: int = 1,
              ready: str = "True", source: dict[str, Any] | None = None) -> dict[str, Any]:
    status = {
        "observedGeneration": observed,
        "lastAppliedRevision": revision,
        "conditions": [{"type": "Ready", "status": ready, "reason": "R", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }
    return ks(name, source=source, status=status, generation=generation)


def getter(objs: dict[str, dict[str, Any]]):  # type: ignore[no-untyped-def]
    async def get(namespace: str, name: str) -> dict[str, Any]:
        key = f"{namespace}/{name}"
        if key not in objs:
            raise LookupError(f'kustomizations.kustomize.toolkit.fluxcd.io "{name}" not found')
        return objs[key]
    return get


def never_compile(expression: str) -> BoolProgram:
    raise AssertionError("no CEL expected")


async def check(k: dict[str, Any], deps: dict[str, dict[str, Any]], *, revision: str = "main@sha1:abc",
                compiler: Any = never_compile, additive: bool = False) -> None:
    await check_dependencies(parse_kustomization(k), k, revision=revision, get=getter(deps),
                             compile_ready_expr=compiler, additive_cel=additive)


@pytest.mark.parametrize(
    ("dep", "message"),
    [
        (None, "dependency 'apps/infra' not found: "),
        (ready_dep("infra", ready="False"), "dependency 'apps/infra' is not ready"),
        (ready_dep("infra", generation=2, observed=1), "dependency 'apps/infra' is not ready"),
        (ready_dep("infra", revision="main@sha1:old"), "dependency 'apps/infra' revision is not up to date"),
    ],
)
async def test_builtin_readiness_failures(dep: dict[str, Any] | None, message: str) -> None:
    deps = {"apps/infra": dep} if dep else {}
    with pytest.raises(DependencyNotReadyError, match=message):
        await check(ks(depends_on=[{"name": "infra"}]), deps)


async def test_ready_dependency_and_other_source_revision_ignored() -> None:
    other = ready_dep("infra", revision="main@sha1:old", source={"kind": "GitRepository", "name": "other"})
    await check(ks(depends_on=[{"name": "infra"}]), {"apps/infra": other})
    await check(ks(depends_on=[{"name": "infra", "namespace": "apps"}]), {"apps/infra": ready_dep("infra")})


def compiler_for(result: bool, seen: list[Mapping[str, Any]]) -> Any:
    def compile_expr(expression: str) -> BoolProgram:
        if expression == "bad(":
            raise ValueError("Syntax error: missing )")

        def run(variables: Mapping[str, Any]) -> bool:
            seen.append(variables)
            return result
        return run
    return compile_expr


async def test_ready_expr_replaces_builtin_check_unless_additive() -> None:
    seen: list[Mapping[str, Any]] = []
    not_ready = ready_dep("infra", ready="False")
    k = ks(depends_on=[{"name": "infra", "readyExpr": "dep.status.x == 1"}])
    await check(k, {"apps/infra": not_ready}, compiler=compiler_for(True, seen))
    assert set(seen[0]) == {"self", "dep"}
    assert seen[0]["dep"]["metadata"]["name"] == "infra"
    with pytest.raises(DependencyNotReadyError, match=r"is not ready$"):
        await check(k, {"apps/infra": not_ready}, compiler=compiler_for(True, seen), additive=True)
    with pytest.raises(DependencyNotReadyError, match="is not ready according to readyExpr eval"):
        await check(k, {"apps/infra": ready_dep("infra")}, compiler=compiler_for(False, seen))


async def test_ready_expr_compile_error_is_terminal() -> None:
    k = ks(depends_on=[{"name": "infra", "readyExpr": "bad("}])
    with pytest.raises(DependencyTerminalError) as err:
        await check(k, {"apps/infra": ready_dep("infra")}, compiler=compiler_for(True, []))
    # controller-runtime's TerminalError prefixes its text (upstream's condition message carries it)
    assert str(err.value) == "terminal error: failed to evaluate dependency infra: Syntax error: missing )"


async def test_ready_expr_evaluation_error_is_the_message() -> None:
    # upstream returns the evaluation error itself: DependencyNotReady with its text, polled again
    def failing(expression: str) -> BoolProgram:
        def run(variables: Mapping[str, Any]) -> bool:
            raise ValueError(f"failed to evaluate the CEL expression '{expression}': no such key: tier")
        return run

    k = ks(depends_on=[{"name": "infra", "readyExpr": "dep.metadata.labels['tier'] == 'x'"}])
    with pytest.raises(DependencyNotReadyError) as err:
        await check(k, {"apps/infra": ready_dep("infra")}, compiler=failing)
    assert str(err.value) == (
        "failed to evaluate the CEL expression 'dep.metadata.labels['tier'] == 'x'': no such key: tier")
