"""ConversionReview handling and the CRD conversion patch (pure)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kustomize_controller.api.crdgen import build_crd
from kustomize_controller.conversion.crd import (
    FIELD_MANAGER,
    conversion_patch,
    default_url,
    service_hosts,
    service_reference,
)
from kustomize_controller.conversion.review import BadReview, answer, review

GROUP = "kustomize.toolkit.fluxcd.io"


def _ks(version: str, ns: str = "apps", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Kustomization", "metadata": {"name": "a", "namespace": ns},
            "spec": {"interval": "5m", "prune": True, "path": "./x",
                     "sourceRef": {"kind": "GitRepository", "name": "r"}, **spec}}


def _request(objects: list[Any], desired: str = f"{GROUP}/v1") -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects}}


def test_converts_every_object_in_order_and_echoes_the_uid() -> None:
    out = review(_request([_ks("v1beta2", validation="client"), _ks("v1alpha1")]))
    assert out["apiVersion"] == "apiextensions.k8s.io/v1" and out["kind"] == "ConversionReview"
    response = out["response"]
    assert response["uid"] == "u-1" and response["result"] == {"status": "Success"}
    assert [o["apiVersion"] for o in response["convertedObjects"]] == [f"{GROUP}/v1"] * 2
    assert "validation" not in response["convertedObjects"][0]["spec"]


def test_one_refused_object_fails_the_review_with_its_message() -> None:
    bad = _ks("v1alpha1", serviceAccount={"name": "x", "namespace": "other"})
    response = review(_request([_ks("v1beta2"), bad]))["response"]
    assert response["result"]["status"] == "Failure"
    assert response["result"]["message"].startswith("Kustomization/apps/a: spec.serviceAccount.namespace:")
    assert "convertedObjects" not in response


@pytest.mark.parametrize("body", [[], {"kind": "Pod"}, {"kind": "ConversionReview", "apiVersion": "x/v1beta1"},
                                  {"kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1"}])
def test_a_body_that_is_not_a_review_v1_is_a_bad_request(body: Any) -> None:
    with pytest.raises(BadReview):
        review(body)


SERVICE = service_reference("kustomize-controller-webhook", "kustomize-system")


def test_the_shipped_crd_declares_no_conversion_the_controller_writes_it() -> None:
    crd = build_crd()
    assert "conversion" not in crd["spec"]
    assert conversion_patch(crd, ca_bundle=b"PEM", target=None) is None  # nothing to point at yet
    patch = conversion_patch(crd, ca_bundle=b"PEM", target={"service": SERVICE})
    assert patch is not None
    conversion = patch["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook" and conversion["webhook"]["conversionReviewVersions"] == ["v1"]
    config = conversion["webhook"]["clientConfig"]
    assert base64.b64decode(config["caBundle"]) == b"PEM"
    assert config["service"] == {"name": "kustomize-controller-webhook", "namespace": "kustomize-system",
                                 "path": "/convert", "port": 443}
    assert service_hosts(SERVICE) == ["kustomize-controller-webhook.kustomize-system.svc",
                                      "kustomize-controller-webhook.kustomize-system.svc.cluster.local"]
    crd["spec"]["conversion"] = conversion
    assert conversion_patch(crd, ca_bundle=b"PEM", target={"service": SERVICE}) is None  # already so: no write
    assert conversion_patch(crd, ca_bundle=b"PEM", target=None) is None  # a stand-by keeps it


def test_crd_patch_switches_between_url_and_service_in_one_write() -> None:
    crd = build_crd()
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                                                    "clientConfig": {"service": SERVICE}}}
    url = default_url("127.0.0.1", 9443)
    assert url == "https://127.0.0.1:9443/convert"
    patch = conversion_patch(crd, ca_bundle=b"PEM", target={"url": url})
    assert patch is not None
    config = patch["spec"]["conversion"]["webhook"]["clientConfig"]
    assert config["url"] == url and config["service"] is None  # merge patch removes it
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {"url": url, "caBundle": config["caBundle"]}
    patch = conversion_patch(crd, ca_bundle=b"PEM", target={"service": SERVICE})
    assert patch is not None
    config = patch["spec"]["conversion"]["webhook"]["clientConfig"]
    assert config["service"] == SERVICE and config["url"] is None
    # a stand-by in url mode (target None) and cert-manager's caBundle (ca_bundle None) are left as they are
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {"url": url, "caBundle": "INJECTED"}
    assert conversion_patch(crd, ca_bundle=None, target=None) is None
    assert conversion_patch(crd, ca_bundle=None, target={"url": url}) is None


def test_the_conversion_field_manager_is_not_taken_over_by_a_kustomization_applying_the_crd() -> None:
    """Flux's takeover (prefix ``kubectl``, ``kustomize-controller`` Update...) would drop its fields."""
    from kustomize_controller.apply.takeover import takeover_rules

    for operation in ("Update", "Apply"):
        entry = {"manager": FIELD_MANAGER, "operation": operation, "fieldsV1": {}}
        assert not any(rule.matches(entry) for rule in takeover_rules())


