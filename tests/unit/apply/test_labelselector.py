from __future__ import annotations

import pytest

from kustomize_controller.apply.labelselector import parse_label_selector

LABELS = {"app": "web", "tier": "frontend", "size": "5"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("app=web", True),
        ("app==web", True),
        ("app=api", False),
        ("app!=api", True),
        ("missing!=x", True),
        ("app in (api, web)", True),
        ("app notin (api,web)", False),
        ("missing notin (a)", True),
        ("missing in (a)", False),
        ("app=web,tier=frontend", True),
        ("app=web, tier=backend", False),
        ("size>4", True),
        ("size<5", False),
        ("missing=", False),
    ],
)
def test_matches(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is matches


@pytest.mark.parametrize("selector", ["app in web", "app in (a", "a b", "size>x", "=x", "app,,"])
def test_parse_errors(selector: str) -> None:
    with pytest.raises(ValueError):
        parse_label_selector(selector)
