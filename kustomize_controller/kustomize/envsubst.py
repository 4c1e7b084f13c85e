"""A bash-like ``${...}`` expander with the semantics of fluxcd/pkg/envsubst v1.7.0.

Contract (what upstream's code does — where its README says otherwise the code wins):

- Only ``${...}`` forms are expanded; a bare ``$name`` is copied unchanged. ``$$`` anywhere in the
  text becomes one ``$`` (so ``$${x}`` yields the literal ``${x}``).
- Operators: ``${v}``, ``${#v}``, ``${v^}``, ``${v^^}``, ``${v,}``, ``${v,,}``, ``${v:n}``,
  ``${v:n:len}``, ``${v#p}``, ``${v##p}``, ``${v%p}``, ``${v%%p}`` (glob patterns),
  ``${v/p/r}``, ``${v//p/r}``, ``${v/#p/r}``, ``${v/%p/r}`` (literal patterns), and the
  default family ``${v:-d}``, ``${v=d}``, ``${v:=d}``, ``${v:?d}``, ``${v:+d}`` — all of which
  mean "the value, or ``d`` when the value is empty or unset"; nothing is ever assigned.
- ``${v-d}``, ``${v+d}``, ``${v?d}`` are parse errors ("missing closing brace").
- Operator arguments may nest ``${...}``; they are evaluated before the variable is looked up, so
  in strict mode an unset variable inside an unused default still fails.
- The ``lookup`` function returns ``(value, exists)``; ``exists=False`` for a bare reference or a
  value-reading operator fails with ``variable not set (strict mode): "name"``. Non-strict callers
  return ``("", True)`` for unknown names.
- Errors: :class:`~kustomize_controller.kustomize.errors.EnvsubstError` with upstream's wording
  ("bad substitution", "missing closing brace", "unable to parse variable name", "unable to parse
  substitution within function", "unable to parse default function", the strict-mode message).
  Nothing else escapes: the whole text is parsed before anything is evaluated, so a parse error
  anywhere wins over an evaluation error.
- ``${#v}`` and ``${v:n:len}`` count UTF-8 bytes, like upstream; a cut inside a multi-byte
  character is decoded with U+FFFD. The glob trims and case mappings work on code points.

Not promised: upstream's treatment of a NUL character as end of input; a negative substring
length (upstream panics) is an EnvsubstError here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from kustomize_controller.kustomize.envsubst_funcs import BAD_SUBSTITUTION, apply_operator
from kustomize_controller.kustomize.errors import EnvsubstError

Lookup = Callable[[str], tuple[str, bool]]

MISSING_CLOSING_BRACE = "missing closing brace"
PARSE_VARIABLE_NAME = "unable to parse variable name"
PARSE_FUNC_SUBSTITUTION = "unable to parse substitution within function"
PARSE_DEFAULT_FUNCTION = "unable to parse default function"

_DEFAULT_OPS = frozenset({"-", "+", "=", "?", ":-", ":+", ":=", ":?"})


# --- syntax tree -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Text:
    value: str


@dataclass(slots=True)
class _Func:
    param: str = ""
    name: str = ""
    args: list[_Node] = field(default_factory=list)


_Node = _Text | _Func


# --- scanner: a cursor over a buffer that escape handling may shorten --------------------------

_EOF = ""
_TOK_ILLEGAL, _TOK_EOF, _TOK_IDENT, _TOK_LBRACK, _TOK_RBRACK = range(5)
_M_IDENT, _M_LBRACK, _M_RBRACK, _M_ESCAPE = 1, 2, 4, 8
_E_DOLLAR, _E_BACKSLASH = 1, 2
_E_ALL = _E_DOLLAR | _E_BACKSLASH

Accept = Callable[[str, int], bool]


def _accept_any(r: str, i: int) -> bool:
    return True


def _accept_ident(r: str, i: int) -> bool:
    return r.isalpha() or r.isdecimal() or r == "_"


def _accept_colon(r: str, i: int) -> bool:
    return r == ":"


def _accept_one_hash(r: str, i: int) -> bool:
    return r == "#" and i == 1


def _accept_not_closing(r: str, i: int) -> bool:
    return r != "}"


def _accept_hash_op(r: str, i: int) -> bool:
    return r == "#" and i < 3


def _accept_percent_op(r: str, i: int) -> bool:
    return r == "%" and i < 3


def _accept_default_op(r: str, i: int) -> bool:
    return (i == 1 and r == ":") or (i == 2 and r in "=-?+")


def _accept_replace_op(r: str, i: int) -> bool:
    return (i == 1 and r == "/") or (i == 2 and r in "/#%")


def _accept_one_equal(r: str, i: int) -> bool:
    return i == 1 and r == "="


def _accept_one_colon(r: str, i: int) -> bool:
    return i == 1 and r == ":"


def _reject_colon_close(r: str, i: int) -> bool:
    return r not in ":}"


def _accept_slash(r: str, i: int) -> bool:
    return r == "/"


def _accept_not_slash(r: str, i: int) -> bool:
    return r != "/"


def _accept_casing_op(r: str, i: int) -> bool:
    return r in ",^" and i < 3


class _Scanner:
    """Character cursor with upstream's token rules (modes, escapes, one-step unread)."""

    __slots__ = ("accept", "buf", "escapes", "mode", "pos", "start", "width")

    def __init__(self, buf: str) -> None:
        self.buf = buf
        self.pos = 0
        self.start = 0
        self.width = 0
        self.mode = 0
        self.escapes = 0
        self.accept: Accept = _accept_any

    def read(self) -> str:
        if self.pos >= len(self.buf):
            self.width = 0
            return _EOF
        r = self.buf[self.pos]
        self.width = 1
        self.pos += 1
        return r

    def unread(self) -> None:
        self.pos -= self.width

    def peek(self) -> str:
        r = self.read()
        self.unread()
        return r

    def skip(self) -> None:
        # Drop the character just read; the one after it becomes part of the token unexamined.
        self.buf = self.buf[: self.pos - 1] + self.buf[self.pos :]

    def token(self) -> str:
        return self.buf[self.start : self.pos]

    def scan(self) -> int:
        self.start = self.pos
        r = self.read()
        if r == _EOF:
            return _TOK_EOF
        if self._lbrack(r):
            return _TOK_LBRACK
        if self.mode & _M_RBRACK and r == "}":
            return _TOK_RBRACK
        if self._ident(r):
            return _TOK_IDENT
        return _TOK_ILLEGAL

    def _lbrack(self, r: str) -> bool:
        if not self.mode & _M_LBRACK or r != "$":
            return False
        if self.read() == "{":
            return True
        self.unread()
        return False

    def _escaped(self, r: str) -> bool:
        if not self.mode & _M_ESCAPE:
            return False
        if r == "$" and self.escapes & _E_DOLLAR and self.peek() == "$":
            return True
        return r == "\\" and bool(self.escapes & _E_BACKSLASH) and self.peek() in ("/", "\\")

    def _ident(self, r: str) -> bool:
        if not self.mode & _M_IDENT:
            return False
        if self._escaped(r):
            self.skip()
        elif not self.accept(r, self.pos - self.start):
            return False
        while True:
            r = self.read()
            if r == _EOF:
                self.unread()
                return True
            if self._lbrack(r):
                self.unread()
                self.unread()
                return True
            if self._escaped(r):
                self.skip()
                continue
            if not self.accept(r, self.pos - self.start):
                self.unread()
                return True


