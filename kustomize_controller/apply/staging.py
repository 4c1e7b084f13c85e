"""Apply stages and the kind order inside a stage (fluxcd/pkg ``ssa`` ``ApplyAllStaged`` / ``sort.go``).

Stages, in order (an object lands in the first that matches):
1. definitions — ``apiextensions.k8s.io/*`` CustomResourceDefinition, ``v1`` Namespace,
   ``rbac.authorization.k8s.io/*`` ClusterRole (kind compared case-insensitively, as upstream);
2. classes — any kind ending in ``Class`` (case-sensitive suffix, as upstream);
3. custom — group/kinds given with ``--custom-apply-stage-kinds``;
4. everything else.
Within a stage objects are sorted by kind rank (the upstream ``ReconcileOrder``: a fixed list first,
unknown kinds in the middle, webhook configurations last), then group, kind, namespace, name.
Sorting is stable and total, so the result does not depend on the build order. Prune uses the
reverse of the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kustomize_controller.apply.objects import Object, ObjRef, api_version

FIRST_KINDS: tuple[str, ...] = (
    "CustomResourceDefinition",
    "Namespace",
    "ClusterRole",
    "ClusterClass",
    "RuntimeClass",
    "PriorityClass",
    "StorageClass",
    "VolumeSnapshotClass",
    "IngressClass",
    "GatewayClass",
    "ClusterRoleBinding",
    "ResourceQuota",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "LimitRange",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
)
LAST_KINDS: tuple[str, ...] = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

_RANK: dict[str, int] = {
    **{kind: i - len(FIRST_KINDS) for i, kind in enumerate(FIRST_KINDS)},
    **{kind: 1 + i for i, kind in enumerate(LAST_KINDS)},
}

GroupKind = tuple[str, str]


def kind_rank(kind: str) -> int:
    """Negative for the well-known first kinds, 0 for unknown kinds, positive for the last kinds."""
    return _RANK.get(kind, 0)


def ref_sort_key(ref: ObjRef) -> tuple[int, str, str, str, str]:
    return (kind_rank(ref.kind), ref.group, ref.kind, ref.namespace, ref.name)


def sort_objects(objects: Iterable[Object]) -> list[Object]:
    return sorted(objects, key=lambda o: ref_sort_key(ObjRef.from_object(o)))


def sort_refs(refs: Iterable[ObjRef], *, reverse: bool = False) -> list[ObjRef]:
    return sorted(refs, key=ref_sort_key, reverse=reverse)


def is_crd(obj: Object) -> bool:
    return str(obj.get("kind", "")).lower() == "customresourcedefinition" and api_version(obj).startswith(
        "apiextensions.k8s.io/"
    )


def is_namespace(obj: Object) -> bool:
    return str(obj.get("kind", "")).lower() == "namespace" and api_version(obj) == "v1"


def is_cluster_role(obj: Object) -> bool:
    return str(obj.get("kind", "")).lower() == "clusterrole" and api_version(obj).startswith(
        "rbac.authorization.k8s.io/"
    )


def is_cluster_definition(obj: Object) -> bool:
    return is_crd(obj) or is_namespace(obj) or is_cluster_role(obj)


def is_class_definition(obj: Object) -> bool:
    return str(obj.get("kind", "")).endswith("Class")


@dataclass(slots=True)
class Stages:
    definitions: list[Object] = field(default_factory=list)
    classes: list[Object] = field(default_factory=list)
    custom: list[Object] = field(default_factory=list)
    rest: list[Object] = field(default_factory=list)


def partition(objects: Sequence[Object], custom_stage_kinds: frozenset[GroupKind] = frozenset()) -> Stages:
    """Split objects into the four stages (each list keeps input order; ``apply_all`` sorts)."""
    stages = Stages()
    for obj in objects:
        ref = ObjRef.from_object(obj)
        if is_cluster_definition(obj):
            stages.definitions.append(obj)
        elif is_class_definition(obj):
            stages.classes.append(obj)
        elif (ref.group, ref.kind) in custom_stage_kinds:
            stages.custom.append(obj)
        else:
            stages.rest.append(obj)
    return stages


def staged_order(objects: Sequence[Object], custom_stage_kinds: frozenset[GroupKind] = frozenset()) -> list[ObjRef]:
    """The order in which ``apply_all_staged`` handles (and reports) ``objects``: stage by stage, sorted."""
    stages = partition(objects, custom_stage_kinds)
    return [ObjRef.from_object(o) for stage in (stages.definitions, stages.classes, stages.custom, stages.rest)
            for o in sort_objects(stage)]


def parse_group_kind_set(value: str) -> frozenset[GroupKind]:
    """Parse ``--custom-apply-stage-kinds``: ``group/Kind,Kind,...`` (no group = core)."""
    result: set[GroupKind] = set()
    if not value:
        return frozenset()
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        group, sep, kind = item.partition("/")
        if not sep:
            group, kind = "", item
        if not kind or "/" in kind:
            raise ValueError(f"invalid group/kind format: {item}")
        result.add((group, kind))
    return frozenset(result)
