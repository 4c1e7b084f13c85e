"""CEL: ``healthCheckExprs`` (status readers) and ``dependsOn[].readyExpr`` (bool expressions).

Input: ``<flags><expression>\\x00<object as JSON>``. Bit 0 of the flags makes the expression a
``readyExpr`` (variables ``self`` and ``dep``, both the object), otherwise it is the ``current``
expression of a health check for ``apps/v1`` (bit 1 also uses it as ``inProgress``, bit 2 as
``failed``) evaluated against the object. An object that is not JSON is replaced by a fixed one.

Contract: compiling raises only ``InvalidCELExpressionError`` (health checks) or ``CelCompileError``
(readyExpr); evaluating raises only ``CelEvaluationError``; nothing else (a Rust panic of the CEL
library is a ``BaseException``) escapes.
"""

from __future__ import annotations

import json
from typing import Any

from kustomize_controller.api.kustomization import CustomHealthCheck
from kustomize_controller.apply.cel import (
    CelCompileError,
    CelEvaluationError,
    build_status_readers,
    compile_bool_expression,
)
from kustomize_controller.apply.errors import InvalidCELExpressionError
from kustomize_controller.apply.kstatus import Status
from tests.fuzz.harness import Target, text

compile_bool_expression("true", variables=())  # loads the CEL library now, not within the first input's time

_DEFAULT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": 2},
            "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}}


def _object(raw: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return _DEFAULT
    return obj if isinstance(obj, dict) else _DEFAULT


def one_input(data: bytes) -> None:
    if not data:
        return
    flags = data[0]
    expression, _, raw = text(data[1:]).partition("\x00")
    obj = _object(raw)
    if flags & 1:
        try:
            program = compile_bool_expression(expression, variables=("self", "dep"))
        except CelCompileError:
            return
        try:
            result = program.evaluate({"self": obj, "dep": obj})
        except CelEvaluationError:
            return
        assert isinstance(result, bool)
        return
    check = CustomHealthCheck(api_version="apps/v1", current=expression,
                              in_progress=expression if flags & 2 else None,
                              failed=expression if flags & 4 else None)
    try:
        readers = build_status_readers([check])
    except InvalidCELExpressionError:
        return
    evaluator = readers.lookup("apps", "Deployment")
    assert evaluator is not None
    try:
        result = evaluator.evaluate(obj)
    except CelEvaluationError:
        return
    assert result.status in (Status.CURRENT, Status.IN_PROGRESS, Status.FAILED), result


TARGET = Target(
    name="cel",
    one_input=one_input,
    contract="compile: InvalidCELExpressionError / CelCompileError only; evaluate: CelEvaluationError only",
    max_len=1024,
    dictionary=(b"status.conditions", b".exists(c, ", b".all(x, ", b".map(x, ", b".filter(x, ", b"has(", b"size(",
                b"self.", b"dep.", b"status.", b"metadata.", b"== 'True'", b"&&", b"||", b"!", b"?", b":", b".?",
                b"[0]", b"['x']", b"int(", b"uint(", b"double(", b"string(", b"bytes(", b"duration('",
                b"timestamp('", b"matches(", b"'", b'"', b"b'", b"r'", b"1u", b"0x", b"1e9", b"-9223372036854775808",
                b".lowerAscii()", b".split(", b".substring(", b".charAt(", b".indexOf(", b".replace(",
                b"base64.decode(", b"base64.encode(", b"sets.contains(", b".join(", b"{", b"}", b"[", b"]"),
    seeded_runs=300,
)