# --- parser ------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.sc = _Scanner(text)

    def parse(self) -> list[_Node]:
        """Top level: text with ``$$`` escapes, interrupted by ``${...}`` functions."""
        sc = self.sc
        nodes: list[_Node] = []
        chunk: list[str] = []
        while True:
            buf = sc.buf
            j = buf.find("$", sc.pos)
            if j < 0:
                chunk.append(buf[sc.pos :])
                break
            chunk.append(buf[sc.pos : j])
            nxt = buf[j + 1 : j + 2]
            if nxt == "{":
                if chunk:
                    text = "".join(chunk)
                    if text:
                        nodes.append(_Text(text))
                    chunk = []
                sc.pos = j + 2
                nodes.append(self._func())
            elif nxt == "$":
                chunk.append("$")
                sc.pos = j + 2
            else:
                chunk.append("$")
                sc.pos = j + 1
        text = "".join(chunk)
        if text:
            nodes.append(_Text(text))
        return nodes

    def _func(self) -> _Func:
        sc = self.sc
        sc.escapes = _E_ALL
        if sc.peek() == "#":
            return self._length()
        sc.accept = _accept_ident
        sc.mode = _M_IDENT
        if sc.scan() != _TOK_IDENT:
            raise EnvsubstError(PARSE_VARIABLE_NAME)
        name = sc.token()
        nxt = sc.peek()
        if nxt == ":":
            return self._default_or_substr(name)
        if nxt == "=":
            return self._default(name)
        if nxt in (",", "^"):
            return self._casing(name)
        if nxt == "/":
            return self._replace(name)
        if nxt == "#":
            return self._remove(name, _accept_hash_op)
        if nxt == "%":
            return self._remove(name, _accept_percent_op)
        sc.accept = _accept_ident
        sc.mode = _M_RBRACK
        if sc.scan() != _TOK_RBRACK:
            raise EnvsubstError(MISSING_CLOSING_BRACE)
        return _Func(param=name)

    def _param(self, accept: Accept, mode: int) -> _Node:
        sc = self.sc
        sc.accept = accept
        sc.mode = mode | _M_LBRACK
        tok = sc.scan()
        if tok == _TOK_LBRACK:
            return self._func()
        if tok in (_TOK_IDENT, _TOK_RBRACK):
            return _Text(sc.token())
        raise EnvsubstError(PARSE_FUNC_SUBSTITUTION)

    def _operator(self, accept: Accept, error: str = BAD_SUBSTITUTION) -> str:
        sc = self.sc
        sc.accept = accept
        sc.mode = _M_IDENT
        if sc.scan() != _TOK_IDENT:
            raise EnvsubstError(error)
        return sc.token()

    def _close(self) -> None:
        sc = self.sc
        sc.mode = _M_RBRACK
        if sc.scan() != _TOK_RBRACK:
            raise EnvsubstError(BAD_SUBSTITUTION)

    def _default_or_substr(self, name: str) -> _Func:
        sc = self.sc
        sc.read()
        r = sc.peek()
        sc.unread()
        if r in ("=", "-", "?", "+"):
            return self._default(name)
        return self._substr(name)

    def _substr(self, name: str) -> _Func:
        sc = self.sc
        node = _Func(param=name, name=self._operator(_accept_one_colon))
        node.args.append(self._param(_reject_colon_close, _M_IDENT))
        sc.accept = _accept_colon
        sc.mode = _M_IDENT | _M_RBRACK
        tok = sc.scan()
        if tok == _TOK_RBRACK:
            return node
        if tok != _TOK_IDENT:
            raise EnvsubstError(BAD_SUBSTITUTION)
        node.args.append(self._param(_accept_not_closing, _M_IDENT))
        self._close()
        return node

    def _remove(self, name: str, accept: Accept) -> _Func:
        node = _Func(param=name, name=self._operator(accept))
        node.args.append(self._param(_accept_not_closing, _M_IDENT))
        self._close()
        return node

    def _replace(self, name: str) -> _Func:
        sc = self.sc
        node = _Func(param=name, name=self._operator(_accept_replace_op))
        node.args.append(self._param(_accept_not_slash, _M_IDENT | _M_ESCAPE))
        sc.accept = _accept_slash
        sc.mode = _M_IDENT
        if sc.scan() != _TOK_IDENT:
            raise EnvsubstError(BAD_SUBSTITUTION)
        if sc.peek() == "}":
            self._close()
            return node
        node.args.append(self._param(_accept_not_closing, _M_IDENT | _M_ESCAPE))
        self._close()
        return node

    def _default(self, name: str) -> _Func:
        sc = self.sc
        accept = _accept_one_equal if sc.peek() == "=" else _accept_default_op
        node = _Func(param=name, name=self._operator(accept, PARSE_DEFAULT_FUNCTION))
        while True:
            if sc.peek() == "}":
                self._close()
                return node
            node.args.append(self._param(_accept_not_closing, _M_IDENT))

    def _casing(self, name: str) -> _Func:
        node = _Func(param=name, name=self._operator(_accept_casing_op))
        self._close()
        return node

    def _length(self) -> _Func:
        sc = self.sc
        op = self._operator(_accept_one_hash)
        sc.accept = _accept_ident
        sc.mode = _M_IDENT
        if sc.scan() != _TOK_IDENT:
            raise EnvsubstError(BAD_SUBSTITUTION)
        node = _Func(param=sc.token(), name=op)
        self._close()
        return node


