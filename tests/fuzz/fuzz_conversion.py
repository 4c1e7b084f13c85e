"""The conversion webhook's request body: ``POST /convert`` bytes → HTTP status and body.

Input: the raw body, as the webhook's ``_handle`` reads it, given to ``review.answer`` (what ``_handle``
sends back).

Contract: ``answer`` never raises. It answers 400 with ``bad ConversionReview: ...`` for anything that
is not a ConversionReview v1 (malformed JSON, wrong types, nesting too deep), else 200 with a valid JSON
(no NaN) ConversionReview whose ``response.result.status`` is ``Success`` with one converted object per
request object, or ``Failure`` with a message that starts with ``Kustomization/``.
"""

from __future__ import annotations

import json

from kustomize_controller.conversion.review import answer
from tests.fuzz.harness import Target


def one_input(data: bytes) -> None:
    status, body = answer(data)
    if status == 400:
        assert body.startswith("bad ConversionReview: "), body
        return
    assert status == 200, status
    response = json.loads(body)["response"]
    request = json.loads(data)["request"]
    result = response["result"]
    if result["status"] == "Success":
        assert len(response["convertedObjects"]) == len(request.get("objects") or [])
        want = request.get("desiredAPIVersion")
        assert all(obj.get("apiVersion") == want for obj in response["convertedObjects"])
    else:
        assert result["status"] == "Failure" and result["message"].startswith("Kustomization/"), result


TARGET = Target(
    name="conversion",
    one_input=one_input,
    contract="review.answer: never raises; 400 for what is not a ConversionReview v1, else valid JSON",
    max_len=8192,
    dictionary=(b'"apiVersion"', b'"kind"', b'"ConversionReview"', b'"apiextensions.k8s.io/v1"', b'"request"',
                b'"uid"', b'"desiredAPIVersion"', b'"objects"', b'"kustomize.toolkit.fluxcd.io/v1"',
                b'"kustomize.toolkit.fluxcd.io/v1beta1"', b'"kustomize.toolkit.fluxcd.io/v1beta2"',
                b'"kustomize.toolkit.fluxcd.io/v1alpha1"', b'"Kustomization"', b'"metadata"', b'"spec"',
                b'"status"', b'"annotations"', b'"patchesStrategicMerge"', b'"patchesJson6902"', b'"patches"',
                b'"serviceAccount"', b'"serviceAccountName"', b'"healthChecks"', b'"validation"',
                b'"targetNamespace"', b'"dependsOn"', b'"decryption"', b'"postBuild"', b'"inventory"',
                b'"kustomize.toolkit.fluxcd.io/conversion-origin"',
                b'"kustomize.toolkit.fluxcd.io/conversion-v1-fields"',
                b"null", b"true", b"[]", b"{}", b"NaN", b"1e999", b"-0"),
    seeded_runs=300,
)
