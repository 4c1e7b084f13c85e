"""CEL for ``healthCheckExprs`` (status readers) and ``dependsOn[].readyExpr`` (bool expressions).

Backed by the ``common-expression-language`` package (``import cel``). Flux uses cel-go with
OptionalTypes, ext.Strings, ext.Sets and ext.Encoders and cross-type numeric comparisons; this module
closes most of the gap:
- cross-type numerics (``2 == 2.0``) work natively;
- ext.Strings (``lowerAscii``, ``upperAscii``, ``split``, ``join``, ``trim``, ``substring``, ``indexOf``,
  ``lastIndexOf``, ``replace``, ``charAt``, ``reverse``), ext.Sets (``sets.contains``,
  ``sets.equivalent``, ``sets.intersects``) and ext.Encoders (``base64.encode``/``decode``) are
  provided as functions;
- syntax the library cannot parse (notably optional field selection ``a.?b``) and functions neither
  the library nor this module provide are rejected **at compile time** with a ``CelCompileError``
  that names the problem — never at evaluation, never a crash.

Health checks (fluxcd/pkg ``runtime/cel`` StatusEvaluator): the object's top-level fields are the
variables (``status.conditions...``); a mismatched ``status.observedGeneration`` (when an integer) is
InProgress first; then ``inProgress`` → ``failed`` → ``current``, the first true one decides; none true →
InProgress. An evaluation error (e.g. a missing key without ``has()``) or a non-bool result is an
error for that object (the poller reports Unknown with the message). Matching is by API group only:
an entry without ``kind`` covers the whole group; a kind-specific entry wins; duplicates are an error.

Compile errors of either use raise ``InvalidCELExpressionError`` (terminal, reason
``InvalidCELExpression``) from ``build_status_readers``; ``compile_bool_expression`` raises
``CelCompileError`` so the caller can word its own terminal error.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import cel as celpy

from kustomize_controller.apply.errors import InvalidCELExpressionError
from kustomize_controller.apply.kstatus import Status, StatusResult
from kustomize_controller.apply.objects import Object, split_api_version


class CelCompileError(ValueError):
    """The expression cannot be compiled (syntax, or a function this implementation lacks)."""


class CelEvaluationError(RuntimeError):
    """The expression failed at evaluation or did not yield the expected type."""


def _substring(s: str, start: int, end: int | None = None) -> str:
    if start < 0 or start > len(s) or (end is not None and (end < start or end > len(s))):
        raise CelEvaluationError(f"substring: index out of range: {start}")
    return s[start:end]


def _index_of(s: str, sub: str, start: int = 0) -> int:
    return s.find(sub, start)


def _last_index_of(s: str, sub: str, end: int | None = None) -> int:
    return s.rfind(sub, 0, None if end is None else end + len(sub))


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep != "":
        return s.split(sep) if n < 0 else s.split(sep, n - 1)
    chars = list(s)
    if n < 0 or len(chars) <= n:
        return chars
    return [*chars[: n - 1], "".join(chars[n - 1 :])]


def _join(items: Sequence[str], sep: str = "") -> str:
    return sep.join(items)


def _b64decode(s: str) -> bytes:
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        try:
            return base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CelEvaluationError(f"base64.decode: {exc}") from exc


_EXTENSIONS: dict[str, Callable[..., Any]] = {
    "lowerAscii": lambda s: "".join(c.lower() if c.isascii() else c for c in s),
    "upperAscii": lambda s: "".join(c.upper() if c.isascii() else c for c in s),
    "trim": lambda s: s.strip(),
    "split": _split,
    "join": _join,
    "substring": _substring,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "replace": _replace,
    "charAt": lambda s, i: s[i] if 0 <= i < len(s) else "",
    "reverse": lambda s: s[::-1],
    "sets.contains": lambda a, b: all(x in a for x in b),
    "sets.equivalent": lambda a, b: all(x in b for x in a) and all(x in a for x in b),
    "sets.intersects": lambda a, b: any(x in b for x in a),
    "base64.encode": lambda b: base64.b64encode(b if isinstance(b, bytes) else str(b).encode()).decode(),
    "base64.decode": _b64decode,
}
# Functions the library evaluates natively (probed against common-expression-language 0.10).
_BUILTINS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string",
        "bytes", "duration", "timestamp", "type", "dyn", "has", "exists", "all", "exists_one", "map",
        "filter", "getFullYear", "getMonth", "getDayOfMonth", "getDate", "getDayOfWeek", "getDayOfYear",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds", "of", "ofNonZeroValue", "none",
        "hasValue", "value", "orValue", "or",
    }
)  # fmt: skip
_KNOWN_FUNCTIONS = _BUILTINS | {name.rpartition(".")[2] for name in _EXTENSIONS}


def _is_operator(name: str) -> bool:
    return name.startswith(("_", "@", "!")) or name.endswith("_")


def _celpy() -> Any:
    # Imported on first use: the library pulls in its command-line front end (typer, prompt_toolkit),
    # about 80 ms of every controller start-up, although most fleets never write a CEL expression.
    import cel

    return cel


def _context(variables: Mapping[str, Any]) -> celpy.Context:
    ctx: celpy.Context = _celpy().Context(variables=dict(variables))
    for name, fn in _EXTENSIONS.items():
        ctx.add_function(name, fn)
    return ctx


@dataclass(frozen=True)
class CelExpression:
    """A compiled expression; ``evaluate``/``evaluate_bool`` take the variables by name."""

    source: str
    program: Any

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        try:
            return self.program.execute(_context(variables))
        except CelEvaluationError:
            raise
        except KeyError as exc:
            raise CelEvaluationError(
                f"failed to evaluate the CEL expression '{self.source}': no such key: {exc.args[0]}"
            ) from exc
        except Exception as exc:  # the library raises RuntimeError/TypeError/ValueError
            raise CelEvaluationError(f"failed to evaluate the CEL expression '{self.source}': {exc}") from exc

    def evaluate_bool(self, variables: Mapping[str, Any]) -> bool:
        result = self.evaluate(variables)
        if not isinstance(result, bool):
            raise CelEvaluationError(f"failed to evaluate CEL expression as boolean: '{self.source}'")
        return result


def compile_expression(source: str) -> CelExpression:
    """Compile ``source``; raises ``CelCompileError`` for syntax or functions we cannot evaluate."""
    if not source.strip():
        raise CelCompileError("failed to parse the CEL expression '': empty expression")
    try:
        program = _celpy().compile(source)
    except Exception as exc:  # ValueError for parse errors; be defensive about others
        detail = str(exc).replace(f"Failed to parse expression '{source}': ", "")
        # cel-go's ToDisplayString indents the snippet and the caret line by one space ("\n | ")
        detail = detail.replace("\n| ", "\n | ")
        raise CelCompileError(f"failed to parse the CEL expression '{source}': {detail}") from exc
    unknown = sorted(name for name in program.functions() if not _is_operator(name) and name not in _KNOWN_FUNCTIONS)
    if unknown:
        raise CelCompileError(
            f"failed to parse the CEL expression '{source}': unsupported function(s) "
            f"{', '.join(unknown)} (not available in this CEL implementation)"
        )
    return CelExpression(source=source, program=program)


@dataclass(frozen=True)
class BoolExpression:
    """A bool-valued expression over declared variables (``dependsOn[].readyExpr``: ``self``, ``dep``)."""

    expression: CelExpression
    variables: tuple[str, ...]

    def evaluate(self, variables: Mapping[str, Any]) -> bool:
        missing = [v for v in self.variables if v not in variables]
        if missing:
            raise CelEvaluationError(f"missing CEL variable(s): {', '.join(missing)}")
        return self.expression.evaluate_bool(variables)


def compile_bool_expression(source: str, *, variables: Iterable[str]) -> BoolExpression:
    """Compile a boolean expression over the named variables (for ``readyExpr``)."""
    return BoolExpression(expression=compile_expression(source), variables=tuple(variables))


# --- healthCheckExprs ---------------------------------------------------------------------------


class HealthCheckExprSpec(Protocol):
    """What a ``spec.healthCheckExprs[]`` entry looks like (the api ``CustomHealthCheck`` model)."""

    @property
    def api_version(self) -> str: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def current(self) -> str: ...
    @property
    def in_progress(self) -> str | None: ...
    @property
    def failed(self) -> str | None: ...


@dataclass(frozen=True)
class StatusEvaluator:
    current: CelExpression
    failed: CelExpression | None = None
    in_progress: CelExpression | None = None

    def evaluate(self, obj: Object) -> StatusResult:
        status = obj.get("status")
        observed = status.get("observedGeneration") if isinstance(status, dict) else None
        meta = obj.get("metadata")
        generation = meta.get("generation") if isinstance(meta, dict) else None
        if (
            isinstance(observed, int)
            and not isinstance(observed, bool)
            and isinstance(generation, int)
            and observed != generation
        ):
            return StatusResult(Status.IN_PROGRESS, "observedGeneration does not match generation")
        for expr, result in (
            (self.in_progress, Status.IN_PROGRESS),
            (self.failed, Status.FAILED),
            (self.current, Status.CURRENT),
        ):
            if expr is not None and expr.evaluate_bool(obj):
                return StatusResult(result, f"{result} according to the healthCheckExprs")
        return StatusResult(Status.IN_PROGRESS, "no healthCheckExprs expression evaluated to true")


GroupKind = tuple[str, str]


@dataclass(frozen=True)
class CelStatusReaders:
    """Status evaluators by (group, kind); kind "" covers the whole group."""

    evaluators: Mapping[GroupKind, StatusEvaluator]

    def lookup(self, group: str, kind: str) -> StatusEvaluator | None:
        return self.evaluators.get((group, kind)) or self.evaluators.get((group, ""))

    def __bool__(self) -> bool:
        return bool(self.evaluators)


def build_status_readers(specs: Iterable[HealthCheckExprSpec] | None) -> CelStatusReaders:
    """Compile ``healthCheckExprs``; any error is an ``InvalidCELExpressionError`` (terminal)."""
    evaluators: dict[GroupKind, StatusEvaluator] = {}
    for i, spec in enumerate(specs or ()):
        group, _ = split_api_version(spec.api_version)
        key = (group, spec.kind or "")
        if key in evaluators:
            shown = f"{spec.kind}.{group}" if spec.kind else group
            raise InvalidCELExpressionError(f"duplicate custom health check for GroupKind {shown} at healthchecks[{i}]")
        try:
            if not spec.current:
                raise CelCompileError("expression Current not specified")
            current = _compile_named("Current", spec.current)
            failed = _compile_named("Failed", spec.failed) if spec.failed else None
            in_progress = _compile_named("InProgress", spec.in_progress) if spec.in_progress else None
        except CelCompileError as exc:
            raise InvalidCELExpressionError(
                f"failed to create custom status evaluator for healthchecks[{i}]: {exc}"
            ) from exc
        evaluators[key] = StatusEvaluator(current=current, failed=failed, in_progress=in_progress)
    return CelStatusReaders(evaluators)


def _compile_named(name: str, source: str) -> CelExpression:
    try:
        return compile_expression(source)
    except CelCompileError as exc:
        raise CelCompileError(f"failed to parse the expression {name}: {exc}") from exc
