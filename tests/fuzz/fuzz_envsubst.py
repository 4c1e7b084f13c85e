"""Post-build substitution: the ``${...}`` grammar, strict mode, nested defaults, and the re-parse after it.

Input: ``<flags byte><variables>\\x00<manifest>``. Bit 0 of the flags selects strict mode, bit 1 the
``Always`` strategy; ``<variables>`` holds ``name=value`` lines (the values a ConfigMap or Secret would
give: anything but a newline), ``<manifest>`` is the object's YAML text as the builder wrote it.
The manifest is decoded as the build output is (``parse_documents``: ``ManifestParseError`` allowed) and
each document goes through the public ``Substituter.apply`` (variables preloaded, so nothing awaits).

Contract: only ``SubstitutionError`` escapes, its message starts with
``post build failed for '<Kind.version.group>/<name>': ``, and it never shows a variable's value (a
value may come from a Secret) unless the manifest itself holds that text. A success returns the new
text and the object parsed from it.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from kustomize_controller.kustomize.errors import ManifestParseError, SubstitutionError
from kustomize_controller.kustomize.parse import parse_documents
from kustomize_controller.kustomize.substitute import PostBuild, Substituter, object_label
from tests.fuzz.harness import Target, text


def _finish(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("Substituter.apply awaited although its variables were preloaded")


def one_input(data: bytes) -> None:
    if not data:
        return
    flags, rest = data[0], text(data[1:])
    head, _, manifest = rest.partition("\x00")
    variables = {}
    for line in head.split("\n"):
        name, eq, value = line.partition("=")
        if eq:
            variables[name] = value
    try:
        documents = parse_documents(manifest)
    except ManifestParseError:
        return
    strategy = "Always" if flags & 2 else "WithVariables"
    post_build = PostBuild(substitute=variables, substitute_strategy=strategy)
    sub = Substituter(post_build, source=None, strict=bool(flags & 1))
    sub.preload(variables)
    for document in documents:
        _substitute(sub, document.text, document.obj, variables)


def _substitute(sub: Substituter, manifest: str, obj: dict[str, Any], variables: dict[str, str]) -> None:
    try:
        result = _finish(sub.apply(manifest, obj))
    except SubstitutionError as err:
        message = str(err)
        prefix = f"post build failed for '{object_label(obj)}': "
        assert message.startswith(prefix), message
        for name, value in variables.items():
            shown = len(value) >= 6 and value not in manifest and value not in prefix and not any(
                value in n for n in variables)
            assert not (shown and value in message), f"the value of {name!r} is in the error: {message!r}"
        return
    if result is not None:
        new_text, new_obj = result
        assert isinstance(new_text, str) and isinstance(new_obj, dict)


TARGET = Target(
    name="envsubst",
    one_input=one_input,
    contract="Substituter.apply: SubstitutionError only, prefixed with the object, never showing a variable's value",
    max_len=4096,
    dictionary=(b"${", b"}", b"$$", b":-", b":=", b":+", b":?", b"##", b"%%", b"//", b"/#", b"/%", b"^^", b",,",
                b"${#", b":0:", b"*", b"?", b"[", b"]", b"\\", b"\x00", b"\n", b"=", b"apiVersion: v1\n",
                b"kind: ConfigMap\n", b"metadata:\n  name: ", b"\n---\n", b"  labels:\n", b"  annotations:\n",
                b"    kustomize.toolkit.fluxcd.io/substitute: disabled\n"),
    seeded_runs=400,
)
