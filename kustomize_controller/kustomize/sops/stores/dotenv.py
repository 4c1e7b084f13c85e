"""dotenv store: ``KEY=value`` lines, ``#`` comment lines, metadata as flat ``sops_*`` keys.

Like sops: lines are split on ``\\n`` only, empty lines are dropped, the key is everything
before the first ``=`` (not trimmed), a literal ``\\n`` in a value is a newline. On output a
newline in a value is written back as ``\\n``.
"""

from __future__ import annotations

from kustomize_controller.kustomize.sops.cipher import Comment, go_format_float
from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.tree import Branch


def load(data: bytes) -> list[Branch]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SopsFormatError("invalid dotenv input: not UTF-8") from None
    branch = Branch()
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        if line.startswith("#"):
            branch.append((Comment(line[1:]), None))
            continue
        key, sep, value = line.partition("=")
        if not sep:
            # sops quotes the line; it may be a plaintext, so only its number is given.
            raise SopsFormatError(f"invalid dotenv input line {number}: no '='")
        branch.append((key, value.replace("\\n", "\n")))
    return [branch]


def value_to_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None:
        return ""
    return str(value)


def emit(branches: list[Branch]) -> bytes:
    lines: list[str] = []
    for key, value in branches[0] if branches else []:
        if isinstance(key, Comment):
            lines.append(f"#{key.value}\n")
            continue
        if isinstance(value, Branch | list):
            raise SopsFormatError(f"cannot use complex value in dotenv file; offending key {key}")
        text = value.replace("\n", "\\n") if isinstance(value, str) else value_to_string(value)
        lines.append(f"{key}={text}\n")
    return "".join(lines).encode("utf-8")