def _eval(nodes: list[_Node], lookup: Lookup, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.value)
            continue
        args: list[str] = []
        for arg in node.args:
            buf: list[str] = []
            _eval([arg], lookup, buf)
            args.append("".join(buf))
        value, exists = lookup(node.param)
        if not exists and node.name not in _DEFAULT_OPS:
            raise EnvsubstError(
                f"variable not set (strict mode): {json.dumps(node.param, ensure_ascii=False)}"
            )
        out.append(apply_operator(node.name, value, args))


def parse(text: str) -> list[_Node]:
    try:
        return _Parser(text).parse()
    except RecursionError:
        raise EnvsubstError(BAD_SUBSTITUTION + ": nesting too deep") from None


def expand(text: str, lookup: Lookup) -> str:
    """Expand every ``${...}`` in ``text``; raise EnvsubstError on a parse or strict-mode error."""
    if "$" not in text:
        return text
    nodes = parse(text)
    out: list[str] = []
    try:
        _eval(nodes, lookup, out)
    except RecursionError:
        raise EnvsubstError(BAD_SUBSTITUTION + ": nesting too deep") from None
    return "".join(out)


def mapping_lookup(variables: dict[str, str], *, strict: bool) -> Lookup:
    """The lookup upstream's post-build substitution uses: strict → (value, known), else ("", True)."""
    if strict:

        def strict_lookup(name: str) -> tuple[str, bool]:
            if name in variables:
                return variables[name], True
            return "", False

        return strict_lookup

    def lenient_lookup(name: str) -> tuple[str, bool]:
        return variables.get(name, ""), True

    return lenient_lookup
