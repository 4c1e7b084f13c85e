"""The engine's ``ApplyOptions`` for a Kustomization: one function for the apply and its preview.

``apply_options(ks, settings, detect_only=...)`` is the only place a Kustomization and the controller's
apply flags become ``ApplyOptions``. ``ApplyStep`` applies with them and ``preview.py``
(``kustomize-controller diff``) dry-runs with them, so a preview plans what the next apply does: the
same ``spec.force``, ``spec.ignore`` rules, takeover of field managers (kubectl, ``before-first-apply``,
the controller's legacy ``Update`` entry and every ``--override-manager``), custom apply stages,
MigrateAPIVersion, drift policy (``drift-detection: warn``), previous inventory (``expected``: the
objects dry-run before they are read) and owner labels (``owner``: large groups read with a list). A
new option of the apply goes here, or the two drift apart.

Raises ``IgnoreRuleError`` when ``spec.ignore`` holds an invalid rule (the callers report it).
"""

from __future__ import annotations

from dataclasses import dataclass

from kustomize_controller.api.kustomization import Kustomization
from kustomize_controller.apply.detect_only import DriftPolicy
from kustomize_controller.apply.drift import compile_ignore_rules
from kustomize_controller.apply.inventory import inventory_objects
from kustomize_controller.apply.manager import ApplyOptions
from kustomize_controller.apply.selectors import owner_labels
from kustomize_controller.apply.staging import GroupKind
from kustomize_controller.apply.takeover import CleanupOptions, takeover_rules


@dataclass(frozen=True)
class ApplySettings:
    """The controller's flags that shape every apply: ``--override-manager``,
    ``--custom-apply-stage-kinds`` and the gate MigrateAPIVersion."""

    override_managers: tuple[str, ...] = ()
    custom_stage_kinds: frozenset[GroupKind] = frozenset()
    migrate_api_version: bool = False


def apply_options(
    ks: Kustomization, settings: ApplySettings, *, detect_only: DriftPolicy | None = None
) -> ApplyOptions:
    """The options of the next apply of ``ks`` (module contract); ``detect_only`` is its warn-mode policy."""
    return ApplyOptions(
        force=ks.spec.force,
        cleanup=CleanupOptions(field_managers=takeover_rules(override_managers=settings.override_managers)),
        custom_stage_kinds=settings.custom_stage_kinds,
        ignore_rules=compile_ignore_rules(ks.spec.ignore),
        migrate_api_version=settings.migrate_api_version,
        detect_only=detect_only,
        expected=frozenset(o.ref for o in inventory_objects(ks.status.inventory)),
        owner=owner_labels(ks.metadata.name or "", ks.metadata.namespace or ""),
    )
