"""YAML with its comments, for documents whose sops rules select values by comment.

Only used when the metadata sets ``encrypted_comment_regex`` or ``unencrypted_comment_regex``
(comments never change values or the MAC otherwise, and this path is slower).

How comments are placed, approximating go-yaml v3 + sops' YAML store:
- A comment is every ``#`` outside a token (scalars, quoted or block, cover their own ``#``)
  that starts a line or follows whitespace; its text is everything after the ``#``.
- An inline comment (something precedes it on its line) goes just before the innermost block
  mapping entry or list item that starts on that line, as sops does with a value's line comment
  (entries of flow collections are skipped: the comment goes before the entry holding them).
- A full-line comment goes just before the next mapping entry or list item of its document, at
  that entry's level (go-yaml's head comment) — unless it is indented deeper than that entry:
  then it closes the block above it and goes right after the nearest preceding entry indented no
  deeper than the comment (go-yaml's foot comment); the same at the end of a document.

Where go-yaml would attach a comment differently (foot comments at the end of a nested block)
a value may be judged encrypted or clear differently from sops; the tree walk then fails loudly
("does not match sops' data format" or "is encrypted but the document's rules say it should not
be"), it never emits half-decrypted data.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

import yaml

from kustomize_controller.kustomize.sops.cipher import Comment
from kustomize_controller.kustomize.sops.errors import SopsFormatError
from kustomize_controller.kustomize.sops.stores.yaml import _GoLoader
from kustomize_controller.kustomize.sops.tree import Branch


@dataclass(frozen=True, slots=True)
class _Found:
    index: int
    line: int
    column: int
    text: str
    inline: bool


@dataclass(frozen=True, slots=True)
class _Anchor:
    index: int
    line: int
    column: int
    document: int
    node: int  # id() of the key or item node
    in_flow: bool  # an entry of a flow collection ("[a, b]", "{a: b}")


_HASH_RE = re.compile(r"(?:^|(?<=[ \t]))#", re.MULTILINE)


def _comments(text: str, loader_cls: type[yaml.SafeLoader]) -> list[_Found]:
    spans = sorted(
        (t.start_mark.index, t.end_mark.index)
        for t in yaml.scan(text, Loader=loader_cls)
        if t.end_mark.index > t.start_mark.index
    )
    starts = [s for s, _ in spans]
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    found: list[_Found] = []
    skip_until = -1
    for match in _HASH_RE.finditer(text):
        index = match.start()
        if index < skip_until:
            continue  # a '#' inside a comment
        pos = bisect.bisect_right(starts, index) - 1
        if pos >= 0 and spans[pos][1] > index:
            continue  # inside a scalar, tag or anchor
        line = bisect.bisect_right(line_starts, index) - 1
        end = text.find("\n", index)
        end = len(text) if end == -1 else end
        skip_until = end
        before = text[line_starts[line] : index]
        found.append(_Found(index, line, index - line_starts[line], text[index + 1 : end], bool(before.strip())))
    return found


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, comments: list[_Found], document_starts: list[int]) -> None:
        self._loader = loader
        self._comments = comments
        self._document_starts = document_starts
        self._anchors: list[_Anchor] = []
        self._before: dict[int, list[Comment]] = {}
        self._after: dict[int, list[Comment]] = {}
        self.trailing: dict[int, list[Comment]] = {}

    def _document_of(self, index: int) -> int:
        return max(bisect.bisect_right(self._document_starts, index) - 1, 0)

    def collect(self, node: yaml.Node, in_flow: bool = False) -> None:
        if isinstance(node, yaml.MappingNode):
            flow = in_flow or bool(node.flow_style)
            for key, value in node.value:
                mark = key.start_mark
                document = self._document_of(mark.index)
                self._anchors.append(_Anchor(mark.index, mark.line, mark.column, document, id(key), flow))
                self.collect(value, flow)
        elif isinstance(node, yaml.SequenceNode):
            flow = in_flow or bool(node.flow_style)
            for item in node.value:
                mark = item.start_mark
                # block items: the column of the "- " indicator, not of the value after it
                column = mark.column - 2 if not flow and mark.column >= 2 else mark.column
                document = self._document_of(mark.index)
                self._anchors.append(_Anchor(mark.index, mark.line, column, document, id(item), flow))
                self.collect(item, flow)

    def place(self) -> None:
        self._anchors.sort(key=lambda a: a.index)
        starts = [a.index for a in self._anchors]
        for found in self._comments:
            comment = Comment(found.text, inline=found.inline)
            pos = bisect.bisect_right(starts, found.index)
            if found.inline:
                on_line = [a for a in self._anchors[:pos] if a.line == found.line and not a.in_flow]
                if on_line:
                    self._before.setdefault(on_line[-1].node, []).append(comment)
                    continue
            document = self._document_of(found.index)
            following = self._anchors[pos] if pos < len(self._anchors) else None
            if following is not None and following.document == document and following.column >= found.column:
                self._before.setdefault(following.node, []).append(comment)
                continue
            preceding = next(
                (a for a in reversed(self._anchors[:pos]) if a.document == document and a.column <= found.column),
                None,
            )
            if preceding is not None:
                self._after.setdefault(preceding.node, []).append(comment)
            else:
                self.trailing.setdefault(document, []).append(comment)

    def build(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            branch = Branch()
            for key, value in node.value:
                branch.extend((c, None) for c in self._before.get(id(key), []))
                branch.append((self._loader.construct_object(key, deep=True), self.build(value)))
                branch.extend((c, None) for c in self._after.get(id(key), []))
            return branch
        if isinstance(node, yaml.SequenceNode):
            items: list[Any] = []
            for item in node.value:
                items.extend(self._before.get(id(item), []))
                items.append(self.build(item))
                items.extend(self._after.get(id(item), []))
            return items
        return self._loader.construct_object(node, deep=True)


def _document_starts(text: str) -> list[int]:
    return [
        event.start_mark.index
        for event in yaml.parse(text, Loader=_GoLoader)
        if isinstance(event, yaml.DocumentStartEvent) and event.start_mark is not None
    ]


def load(data: bytes) -> list[Branch]:
    try:
        text = data.decode("utf-8")
        comments = _comments(text, _GoLoader)
        loader = _GoLoader(text)
        try:
            nodes = []
            while loader.check_node():
                nodes.append(loader.get_node())
            builder = _Builder(loader, comments, _document_starts(text))
            for node in nodes:
                if node is not None:
                    builder.collect(node)
            builder.place()
            branches: list[Branch] = []
            for node in nodes:
                if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
                    branches.append(Branch())
                elif isinstance(node, yaml.MappingNode):
                    branches.append(builder.build(node))
                elif isinstance(node, yaml.SequenceNode):
                    raise SopsFormatError(
                        "Error unmarshaling input YAML: YAML documents that are sequences are not supported"
                    )
                else:
                    raise SopsFormatError(
                        "Error unmarshaling input YAML: YAML documents that are values are not supported"
                    )
        finally:
            loader.dispose()
    except (yaml.YAMLError, UnicodeDecodeError, ValueError):
        raise SopsFormatError("Error unmarshaling input YAML: the document is not valid YAML") from None
    for document, trailing in builder.trailing.items():
        if branches:
            branches[min(document, len(branches) - 1)].extend((c, None) for c in trailing)
    return branches
