"""Preview rendering (pure): server noise out, ignore rules honoured, Secret values masked."""

from __future__ import annotations

from typing import Any

from kustomize_controller.apply.drift import IgnoreRule
from kustomize_controller.apply.objects import ObjRef
from kustomize_controller.apply.preview import MASK, clean, mask_secrets, render_diff

REF = ObjRef(group="", kind="ConfigMap", namespace="ns", name="cfg")


def cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "ns", "resourceVersion": "7", "uid": "u", "generation": 1,
                         "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [{"manager": "m"}], **meta},
            "data": data, "status": {"x": 1}}


def test_clean_removes_server_noise_only() -> None:
    out = clean(cm({"a": "1"}, labels={"l": "v"}))
    assert out == {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cfg", "namespace": "ns", "labels": {"l": "v"}}, "data": {"a": "1"}}


def test_diff_shows_the_changed_field_and_nothing_else() -> None:
    text = render_diff(REF, cm({"a": "1", "b": "same"}, resourceVersion="8"), cm({"a": "2", "b": "same"}))
    assert text.startswith("--- ConfigMap/ns/cfg (live)\n+++ ConfigMap/ns/cfg (merged)\n")
    changed = [line for line in text.splitlines() if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert changed == ["-  a: '1'", "+  a: '2'"]
    assert render_diff(REF, cm({"a": "1"}, resourceVersion="1"), cm({"a": "1"}, resourceVersion="2")) == ""


def test_ignored_paths_are_left_out() -> None:
    rules = (IgnoreRule(paths=("/data/a",)),)
    assert render_diff(REF, cm({"a": "1"}), cm({"a": "2"}), rules) == ""


def test_secret_values_are_masked_and_changes_still_show() -> None:
    live: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"same": "c2FtZQ==", "changed": "b2xk", "gone": "eA=="}}
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                              "data": {"same": "c2FtZQ==", "changed": "bmV3", "added": "eQ=="}}
    before, after = mask_secrets(live, merged)
    assert before["data"] == {"same": MASK, "changed": f"{MASK} (before)", "gone": f"{MASK} (before)"}
    assert after["data"] == {"same": MASK, "changed": f"{MASK} (after)", "added": f"{MASK} (after)"}
    assert live["data"]["changed"] == "b2xk"  # inputs untouched
    text = render_diff(ObjRef(group="", kind="Secret", namespace="", name="s"), live, merged)
    for secret in ("c2FtZQ==", "b2xk", "bmV3", "eA==", "eQ=="):
        assert secret not in text


def test_non_secrets_are_not_masked() -> None:
    a, b = cm({"a": "1"}), cm({"a": "2"})
    assert mask_secrets(a, b) == (a, b)


async def test_dry_run_client_turns_every_write_into_a_dry_run() -> None:
    from kustomize_controller.apply.preview import DryRunClient
    from tests.unit.apply.fakes import FakeClient
    from tests.unit.apply.fakes import cm as fake_cm

    fake = FakeClient()
    fake.seed(fake_cm("a", data={"k": "v"}))
    client = DryRunClient(fake)
    await client.apply(fake_cm("a", data={"k": "w"}), field_manager="m", force=True, dry_run=False)
    await client.delete("v1", "ConfigMap", "a", "default", propagation_policy="Background")
    migrate = [{"op": "replace", "path": "/data", "value": {"k": "x"}}]  # MigrateAPIVersion's patch is a JSON patch
    assert (await client.patch("v1", "ConfigMap", "a", "default", migrate, patch_type="json"))["data"] == {"k": "x"}
    assert fake.writes() == []
    assert [(c.verb, c.dry_run) for c in fake.calls if c.verb != "get"] == [
        ("apply", True), ("delete", True), ("patch", True)]
    assert (await client.get("v1", "ConfigMap", "a", "default"))["data"] == {"k": "v"}


async def test_the_changes_carry_the_live_resource_versions_and_prune_lists_no_object_already_gone() -> None:
    """What the plan's live fingerprint is made of, read by the preview's own GETs; an object already gone
    is nothing prune would delete."""
    from kustomize_controller.apply.manager import ApplyOptions, ResourceManager
    from kustomize_controller.apply.preview import DryRunClient, preview_apply, preview_prune
    from kustomize_controller.apply.prune import StaleObject
    from kustomize_controller.apply.selectors import owner_labels
    from kustomize_controller.runtime.clock import FakeClock
    from tests.unit.apply.fakes import FakeClient
    from tests.unit.apply.fakes import cm as fake_cm

    owner = owner_labels("app", "default")
    fake = FakeClient()
    live = fake.seed(fake_cm("a", data={"k": "v"}, labels=owner))
    stale = fake.seed(fake_cm("old", labels=owner))
    manager = ResourceManager(client=DryRunClient(fake), clock=FakeClock())
    changes = await preview_apply(manager, [fake_cm("a", data={"k": "w"}, labels=owner),
                                            fake_cm("new", labels=owner)], ApplyOptions())
    assert {(c.ref.name, c.action, c.live_version) for c in changes} == {
        ("a", "configured", live["metadata"]["resourceVersion"]), ("new", "created", "")}
    deleted, errors = await preview_prune(fake, [StaleObject(ObjRef("", "ConfigMap", "default", "old"), "v1"),
                                                 StaleObject(ObjRef("", "ConfigMap", "default", "gone"), "v1")],
                                          owner=owner)
    assert errors == ""
    assert [(c.ref.name, c.action, c.live_version) for c in deleted] == [
        ("old", "deleted", stale["metadata"]["resourceVersion"])]
    assert fake.writes() == []
