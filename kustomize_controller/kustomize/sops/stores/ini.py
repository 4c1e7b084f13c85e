"""INI store: one branch whose items are sections, each a branch of ``key = value`` items.

Read like go-ini's defaults as sops uses them: ``[section]`` headers, ``key = value`` or
``key: value`` (trimmed), ``;``/``#`` comment lines attached to the next key or section (sops
keeps a key's comment *after* the key), quoted values (``"…"``, ``'…'``, ``\"\"\"…\"\"\"``,
`` `…` ``) unquoted, and an unquoted value ends at an inline ``;``/``#``. Keys before any header
belong to ``DEFAULT``. The ``sops`` section holds the flattened metadata.

Approximation: go-ini's rarer options (continuation lines, boolean keys, duplicate keys) are not
supported; such a file gives a clear error instead of a guess.
"""

from __future__ import annotations

from kustomize_controller.kustomize.sops.cipher import Comment
from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.stores.dotenv import value_to_string
from kustomize_controller.kustomize.sops.tree import Branch

DEFAULT_SECTION = "DEFAULT"


def _strip_comment_char(comment: str) -> str:
    if comment.startswith(";"):
        return comment.lstrip("; ")
    if comment.startswith("#"):
        return comment.lstrip("# ")
    return comment


def _unquote(raw: str) -> str:
    for quote in ('"""', "`", '"', "'"):
        if len(raw) >= 2 * len(quote) and raw.startswith(quote) and raw.endswith(quote):
            return raw[len(quote) : -len(quote)]
    for marker in (";", "#"):
        raw = raw.split(marker, 1)[0]
    return raw.strip()


def load(data: bytes) -> list[Branch]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SopsFormatError("Could not unmarshal input data: not UTF-8") from None
    sections: list[tuple[str, Branch]] = [(DEFAULT_SECTION, Branch())]
    pending: list[str] = []
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line:
            continue
        if line[0] in ";#":
            pending.append(line)
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise SopsFormatError(f"Could not unmarshal input data: unclosed section at line {number}")
            section = Branch()
            if pending:
                section.append((Comment(_strip_comment_char("\n".join(pending))), None))
                pending = []
            name = line[1:-1].strip()
            if name == DEFAULT_SECTION and len(sections) == 1 and not sections[0][1]:
                sections[0] = (name, section)  # an explicit [DEFAULT] header opens the implicit section
            else:
                sections.append((name, section))
            continue
        positions = [p for p in (line.find("="), line.find(":")) if p > 0]
        if not positions:
            raise SopsFormatError(f"Could not unmarshal input data: key-value delimiter not found at line {number}")
        cut = min(positions)
        key, value = line[:cut].strip(), _unquote(line[cut + 1 :].strip())
        current = sections[-1][1]
        if any(k == key for k, _ in current):
            raise SopsFormatError(f"Could not unmarshal input data: duplicate key at line {number}")
        current.append((key, value))
        if pending:
            current.append((Comment(_strip_comment_char("\n".join(pending))), None))
            pending = []
    return [Branch(sections)]


def _quote(value: str) -> str:
    if "\n" in value:
        return f'"""{value}"""'
    if '"' in value:
        return f"`{value}`"
    if value != value.strip() or any(c in value for c in ";#"):
        return f'"{value}"'
    return value


def emit(branches: list[Branch]) -> bytes:
    lines: list[str] = []
    for branch in branches:
        for name, section in branch:
            if isinstance(name, Comment):
                continue
            if not isinstance(section, Branch):
                raise SopsFormatError("Error encoding section: Section values should always be TreeBranches")
            if name == DEFAULT_SECTION and not section:
                continue
            items = list(section)
            if items and isinstance(items[0][0], Comment):
                lines.append(f"; {items[0][0].value}")
                items = items[1:]
            lines.append(f"[{name}]")
            for key, value in items:
                if isinstance(key, Comment):
                    continue  # a key's comment; go-ini would re-attach it, plain output omits it
                lines.append(f"{key} = {_quote(value_to_string(value))}")
            lines.append("")
    return "\n".join(lines).encode("utf-8")
