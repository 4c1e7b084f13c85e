from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.apply.selectors import EXCLUSION_SELECTOR, any_in_metadata, has_owner_labels


def obj(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {}, "annotations": annotations or {}}}


@pytest.mark.parametrize(
    ("o", "matches"),
    [
        (obj(labels={"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}), True),
        (obj(annotations={"kustomize.toolkit.fluxcd.io/reconcile": "DISABLED"}), True),
        (obj(annotations={"kustomize.toolkit.fluxcd.io/ssa": "ignore"}), True),
        (obj(annotations={"kustomize.toolkit.fluxcd.io/ssa": "Merge"}), False),
        (obj(annotations={"kustomize.toolkit.fluxcd.io/reconcile": ""}), False),
        (obj(annotations={"Kustomize.toolkit.fluxcd.io/reconcile": "disabled"}), False),  # keys are exact
        (obj(), False),
        ({}, False),
    ],
)
def test_any_in_metadata(o: dict[str, Any], matches: bool) -> None:
    assert any_in_metadata(o, EXCLUSION_SELECTOR) is matches


def test_owner_labels_need_exact_values() -> None:
    owner = {"kustomize.toolkit.fluxcd.io/name": "a", "kustomize.toolkit.fluxcd.io/namespace": "b"}
    assert has_owner_labels(obj(labels=dict(owner)), owner)
    assert not has_owner_labels(obj(labels={**owner, "kustomize.toolkit.fluxcd.io/name": "A"}), owner)
    assert not has_owner_labels(obj(annotations=dict(owner)), owner)
