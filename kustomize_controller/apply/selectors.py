"""Per-object behaviour selected by labels or annotations (``kustomize.toolkit.fluxcd.io/*``).

Matching follows fluxcd/pkg ``utils.AnyInMetadata``: a selector ``{key: value}`` matches an object when
the object has ``key`` as a *label or annotation* with a non-empty value equal to ``value`` ignoring
case. Keys are exact. A selector with several keys matches when any key matches.

Where each selector is looked up (as upstream):
- exclusion (``reconcile: disabled``, ``ssa: Ignore``): desired **or** live object → ``skipped``;
- if-not-present (``ssa: IfNotPresent``): desired object, only when the live object exists;
- force (``force: enabled``): desired or live object;
- cleanup exclusion (``ssa: Merge``): desired or live object → no managed-fields takeover;
- prune exclusions (``prune: disabled``, ``reconcile: disabled``, ``ssa: Ignore``): live object.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kustomize_controller.apply.objects import Object, get_annotations, get_labels

GROUP = "kustomize.toolkit.fluxcd.io"
NAME_LABEL = f"{GROUP}/name"
NAMESPACE_LABEL = f"{GROUP}/namespace"
RECONCILE_KEY = f"{GROUP}/reconcile"
SSA_KEY = f"{GROUP}/ssa"
FORCE_KEY = f"{GROUP}/force"
PRUNE_KEY = f"{GROUP}/prune"

DISABLED = "disabled"
ENABLED = "enabled"
SSA_OVERRIDE = "Override"
SSA_MERGE = "Merge"
SSA_IF_NOT_PRESENT = "IfNotPresent"
SSA_IGNORE = "Ignore"

Selector = Mapping[str, str]

EXCLUSION_SELECTOR: Selector = MappingProxyType({RECONCILE_KEY: DISABLED, SSA_KEY: SSA_IGNORE})
IF_NOT_PRESENT_SELECTOR: Selector = MappingProxyType({SSA_KEY: SSA_IF_NOT_PRESENT})
FORCE_SELECTOR: Selector = MappingProxyType({FORCE_KEY: ENABLED})
CLEANUP_EXCLUSION_SELECTOR: Selector = MappingProxyType({SSA_KEY: SSA_MERGE})
PRUNE_EXCLUSION_SELECTOR: Selector = MappingProxyType(
    {PRUNE_KEY: DISABLED, RECONCILE_KEY: DISABLED, SSA_KEY: SSA_IGNORE}
)


def any_in_metadata(obj: Object | None, selector: Selector) -> bool:
    """Whether any ``key: value`` of ``selector`` is a label or annotation of ``obj`` (value case-folded)."""
    if not obj or not selector:
        return False
    obj_labels = get_labels(obj)
    obj_annotations = get_annotations(obj)
    for key, want in selector.items():
        for source in (obj_labels, obj_annotations):
            have = source.get(key)
            if isinstance(have, str) and have and have.casefold() == want.casefold():
                return True
    return False


def owner_labels(name: str, namespace: str) -> dict[str, str]:
    """The two labels stamped on every applied object and required on every object we delete."""
    return {NAME_LABEL: name, NAMESPACE_LABEL: namespace}


def has_owner_labels(obj: Object, owner: Mapping[str, str]) -> bool:
    """Whether the object's labels carry every owner label with the exact value (label selector match)."""
    obj_labels = get_labels(obj)
    return all(obj_labels.get(k) == v for k, v in owner.items())
