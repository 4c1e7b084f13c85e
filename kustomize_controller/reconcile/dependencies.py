"""``spec.dependsOn``: is every dependency ready? (upstream ``checkDependencies``).

Contract, for each reference in order (the first failure wins):
- The dependency is read from the API server, bypassing any cache (``dependency '<ns/name>' not
  found: <err>`` when the read fails); the namespace defaults to the dependent's.
- With ``readyExpr``: the CEL expression is compiled (a compile error is terminal: Stalled,
  ``InvalidCELExpression``) and evaluated with ``self`` (this Kustomization) and ``dep`` (the
  dependency) as maps; false → ``dependency '<ns/name>' is not ready according to readyExpr eval``.
  The built-in check below is then skipped unless ``AdditiveCELDependencyCheck`` is on.
- Built-in: the dependency has conditions, ``generation == status.observedGeneration`` and
  Ready=True, else ``dependency '<ns/name>' is not ready``.
- If the dependency uses the same source (kind, name, namespace with defaults), its
  ``lastAppliedRevision`` must equal the current artifact revision, else
  ``dependency '<ns/name>' revision is not up to date``.

A dependent that is not ready is requeued after ``--requeue-dependency`` (the reconciler's job);
with ``EnableDependencyQueueing`` it is also woken as soon as a dependency becomes ready
(``dependents.py``), the poll being the fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kustomize_controller.api.kustomization import Kustomization, parse_kustomization
from kustomize_controller.api.meta import ConditionStatus, ConditionType
from kustomize_controller.reconcile.ordering import reference_key

BoolProgram = Callable[[Mapping[str, Any]], bool]


class KustomizationGetter(Protocol):
    async def __call__(self, namespace: str, name: str) -> dict[str, Any]:
        """Read a Kustomization straight from the API server; raise when it cannot be read."""
        ...


class ReadyExprCompiler(Protocol):
    def __call__(self, expression: str) -> BoolProgram:
        """Compile a boolean CEL expression over ``self`` and ``dep``; raise on a compile error."""
        ...


class DependencyNotReadyError(Exception):
    """A dependency is missing or not ready: retry after ``--requeue-dependency``."""


class DependencyTerminalError(Exception):
    """A ``readyExpr`` does not compile: no retry until the spec changes."""


def _same_source(ks: Kustomization, dep: Kustomization) -> bool:
    dep_ns = dep.spec.source_ref.namespace or dep.metadata.namespace
    own_ns = ks.spec.source_ref.namespace or ks.metadata.namespace
    return (
        dep.spec.source_ref.name == ks.spec.source_ref.name
        and dep_ns == own_ns
        and dep.spec.source_ref.kind == ks.spec.source_ref.kind
    )


def builtin_ready(dep: Kustomization) -> bool:
    if not dep.status.conditions or dep.metadata.generation != dep.status.observed_generation:
        return False
    ready = dep.get_condition(ConditionType.READY)
    return ready is not None and ready.status == ConditionStatus.TRUE


async def check_dependencies(
    ks: Kustomization,
    ks_obj: Mapping[str, Any],
    *,
    revision: str,
    get: KustomizationGetter,
    compile_ready_expr: ReadyExprCompiler,
    additive_cel: bool,
) -> None:
    """Raise ``DependencyNotReadyError`` or ``DependencyTerminalError``; return when all are ready."""
    for ref in ks.spec.depends_on:
        key = reference_key(ref.namespace, ref.name, dependent_namespace=ks.metadata.namespace or "")
        dep_name = str(key)
        try:
            dep_obj = await get(key.namespace, key.name)
        except Exception as err:
            # the API's own message, as upstream wraps the client error (ours prefixes Kind/ns/name)
            detail = getattr(err, "message", "") or str(err)
            raise DependencyNotReadyError(f"dependency '{dep_name}' not found: {detail}") from err
        dep = parse_kustomization(dep_obj)

        if ref.ready_expr:
            try:
                program = compile_ready_expr(ref.ready_expr)
            except Exception as err:
                # upstream wraps it in controller-runtime's TerminalError, whose text says so
                raise DependencyTerminalError(
                    f"terminal error: failed to evaluate dependency {ref.name}: {err}") from err
            try:
                ready = program({"self": dict(ks_obj), "dep": dep_obj})
            except Exception as err:
                # the evaluation error alone, as upstream returns it (DependencyNotReady, polled again)
                raise DependencyNotReadyError(str(err)) from err
            if not ready:
                raise DependencyNotReadyError(
                    f"dependency '{dep_name}' is not ready according to readyExpr eval"
                )
            if not additive_cel:
                continue

        if not builtin_ready(dep):
            raise DependencyNotReadyError(f"dependency '{dep_name}' is not ready")
        if _same_source(ks, dep) and dep.status.last_applied_revision != revision:
            raise DependencyNotReadyError(f"dependency '{dep_name}' revision is not up to date")
