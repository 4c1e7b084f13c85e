"""``ConversionReview`` (``apiextensions.k8s.io/v1``) in, ``ConversionReview`` out: the webhook's logic.

Contract (as kube-apiserver expects it):

- The response echoes ``request.uid`` and holds ``convertedObjects`` in the order of
  ``request.objects``, each in ``request.desiredAPIVersion``; only ``apiVersion``, ``spec``,
  ``status`` and metadata labels/annotations change (``api.conversion`` keeps to that).
- One object that cannot be converted fails the whole review: ``result.status: Failure`` with the
  object's message (``Kustomization/<ns>/<name>: <field>: ...``); the API server fails the request with
  it, so nothing is stored half converted.
- A body that is not a ConversionReview v1 raises ``BadReview`` (the server answers 400).
- ``answer(raw)`` is the whole HTTP exchange of ``POST /convert``: it never raises; 400 with
  ``bad ConversionReview: ...`` for a body that is not valid JSON, not a ConversionReview v1, or nested
  too deep to decode or convert; else 200 with the response as JSON (never ``NaN``, which Go refuses).
"""

from __future__ import annotations

import json
from typing import Any, Final

from kustomize_controller.api.conversion import ConversionRefused, convert

__all__ = ["REVIEW_API_VERSION", "BadReview", "answer", "review"]

REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"


class BadReview(ValueError):
    """The request body is not a ConversionReview we understand."""


def review(body: Any) -> dict[str, Any]:
    """The ConversionReview response for the ConversionReview request ``body``."""
    if not isinstance(body, dict) or body.get("kind") != "ConversionReview":
        raise BadReview("expected a ConversionReview")
    if body.get("apiVersion") != REVIEW_API_VERSION:
        raise BadReview(f"unsupported ConversionReview version {body.get('apiVersion')!r}, want {REVIEW_API_VERSION}")
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("objects", []), list):
        raise BadReview("ConversionReview without request")
    desired = str(request.get("desiredAPIVersion") or "")
    response: dict[str, Any] = {"uid": request.get("uid", "")}
    try:
        converted = [convert(_object(obj), desired) for obj in request.get("objects") or []]
    except ConversionRefused as err:
        response["result"] = {"status": "Failure", "message": str(err)}
    else:
        response["convertedObjects"] = converted
        response["result"] = {"status": "Success"}
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}


def answer(raw: bytes) -> tuple[int, str]:
    """The status and body (JSON at 200, text at 400) that ``POST /convert`` with body ``raw`` gets."""
    try:
        return 200, json.dumps(review(json.loads(raw)), allow_nan=False)
    except (ValueError, BadReview) as err:  # malformed JSON (UnicodeDecodeError, NaN) too
        return 400, f"bad ConversionReview: {err}"
    except RecursionError:
        return 400, "bad ConversionReview: nested too deeply"


def _object(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConversionRefused(f"Kustomization//: not an object: {type(obj).__name__}")
    return obj
