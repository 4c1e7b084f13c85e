from __future__ import annotations

import pytest

from kustomize_controller.testing.apiserver.errors import ApiStatusError
from kustomize_controller.testing.apiserver.selectors import (
    label_selector_from_object,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "n": "5"}


@pytest.mark.parametrize(("text", "matches"), [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("missing!=x", True),
    ("app in (web, db)", True),
    ("app in (db)", False),
    ("app notin (db)", True),
    ("missing notin (db)", True),
    ("app", True),
    ("!app", False),
    ("!missing", True),
    ("app=web,tier=front", True),
    ("app=web,tier=back", False),
    ("app in (web,db),!missing,tier", True),
    ("n>4", True),
    ("n<5", False),
    ("missing>1", False),
    ("example.com/key", False),
])
def test_label_selector_matching(text, matches):
    assert parse_label_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize("text", ["app in (web", "a b c", "app=web,", "=x", "app=has space", "n>x", "-bad-=1"])
def test_label_selector_errors_are_bad_requests(text):
    with pytest.raises(ApiStatusError) as info:
        parse_label_selector(text)
    assert info.value.code == 400


def test_label_selector_from_object():
    selector = label_selector_from_object({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]},
                             {"key": "gone", "operator": "DoesNotExist"}],
    })
    assert selector.matches(LABELS)
    assert not selector.matches({"app": "web"})


def test_field_selectors():
    obj = {"metadata": {"name": "a", "namespace": "ns"}, "type": "Opaque"}
    assert parse_field_selector("metadata.name=a", "ConfigMap").matches(obj)
    assert not parse_field_selector("metadata.name!=a", "ConfigMap").matches(obj)
    assert parse_field_selector("metadata.namespace==ns,metadata.name=a", "ConfigMap").matches(obj)
    assert parse_field_selector("type=Opaque", "Secret").matches(obj)
    assert parse_field_selector("metadata.name=a", "ConfigMap").single_value("metadata.name") == "a"
    with pytest.raises(ApiStatusError) as info:
        parse_field_selector("type=Opaque", "ConfigMap")
    assert info.value.code == 400 and "field label not supported" in info.value.message
