"""Server-side apply: ownership, conflicts, force, removal of fields an applier stops sending, keyed lists."""

from __future__ import annotations

import json

import pytest

from .helpers import APPLY, MERGE, call, cm_path, configmap, deployment, manager_entries

pytestmark = pytest.mark.integration


def apply_params(manager: str, force: bool = False, dry_run: bool = False) -> dict[str, str]:
    params = {"fieldManager": manager}
    if force:
        params["force"] = "true"
    if dry_run:
        params["dryRun"] = "All"
    return params


async def test_apply_creates_and_records_an_apply_manager(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        status, obj = await call(http, "PATCH", cm_path(ns, "ssa"), body=configmap("ssa", {"a": "1"}),
                                 content_type=APPLY, params=apply_params("alice"))
        assert status == 201, obj
        entries = manager_entries(obj)
        assert ("alice", "Apply") in entries
        fields = entries[("alice", "Apply")]["fieldsV1"]
        assert fields["f:data"] == {"f:a": {}}
        assert entries[("alice", "Apply")]["fieldsType"] == "FieldsV1"


async def test_apply_requires_field_manager(cluster):
    async with cluster.session() as http:
        status, body = await call(http, "PATCH", cm_path(cluster.namespace, "nofm"), body=configmap("nofm"),
                                  content_type=APPLY)
        assert (status, body["reason"]) == (422, "Invalid")


async def test_conflict_with_an_update_manager_and_force(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("c", {"k": "v"}),
                   params={"fieldManager": "other-manager"})
        status, body = await call(http, "PATCH", cm_path(ns, "c"), body=configmap("c", {"k": "mine"}),
                                  content_type=APPLY, params=apply_params("applier"))
        assert status == 409
        assert body["reason"] == "Conflict"
        assert body["message"] == ('Apply failed with 1 conflict: conflict with "other-manager" using v1: .data.k')
        assert body["details"]["causes"] == [{"reason": "FieldManagerConflict",
                                              "message": 'conflict with "other-manager" using v1',
                                              "field": ".data.k"}]
        assert "name" not in body["details"] and "kind" not in body["details"]

        status, obj = await call(http, "PATCH", cm_path(ns, "c"), body=configmap("c", {"k": "mine"}),
                                 content_type=APPLY, params=apply_params("applier", force=True))
        assert status == 200
        assert obj["data"]["k"] == "mine"
        entries = manager_entries(obj)
        assert "f:k" in entries[("applier", "Apply")]["fieldsV1"]["f:data"]
        other = entries.get(("other-manager", "Update"))
        assert other is None or "f:k" not in other["fieldsV1"].get("f:data", {})


async def test_same_value_is_shared_not_a_conflict(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "PATCH", cm_path(ns, "sh"), body=configmap("sh", {"k": "v"}), content_type=APPLY,
                   params=apply_params("one"))
        status, obj = await call(http, "PATCH", cm_path(ns, "sh"), body=configmap("sh", {"k": "v"}),
                                 content_type=APPLY, params=apply_params("two"))
        assert status == 200
        entries = manager_entries(obj)
        assert "f:k" in entries[("one", "Apply")]["fieldsV1"]["f:data"]
        assert "f:k" in entries[("two", "Apply")]["fieldsV1"]["f:data"]
        status, body = await call(http, "PATCH", cm_path(ns, "sh"), body=configmap("sh", {"k": "changed"}),
                                  content_type=APPLY, params=apply_params("two"))
        assert status == 409
        assert 'conflict with "one"' in body["message"]


async def test_fields_no_longer_applied_are_removed_unless_owned_elsewhere(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "PATCH", cm_path(ns, "rm"), body=configmap("rm", {"a": "1", "b": "2", "c": "3"}),
                   content_type=APPLY, params=apply_params("owner"))
        await call(http, "PATCH", cm_path(ns, "rm"), body={"data": {"c": "3"}}, content_type=MERGE,
                   params={"fieldManager": "editor"})
        await call(http, "PATCH", cm_path(ns, "rm"), body={"data": {"c": "30"}}, content_type=MERGE,
                   params={"fieldManager": "editor"})
        status, obj = await call(http, "PATCH", cm_path(ns, "rm"), body=configmap("rm", {"a": "1"}),
                                 content_type=APPLY, params=apply_params("owner"))
        assert status == 200, obj
        assert obj["data"] == {"a": "1", "c": "30"}


async def test_labels_removed_when_applier_stops_sending(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "PATCH", cm_path(ns, "lb"), body=configmap("lb", labels={"x": "1", "y": "2"}),
                   content_type=APPLY, params=apply_params("owner"))
        _, obj = await call(http, "PATCH", cm_path(ns, "lb"), body=configmap("lb", labels={"x": "1"}),
                            content_type=APPLY, params=apply_params("owner"))
        assert obj["metadata"]["labels"] == {"x": "1"}


async def test_noop_apply_keeps_resource_version(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, first = await call(http, "PATCH", cm_path(ns, "nop"), body=configmap("nop", {"a": "1"}),
                              content_type=APPLY, params=apply_params("owner"))
        _, second = await call(http, "PATCH", cm_path(ns, "nop"), body=configmap("nop", {"a": "1"}),
                               content_type=APPLY, params=apply_params("owner"))
        assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        _, dry = await call(http, "PATCH", cm_path(ns, "nop"), body=configmap("nop", {"a": "1"}),
                            content_type=APPLY, params=apply_params("owner", dry_run=True))
        assert dry["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_containers_merge_by_name_between_managers(cluster):
    ns = cluster.namespace
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/web"
    async with cluster.session() as http:
        status, obj = await call(http, "PATCH", path, body=deployment("web"), content_type=APPLY,
                                 params=apply_params("base"))
        assert status == 201, obj
        sidecar = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox"}]}}}}
        status, obj = await call(http, "PATCH", path, body=sidecar, content_type=APPLY,
                                 params=apply_params("injector"))
        assert status == 200, obj
        assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["app", "sidecar"]
        fields = manager_entries(obj)[("injector", "Apply")]["fieldsV1"]
        containers = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]
        assert set(containers) == {'k:{"name":"sidecar"}'}
        # the base applier changes its own container: no conflict with the injector
        status, obj = await call(http, "PATCH", path, body=deployment("web", image="nginx:2"), content_type=APPLY,
                                 params=apply_params("base"))
        assert status == 200, obj
        images = {c["name"]: c["image"] for c in obj["spec"]["template"]["spec"]["containers"]}
        assert images == {"app": "nginx:2", "sidecar": "busybox"}
        # the injector stops sending its container: it goes away
        empty = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
        status, obj = await call(http, "PATCH", path, body=empty, content_type=APPLY,
                                 params=apply_params("injector"))
        assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["app"]


async def test_conflict_on_keyed_list_field_names_the_path(cluster):
    ns = cluster.namespace
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/kp"
    async with cluster.session() as http:
        await call(http, "PATCH", path, body=deployment("kp"), content_type=APPLY, params=apply_params("base"))
        status, body = await call(http, "PATCH", path, body=deployment("kp", image="other:1"), content_type=APPLY,
                                  params=apply_params("rival"))
        assert status == 409
        assert body["details"]["causes"][0]["field"] == '.spec.template.spec.containers[name="app"].image'
        assert body["message"].startswith('Apply failed with 1 conflict: conflict with "base": ')


async def test_update_takes_ownership_of_what_it_changes(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "PATCH", cm_path(ns, "up"), body=configmap("up", {"a": "1", "b": "1"}), content_type=APPLY,
                   params=apply_params("applier"))
        status, obj = await call(http, "PATCH", cm_path(ns, "up"), body={"data": {"a": "2"}}, content_type=MERGE,
                                 params={"fieldManager": "kubectl-edit"})
        assert status == 200
        entries = manager_entries(obj)
        assert entries[("kubectl-edit", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}}}
        assert entries[("applier", "Apply")]["fieldsV1"] == {"f:data": {"f:b": {}}}


async def test_managed_fields_can_be_stripped_but_not_by_accident(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, obj = await call(http, "PATCH", cm_path(ns, "mf"), body=configmap("mf", {"a": "1"}), content_type=APPLY,
                            params=apply_params("owner"))
        # leaving managedFields out keeps them
        _, kept = await call(http, "PATCH", cm_path(ns, "mf"), body={"metadata": {"labels": {"x": "1"}}},
                             content_type=MERGE, params={"fieldManager": "labeller"})
        assert manager_entries(kept)[("owner", "Apply")] == manager_entries(obj)[("owner", "Apply")]
        for strip in ([], [{}]):  # both reset (kube-apiserver's isResetManagedFields)
            _, stripped = await call(http, "PATCH", cm_path(ns, "mf"), body={"metadata": {"managedFields": strip}},
                                     content_type=MERGE)
            assert "managedFields" not in stripped["metadata"]


async def test_an_update_after_a_strip_records_no_entry(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("st", {"a": "1"}), params={"fieldManager": "creator"})
        await call(http, "PATCH", cm_path(ns, "st"), body={"metadata": {"managedFields": []}}, content_type=MERGE)
        status, updated = await call(http, "PATCH", cm_path(ns, "st"), body={"data": {"b": "2"}}, content_type=MERGE,
                                     params={"fieldManager": "editor"})
        assert status == 200, updated
        assert updated["data"] == {"a": "1", "b": "2"}
        assert "managedFields" not in updated["metadata"]


async def test_an_apply_after_a_strip_records_before_first_apply(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        await call(http, "POST", cm_path(ns), body=configmap("bfa", {"a": "1", "b": "1"}),
                   params={"fieldManager": "creator"})
        await call(http, "PATCH", cm_path(ns, "bfa"), body={"metadata": {"managedFields": [{}]}}, content_type=MERGE)
        status, conflict = await call(http, "PATCH", cm_path(ns, "bfa"), body=configmap("bfa", {"a": "2"}),
                                      content_type=APPLY, params=apply_params("applier"))
        assert status == 409, conflict
        assert conflict["message"] == ('Apply failed with 1 conflict: conflict with "before-first-apply" using v1: '
                                       ".data.a")
        status, applied = await call(http, "PATCH", cm_path(ns, "bfa"), body=configmap("bfa", {"a": "1"}),
                                     content_type=APPLY, params=apply_params("applier"))
        assert status == 200, applied
        entries = manager_entries(applied)
        assert set(entries) == {("applier", "Apply"), ("before-first-apply", "Update")}
        assert entries[("applier", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}
        assert entries[("before-first-apply", "Update")]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}


async def test_an_update_owns_the_maps_it_creates(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, created = await call(http, "POST", cm_path(ns), body=configmap("dot", {"a": "1"}),
                                params={"fieldManager": "creator"})
        assert manager_entries(created)[("creator", "Update")]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}
        _, labelled = await call(http, "PATCH", cm_path(ns, "dot"), content_type=MERGE,
                                 body={"metadata": {"labels": {"x": "1"}}, "data": {"b": "2"}},
                                 params={"fieldManager": "editor"})
        assert manager_entries(labelled)[("editor", "Update")]["fieldsV1"] == {
            "f:data": {"f:b": {}}, "f:metadata": {"f:labels": {".": {}, "f:x": {}}}}


async def test_invalid_managed_fields_from_a_client_are_ignored(cluster):
    ns = cluster.namespace
    async with cluster.session() as http:
        _, created = await call(http, "POST", cm_path(ns), body=configmap("inv", {"a": "1"}),
                                params={"fieldManager": "creator"})
        for bad in ([{"manager": "x", "operation": "Bogus", "fieldsType": "FieldsV1", "fieldsV1": {}}],
                    [{"manager": "x", "operation": "Update", "fieldsType": "FieldsV2", "fieldsV1": {}}]):
            status, written = await call(http, "PATCH", cm_path(ns, "inv"), content_type=MERGE,
                                         body={"metadata": {"managedFields": bad}})
            assert status == 200, written
            assert written["metadata"]["managedFields"] == created["metadata"]["managedFields"]


async def test_managed_fields_entry_that_is_not_an_object_is_a_decode_error(cluster):
    ns = cluster.namespace
    why = ("json: cannot unmarshal string into Go struct field ObjectMeta.metadata.managedFields of type "
           "v1.ManagedFieldsEntry")
    async with cluster.session() as http:
        _, created = await call(http, "POST", cm_path(ns), body=configmap("inv", {"a": "1"}),
                                params={"fieldManager": "creator"})
        # a patch: the typed decoder refuses the patched object, which the error quotes
        status, refused = await call(http, "PATCH", cm_path(ns, "inv"), content_type=MERGE,
                                     body={"metadata": {"managedFields": ["not an entry"]}})
        assert (status, refused["reason"]) == (422, "Invalid"), refused
        prefix, suffix = ' "" is invalid: patch: Invalid value: ', f": {why}"
        message = refused["message"]
        assert message.startswith(prefix) and message.endswith(suffix), message
        quoted = json.loads(json.loads(message[len(prefix):-len(suffix)]))  # a quoted JSON document
        assert quoted == {**created, "metadata": {**created["metadata"], "managedFields": ["not an entry"]}}
        assert [(c["reason"], c["field"]) for c in refused["details"]["causes"]] == [("FieldValueInvalid", "patch")]
        assert not {"kind", "name", "group"} & set(refused["details"])

        # a body: the same decoder, reported as a request it cannot handle
        body = configmap("inv2")
        body["metadata"]["managedFields"] = ["not an entry"]
        status, refused = await call(http, "POST", cm_path(ns), body=body)
        assert (status, refused["reason"]) == (400, "BadRequest"), refused
        assert refused["message"] == f'ConfigMap in version "v1" cannot be handled as a ConfigMap: {why}'

        status, unchanged = await call(http, "GET", cm_path(ns, "inv"))
        assert unchanged == created


async def test_apply_configuration_may_not_carry_managed_fields(cluster):
    body = configmap("mfx")
    body["metadata"]["managedFields"] = [{"manager": "x", "operation": "Apply"}]
    async with cluster.session() as http:
        status, resp = await call(http, "PATCH", cm_path(cluster.namespace, "mfx"), body=body, content_type=APPLY,
                                  params=apply_params("m"))
        assert (status, resp["reason"], resp["message"]) == (400, "BadRequest", "metadata.managedFields must be nil")
