from __future__ import annotations

from typing import Any

import pytest

from kustomize_controller.api.kustomization import CustomHealthCheck
from kustomize_controller.apply.cel import (
    CelCompileError,
    CelEvaluationError,
    build_status_readers,
    compile_bool_expression,
    compile_expression,
)
from kustomize_controller.apply.errors import InvalidCELExpressionError
from kustomize_controller.apply.kstatus import Status


def check(**kw: Any) -> CustomHealthCheck:
    return CustomHealthCheck.model_validate(kw)


def cert(ready: str | None, issuing: str | None = None, gen: int = 1, observed: int | None = 1) -> dict[str, Any]:
    conditions = []
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    if issuing is not None:
        conditions.append({"type": "Issuing", "status": issuing})
    status: dict[str, Any] = {"conditions": conditions}
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "c", "namespace": "d", "generation": gen},
        "spec": {},
        "status": status,
    }


CERT = check(
    apiVersion="cert-manager.io/v1",
    kind="Certificate",
    inProgress="status.conditions.exists(e, e.type == 'Issuing' && e.status == 'True')",
    failed="status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')",
    current="status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')",
)


@pytest.mark.parametrize(
    ("obj", "status"),
    [
        (cert("True"), Status.CURRENT),
        (cert("False"), Status.FAILED),
        (cert("True", issuing="True"), Status.IN_PROGRESS),  # inProgress is evaluated first
        (cert("False", issuing="True"), Status.IN_PROGRESS),
        (cert("Unknown"), Status.IN_PROGRESS),  # nothing true → InProgress
        (cert("True", gen=2, observed=1), Status.IN_PROGRESS),  # generation check first
        (cert("True", gen=2, observed=None), Status.CURRENT),  # no observedGeneration: no check
    ],
)
def test_status_evaluator(obj: dict[str, Any], status: Status) -> None:
    readers = build_status_readers([CERT])
    evaluator = readers.lookup("cert-manager.io", "Certificate")
    assert evaluator is not None
    assert evaluator.evaluate(obj).status is status


def test_group_level_and_kind_level_matching() -> None:
    readers = build_status_readers(
        [
            check(apiVersion="example.com/v1", current="true"),
            check(apiVersion="example.com/v2", kind="Special", current="false"),
        ]
    )
    widget = readers.lookup("example.com", "Widget")
    special = readers.lookup("example.com", "Special")
    assert widget is not None and special is not None and widget is not special
    assert special.evaluate({"kind": "Special"}).status is Status.IN_PROGRESS
    assert widget.evaluate({"kind": "Widget"}).status is Status.CURRENT
    assert readers.lookup("other.io", "Widget") is None


def test_evaluation_error_on_missing_key_and_non_bool() -> None:
    readers = build_status_readers([check(apiVersion="x.io/v1", current="status.ready")])
    evaluator = readers.lookup("x.io", "A")
    assert evaluator is not None
    with pytest.raises(CelEvaluationError, match="no such key"):
        evaluator.evaluate({"status": {}})
    with pytest.raises(CelEvaluationError, match="as boolean"):
        evaluator.evaluate({"status": {"ready": "yes"}})
    with pytest.raises(CelEvaluationError):
        evaluator.evaluate({"metadata": {}})  # no status variable at all


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"apiVersion": "a.io/v1", "current": "status.phase =="}, "failed to parse the expression Current"),
        ({"apiVersion": "a.io/v1", "current": "status.?phase.orValue('') == 'x'"}, "unsupported syntax '.?'"),
        (
            {"apiVersion": "a.io/v1", "current": "true", "failed": "status.x.frobnicate()"},
            "unsupported function(s) frobnicate",
        ),
        (
            {"apiVersion": "a.io/v1", "current": "true", "inProgress": "math.greatest(1, 2) > 1"},
            "unsupported function(s) greatest",
        ),
        ({"apiVersion": "a.io/v1", "current": ""}, "expression Current not specified"),
    ],
)
def test_compile_errors_are_terminal(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(
        InvalidCELExpressionError,
        match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?").replace(".", r"\."),
    ) as info:
        build_status_readers([check(**spec)])
    assert info.value.reason == "InvalidCELExpression"
    assert "healthchecks[0]" in str(info.value)


def test_duplicate_group_kind_is_an_error() -> None:
    with pytest.raises(InvalidCELExpressionError, match=r"duplicate custom health check for GroupKind Widget\.a\.io"):
        build_status_readers(
            [
                check(apiVersion="a.io/v1", kind="Widget", current="true"),
                check(apiVersion="a.io/v2", kind="Widget", current="true"),
            ]
        )


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("2 == 2.0", True),  # cross-type numerics, as cel-go's CrossTypeNumericComparisons
        ("'Hello'.lowerAscii() == 'hello'", True),
        ("'a,b,c'.split(',').size() == 3", True),
        ("['a', 'b'].join('-') == 'a-b'", True),
        ("'  x '.trim() == 'x'", True),
        ("'abcdef'.substring(2, 4) == 'cd'", True),
        ("'hello'.indexOf('l') == 2 && 'hello'.lastIndexOf('l') == 3", True),
        ("'aaa'.replace('a', 'b') == 'bbb'", True),
        ("'abc'.charAt(1) == 'b' && 'abc'.reverse() == 'cba'", True),
        ("'x'.upperAscii() == 'X'", True),
        ("sets.contains([1, 2, 3], [2, 3]) && !sets.contains([1], [2])", True),
        ("sets.intersects([1, 2], [2]) && sets.equivalent([1, 2], [2, 1])", True),
        ("base64.encode(b'hi') == 'aGk='", True),
        ("base64.decode('aGk=') == b'hi'", True),
        ("has(self.status) && self.status.conditions.exists(c, c.type == 'Ready')", True),
        ("self.metadata.name.startsWith('po') && self.metadata.name.matches('^pod.*$')", True),
    ],
)
def test_supported_subset(expr: str, expected: bool) -> None:
    variables = {"self": {"metadata": {"name": "podinfo"}, "status": {"conditions": [{"type": "Ready"}]}}}
    assert compile_expression(expr).evaluate_bool(variables) is expected


def test_bool_expression_for_ready_expr() -> None:
    expr = compile_bool_expression(
        "dep.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True') && "
        "dep.metadata.generation == dep.status.observedGeneration && self.metadata.name != ''",
        variables=("self", "dep"),
    )
    dep: dict[str, Any] = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert expr.evaluate({"self": {"metadata": {"name": "app"}}, "dep": dep}) is True
    dep["status"]["observedGeneration"] = 1
    assert expr.evaluate({"self": {"metadata": {"name": "app"}}, "dep": dep}) is False
    with pytest.raises(CelEvaluationError, match="missing CEL variable"):
        expr.evaluate({"self": {}})


@pytest.mark.parametrize("expr", ["", "   ", "a.?b", "(", "x.unknownThing()"])
def test_compile_errors_never_crash(expr: str) -> None:
    with pytest.raises(CelCompileError, match="failed to parse the CEL expression"):
        compile_expression(expr)


def test_a_syntax_error_is_displayed_as_cel_go_displays_it() -> None:
    # cel-go's ToDisplayString: the snippet and the caret line indented by " | " (found by the differential
    # run against kustomize-controller v1.9.4)
    with pytest.raises(CelCompileError) as info:
        compile_expression("dep.status.(")
    assert str(info.value) == (
        "failed to parse the CEL expression 'dep.status.(': ERROR: <input>:1:12: Syntax error: no viable "
        "alternative at input '.('\n | dep.status.(\n | ...........^")
