"""``ApplyOptions``: everything besides the objects that shapes one staged apply (``manager.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kustomize_controller.apply.detect_only import DriftPolicy
from kustomize_controller.apply.drift import IgnoreRule
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.selectors import (
    EXCLUSION_SELECTOR,
    FORCE_SELECTOR,
    IF_NOT_PRESENT_SELECTOR,
    Selector,
)
from kustomize_controller.apply.staging import GroupKind
from kustomize_controller.apply.takeover import CleanupOptions


@dataclass(frozen=True)
class ApplyOptions:
    force: bool = False
    exclusion_selector: Selector = field(default_factory=lambda: dict(EXCLUSION_SELECTOR))
    if_not_present_selector: Selector = field(default_factory=lambda: dict(IF_NOT_PRESENT_SELECTOR))
    force_selector: Selector = field(default_factory=lambda: dict(FORCE_SELECTOR))
    cleanup: CleanupOptions | None = field(default_factory=CleanupOptions)
    custom_stage_kinds: frozenset[GroupKind] = frozenset()
    ignore_rules: tuple[IgnoreRule, ...] = ()
    wait_interval: float = 2.0
    wait_timeout: float = 60.0
    migrate_api_version: bool = False  # feature gate MigrateAPIVersion (writes in phase A, see docs)
    detect_only: DriftPolicy | None = None  # drift-detection: warn (module contract)
    # Objects expected to exist (the previous inventory). ``None``: GET every object first, as upstream.
    # Otherwise an object not in it is dry-run first, and read only if the dry-run shows it exists.
    expected: frozenset[ObjRef] | None = None
    # The labels every object of the set carries (``selectors.owner_labels``). With ``expected`` and a
    # ``VerifiedApplies``, the expected objects of a large group (one kind in one namespace) that the memory
    # can prove are read with one metadata-only list selected by them, not one GET each (``plan.py``).
    owner: Mapping[str, str] | None = None