def test_a_crd_serving_v1_alone_is_left_alone() -> None:
    crd = build_crd()
    crd["spec"]["versions"] = crd["spec"]["versions"][:1]
    assert conversion_patch(crd, ca_bundle=b"PEM", target={"url": "https://x"}) is None


@pytest.mark.parametrize(("url", "host"), [
    ("https://127.0.0.1:9443/convert", "127.0.0.1"),
    ("https://[::1]:9443/convert", "::1"),
    ("https://webhook.example.com/convert", "webhook.example.com"),
    ("https://172.18.0.1:30443", "172.18.0.1"),
])
def test_the_url_host_goes_into_the_certificate(url: str, host: str) -> None:
    from kustomize_controller.conversion.webhook import _host_of

    assert _host_of(url) == host


def test_default_url_brackets_ipv6() -> None:
    assert default_url("::1", 9443) == "https://[::1]:9443/convert"


def test_claimed_means_our_apply_entry_covers_the_conversion_as_it_is() -> None:
    from kustomize_controller.conversion.crd import claimed

    crd = build_crd()
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": {"service": SERVICE, "caBundle": "Q0E="}}}
    owned = {"f:strategy": {}, "f:webhook": {"f:conversionReviewVersions": {}, "f:clientConfig": {
        "f:service": {"f:name": {}, "f:namespace": {}}}}}
    entry = {"manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": {"f:spec": {"f:conversion": owned}}}
    crd["metadata"]["managedFields"] = [entry]
    assert claimed(crd, with_ca_bundle=False)  # cert-manager keeps caBundle
    assert not claimed(crd, with_ca_bundle=True)
    owned["f:webhook"]["f:clientConfig"]["f:caBundle"] = {}
    assert claimed(crd, with_ca_bundle=True)
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = {"url": "https://x/convert"}  # switched since
    assert not claimed(crd, with_ca_bundle=False)
    crd["metadata"]["managedFields"] = [{**entry, "operation": "Update"}]  # a merge patch owns what it changed
    assert not claimed(crd, with_ca_bundle=False)


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000, b"{" + b'"a":{' * 50_000, b"not json", b"\xff\xfe", b'{"kind": NaN}', b"[]"],
    ids=["deep-list", "deep-object", "text", "not-utf8", "nan", "list"],
)
def test_answer_is_400_for_what_is_not_a_conversion_review(raw: bytes) -> None:
    # found by fuzzing: deep nesting raised RecursionError out of the handler (a 500 and a traceback)
    status, body = answer(raw)
    assert status == 400 and body.startswith("bad ConversionReview: ")


def test_answer_is_json_without_nan() -> None:
    obj = _ks("v1beta2")
    obj["spec"]["x"] = float("nan")
    status, body = answer(json.dumps(_request([obj])).encode())
    assert status == 400 and "bad ConversionReview" in body
    status, body = answer(json.dumps(_request([_ks("v1beta2")])).encode())
    assert status == 200 and json.loads(body)["response"]["result"] == {"status": "Success"}
