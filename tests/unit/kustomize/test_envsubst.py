"""The envsubst engine: every operator, escapes, parse errors, strict mode, and properties."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kustomize_controller.kustomize.envsubst import expand, mapping_lookup, parse
from kustomize_controller.kustomize.envsubst_funcs import apply_operator
from kustomize_controller.kustomize.errors import EnvsubstError

V = "abcdEFGH28ij"
PATH = "/home/bozo/ideas/thoughts.for.today"


def lenient(text: str, **params: str) -> str:
    return expand(text, mapping_lookup(params, strict=False))


def strict(text: str, **params: str) -> str:
    return expand(text, mapping_lookup(params, strict=True))


@pytest.mark.parametrize(
    ("text", "params", "expected"),
    [
        ("abcdEFGH28ij", {}, "abcdEFGH28ij"),
        ("${v}", {"v": V}, V),
        ("${#v}", {"v": V}, "12"),
        ("${#v}", {"v": "é"}, "2"),  # bytes, as upstream
        ("${v^}", {"v": V}, "AbcdEFGH28ij"),
        ("${v^^}", {"v": V}, "ABCDEFGH28IJ"),
        ("${v,}", {"v": "ABC"}, "aBC"),
        ("${v,,}", {"v": "ABCDEFGH28IJ"}, "abcdefgh28ij"),
        ("${v^}", {"v": ""}, ""),
        ("${p:11}", {"p": PATH}, "ideas/thoughts.for.today"),
        ("${p:11:5}", {"p": PATH}, "ideas"),
        ("${p:-5}", {"p": PATH}, PATH),  # ':-' is the default operator, not a negative offset
        ("${p: -5}", {"p": PATH}, PATH),  # " -5" is not an integer for Atoi: value unchanged
        ("${p:100}", {"p": PATH}, ""),
        ("${p:30:100}", {"p": PATH}, "today"),
        ("${p:x}", {"p": PATH}, PATH),
        ("${p:1:y}", {"p": PATH}, PATH),
        ("${v=xyz}", {"v": "abc"}, "abc"),
        ("${v=xyz}", {}, "xyz"),
        ("${v=xyz}", {"v": ""}, "xyz"),  # '=' replaces an empty value too
        ("${v:=xyz}", {}, "xyz"),
        ("${v:-xyz}", {}, "xyz"),
        ("${v:-xyz}", {"v": "set"}, "set"),
        ("${v:?xyz}", {}, "xyz"),  # behaves like :-
        ("${v:+xyz}", {}, "xyz"),  # behaves like :- (not bash's "alternate value")
        ("${v:+xyz}", {"v": "set"}, "set"),
        ("${v:-}", {}, ""),
        ("something ${v=${d}}", {"d": "foo"}, "something foo"),
        ("foo: ${v=${d}-suffix}", {"d": "foo1"}, "foo: foo1-suffix"),
        ("foo: ${v=prefix${d}-suffix}", {"d": "foo1"}, "foo: prefixfoo1-suffix"),
        ("${v=${w^^}}", {"w": V}, "ABCDEFGH28IJ"),
        ("${z/%abc/XYZ}", {"z": "abcABC123ABCabc"}, "abcABC123ABCXYZ"),
        ("${z/#abc/XYZ}", {"z": "abcABC123ABCabc"}, "XYZABC123ABCabc"),
        ("${z//abc/xyz}", {"z": "abcABC123ABCabc"}, "xyzABC123ABCxyz"),
        ("${z/abc/xyz}", {"z": "abcABC123ABCabc"}, "xyzABC123ABCabc"),
        ("${z/./}", {"z": "foo.bar"}, "foobar"),
        ("${z//./}", {"z": "a.b.c"}, "abc"),
        ("${z/#ab/}", {"z": "abc"}, "abc"),  # prefix/suffix replace need two arguments
        ("${z/x*/y}", {"z": "ax*b"}, "ayb"),  # replace patterns are literal, not globs
        (r"${z/\//-}", {"z": "foo/bar"}, "foo-bar"),
        (r"${z//\//-}", {"z": "foo/bar/baz"}, "foo-bar-baz"),
        ("${f#*.}", {"f": "bash.string.txt"}, "string.txt"),
        ("${f#*/}", {"f": "path/to/file"}, "to/file"),
        ("${f#*/}", {"f": "/path/to/file"}, "path/to/file"),
        ("${f##*.}", {"f": "bash.string.txt"}, "txt"),
        ("${f##*/}", {"f": "/path/to/file"}, "file"),
        ("${f%.*}", {"f": "bash.string.txt"}, "bash.string"),
        ("${f%%.*}", {"f": "bash.string.txt"}, "bash"),
        ("${f#b?sh.}", {"f": "bash.string.txt"}, "string.txt"),
        ("${f#[a-c]}", {"f": "bash"}, "ash"),
        ("${f#[^a-c]}", {"f": "bash"}, "bash"),
        ("${f#[}", {"f": "[bash"}, "[bash"),  # bad pattern: value unchanged
        ("${f#nomatch}", {"f": "bash"}, "bash"),
        ("$${v}", {"v": V}, "${v}"),
        ("some text ${v}$${var$${v}$v${v}", {"v": V}, f"some text {V}${{var${{v}}$v{V}"),
        ("something $${var=${d}}", {"d": "foo"}, "something ${var=foo}"),
        ("$$", {}, "$"),
        ("$$$", {}, "$$"),
        ("a$", {}, "a$"),
        ("$v and $HOME", {"v": V}, "$v and $HOME"),
        ("\\\\something ${v=${d}}", {"d": "foo"}, "\\\\something foo"),
        ("\\${v}", {"v": V}, "\\" + V),
        ("${v:-$$}", {}, "$$"),  # no escapes inside default arguments
        ("${ä}", {"ä": "x"}, "x"),  # unicode letters are name characters
        ("${1abc}", {"1abc": "d"}, "d"),
        ("multi\nline ${v}\n", {"v": "x"}, "multi\nline x\n"),
    ],
)
def test_operators(text: str, params: dict[str, str], expected: str) -> None:
    assert expand(text, mapping_lookup(params, strict=False)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("${v-d}", "missing closing brace"),
        ("${v+d}", "missing closing brace"),
        ("${v?d}", "missing closing brace"),
        ("${v", "missing closing brace"),
        ("${v x}", "missing closing brace"),
        ("${}", "unable to parse variable name"),
        ("${-}", "unable to parse variable name"),
        ("${v:", "bad substitution"),
        ("${#}", "bad substitution"),
        ("${v^^", "bad substitution"),
        ("${v^^^}", "bad substitution"),
        ("${v//}", "bad substitution"),
        ("${v:-", "unable to parse substitution within function"),
        ("${v///x}", "unable to parse substitution within function"),
        ("${v::2}", "unable to parse substitution within function"),
        ("ok ${v} then ${", "unable to parse variable name"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(EnvsubstError) as err:
        lenient(text, v="x")
    assert str(err.value) == message


def test_parse_error_wins_over_strict_error() -> None:
    # The whole text is parsed first, so the unset variable is never evaluated.
    with pytest.raises(EnvsubstError, match="missing closing brace"):
        strict("${unset} ${v-d}")


@pytest.mark.parametrize(
    "text",
    [
        "${missing}",
        "${#missing}",
        "${missing^}",
        "${missing^^}",
        "${missing,}",
        "${missing,,}",
        "${missing:0}",
        "${missing:0:10}",
        "${missing/p/r}",
        "${missing//p/r}",
        "${missing/#p/r}",
        "${missing/%p/r}",
        "${missing#p}",
        "${missing##p}",
        "${missing%p}",
        "${missing%%p}",
        "${set:-${missing}}",  # defaults are evaluated before use
    ],
)
def test_strict_mode_rejects_unset(text: str) -> None:
    with pytest.raises(EnvsubstError) as err:
        strict(text, set="x")
    assert str(err.value) == 'variable not set (strict mode): "missing"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [("${missing:-fb}", "fb"), ("${missing:=fb}", "fb"), ("${missing=fb}", "fb"), ("${e}", "")],
)
def test_strict_mode_defaults_and_empty(text: str, expected: str) -> None:
    assert strict(text, e="") == expected


def test_lenient_mode_expands_unset_to_empty() -> None:
    assert lenient("a${missing}b${#missing}") == "ab0"


def test_negative_substring_length_is_an_error_not_a_crash() -> None:
    with pytest.raises(EnvsubstError, match="negative substring length"):
        lenient("${v:2:-1}", v="abcdef")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    text = "${a:-" * 5000 + "x" + "}" * 5000
    with pytest.raises(EnvsubstError):
        lenient(text)


@settings(max_examples=300)
@given(st.text().filter(lambda s: "${" not in s and "$$" not in s))
def test_text_without_expansions_is_unchanged(text: str) -> None:
    assert lenient(text) == text
    assert strict(text) == text


@settings(max_examples=500)
@given(
    st.text(alphabet=st.sampled_from(list("${}:-=?+#%/^,\\ab1 _.*[]")), max_size=40),
    st.dictionaries(st.sampled_from(["a", "b", "ab", "_"]), st.text(max_size=5), max_size=3),
    st.booleans(),
)
def test_no_input_crashes(text: str, params: dict[str, str], is_strict: bool) -> None:
    try:
        result = expand(text, mapping_lookup(params, strict=is_strict))
    except EnvsubstError:
        return
    assert isinstance(result, str)


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_no_arbitrary_text_crashes(text: str) -> None:
    with contextlib.suppress(EnvsubstError):
        expand(text, mapping_lookup({"a": "1"}, strict=True))


def shape(nodes: list[Any]) -> list[Any]:
    """Parse trees as plain data: ("t", text) and ("f", param, operator, [argument shapes])."""
    out: list[Any] = []
    for node in nodes:
        if hasattr(node, "value"):
            out.append(("t", node.value))
        else:
            out.append(("f", node.param, node.name, [shape([a])[0] for a in node.args]))
    return out


def t(value: str) -> tuple[str, str]:
    return ("t", value)


def f(param: str, name: str = "", *args: Any) -> tuple[str, str, str, list[Any]]:
    return ("f", param, name, list(args))


# The parse-tree table of upstream's parse_test.go (nested list nodes flattened).
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("text", [t("text")]),
        ("}text", [t("}text")]),
        ("http://github.com", [t("http://github.com")]),
        ("$${string}", [t("${string}")]),
        ("$$string", [t("$string")]),
        (r"\\.\pipe\pipename", [t(r"\\.\pipe\pipename")]),
        ("${string}", [f("string")]),
        ("${string,}", [f("string", ",")]),
        ("${string,,}", [f("string", ",,")]),
        ("${string^}", [f("string", "^")]),
        ("${string^^}", [f("string", "^^")]),
        ("${string:position}", [f("string", ":", t("position"))]),
        ("${string:position:length}", [f("string", ":", t("position"), t("length"))]),
        ("${string#substring}", [f("string", "#", t("substring"))]),
        ("${string##substring}", [f("string", "##", t("substring"))]),
        ("${string%substring}", [f("string", "%", t("substring"))]),
        ("${string%%substring}", [f("string", "%%", t("substring"))]),
        ("${string/substring/replacement}", [f("string", "/", t("substring"), t("replacement"))]),
        ("${string//substring/replacement}", [f("string", "//", t("substring"), t("replacement"))]),
        ("${string/#substring/replacement}", [f("string", "/#", t("substring"), t("replacement"))]),
        ("${string/%substring/replacement}", [f("string", "/%", t("substring"), t("replacement"))]),
        ("${string=default}", [f("string", "=", t("default"))]),
        ("${string:=default}", [f("string", ":=", t("default"))]),
        ("${string:-default}", [f("string", ":-", t("default"))]),
        ("${string:?default}", [f("string", ":?", t("default"))]),
        ("${string:+default}", [f("string", ":+", t("default"))]),
        ("${#string}", [f("string", "#")]),
        ("${string#$%:*{}", [f("string", "#", t("$%:*{"))]),
        ("hello ${#string} world", [t("hello "), f("string", "#"), t(" world")]),
        (r"\\ hello ${#string} world \\", [t(r"\\ hello "), f("string", "#"), t(r" world \\")]),
        (r"${string/\/position/length}", [f("string", "/", t("/position"), t("length"))]),
        (r"${string/\/position\\/length}", [f("string", "/", t("/position\\"), t("length"))]),
        (r"${string/position/\/length}", [f("string", "/", t("position"), t("/length"))]),
        (r"${string/position/\/length\\}", [f("string", "/", t("position"), t("/length\\"))]),
        (r"${string/position/\/leng\\th}", [f("string", "/", t("position"), t("/leng\\th"))]),
        ("${string:${position}}", [f("string", ":", f("position"))]),
        (
            "${string:${stringy:position:length}:${stringz,,}}",
            [f("string", ":", f("stringy", ":", t("position"), t("length")), f("stringz", ",,"))],
        ),
        ("${string#${stringz}}", [f("string", "#", f("stringz"))]),
        ("${string=${stringz}}", [f("string", "=", f("stringz"))]),
        ("${string=prefix-${var}}", [f("string", "=", t("prefix-"), f("var"))]),
    ],
)
def test_parse_trees_match_upstream(text: str, expected: list[Any]) -> None:
    assert shape(parse(text)) == expected


@pytest.mark.parametrize(
    ("value", "args", "expected"),
    [
        ("123456789123456789", ["0", "8"], "12345678"),
        ("123456789123456789", ["1", "8"], "23456789"),
        ("123456789123456789", ["9"], "123456789"),
        ("123456789123456789", ["9", "50"], "123456789"),
        ("123456789123456789", ["-3", "2"], "78"),
        ("123456789123456789", ["-300", "3"], "123"),
        ("12345678", ["9", "1"], ""),
    ],
)
def test_substring_table_of_upstream(value: str, args: list[str], expected: str) -> None:
    assert apply_operator(":", value, args) == expected


def test_default_joins_arguments() -> None:
    assert apply_operator(":-", "", ["Hola Mundo", "-Bonjour le monde", "-Halló heimur"]) == (
        "Hola Mundo-Bonjour le monde-Halló heimur"
    )
    assert apply_operator(":-", "Hello World", ["Hola Mundo"]) == "Hello World"


def _reference_trims(s: str, pattern: str) -> tuple[str, str]:
    """Upstream's trims: ``path.Match`` on every prefix, longest first (``#`` keeps the last match)."""
    from kustomize_controller.kustomize.envsubst_funcs import _BadPattern, _glob_match

    matches = []
    try:
        matches = [k for k in range(len(s), 0, -1) if _glob_match(pattern, s[:k])]
    except _BadPattern:
        matches = []
    return (s[matches[-1]:] if matches else s), (s[matches[0]:] if matches else s)


@settings(max_examples=500, deadline=None)
@given(st.text("ab/-]^[\\", max_size=10), st.text("ab*?/[]^-\\", max_size=8))
def test_one_pass_trims_agree_with_upstreams_prefix_loop(s: str, pattern: str) -> None:
    shortest, longest = _reference_trims(s, pattern)
    assert apply_operator("#", s, [pattern]) == shortest
    assert apply_operator("##", s, [pattern]) == longest


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("op", "pattern", "expected"),
    [("#", "*/", "a/" * 9_999 + "end"), ("##", "*/", "end"), ("%", "/*", "a/" * 9_999 + "a"), ("%%", "/*", "a")],
)
def test_trimming_a_long_value_with_a_long_pattern_is_linear(op: str, pattern: str, expected: str) -> None:
    # found by fuzzing: every prefix was matched again (O(n² · m)); a 20 KB value took minutes
    value = "a/" * 10_000 + "end"
    never = "*[ab]?" * 20 + "*x*"  # matches no prefix: the worst case of the prefix loop
    assert apply_operator(op, value, [never]) == value
    assert apply_operator(op, value, [pattern]) == expected
