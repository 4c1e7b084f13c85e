"""sops' ``UserError()`` text for a data key that could not be recovered (sops ``usererrors.go``).

Contract: :func:`data_key_error_text` renders, byte for byte as sops does in a pod (no colours):

    Failed to get the data key required to decrypt the SOPS file.

    Group 0: FAILED
      <key.ToString()>: FAILED
        - | <error, word-wrapped at 60 columns>
          | <continued>

    <closing text, word-wrapped at 75 columns>

A successful group is only its ``Group <i>: SUCCESS`` header. Every line of a nested block is
prefixed (blank ones too), as goware/prefixer does. Wrapping breaks at whitespace only, never
inside a word (mitchellh/go-wordwrap).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

HEADER = "Failed to get the data key required to decrypt the SOPS file."


@dataclass(frozen=True, slots=True)
class KeyFailure:
    key_name: str  # MasterKey.to_string()
    message: str


@dataclass(frozen=True, slots=True)
class GroupResult:
    failures: tuple[KeyFailure, ...]
    succeeded: bool


def wrap(text: str, limit: int) -> str:
    """go-wordwrap's ``WrapString``: existing line breaks kept, long words never split."""
    lines: list[str] = []
    for line in text.split("\n"):
        wrapped = textwrap.wrap(line, limit, break_long_words=False, break_on_hyphens=False)
        lines.extend(wrapped or [""])
    return "\n".join(lines)


def prefix(text: str, pre: str) -> str:
    return "\n".join(pre + line for line in text.split("\n"))


def _key_block(failure: KeyFailure) -> str:
    body = prefix(wrap(failure.message, 60), "  | ")
    body = "-" + body[1:]
    return f"{failure.key_name}: FAILED\n{prefix(body, '  ')}"


def _group_block(index: int, result: GroupResult) -> str:
    if result.succeeded:
        return f"Group {index}: SUCCESS"
    body = "\n\n".join(_key_block(f) for f in result.failures)
    return f"Group {index}: FAILED\n{prefix(body, '  ')}"


def data_key_error_text(groups: Sequence[GroupResult], threshold: int) -> str:
    """``threshold`` is the stored ``shamir_threshold`` (sops' ``RequiredSuccessfulKeyGroups``)."""
    if threshold == 0:
        trailer = (
            "Recovery failed because no master key was able to decrypt the file. In order for SOPS to "
            "recover the file, at least one key has to be successful, but none were."
        )
    else:
        done = sum(1 for g in groups if g.succeeded)
        trailer = (
            f"Recovery failed because the file was encrypted with a Shamir threshold of {threshold}, but "
            f"only {done} part(s) were successfully recovered, one for each successful key group. In order "
            f"for SOPS to recover the file, at least {threshold} groups have to be successful. In order for "
            "a group to be successful, decryption has to succeed with any of the keys in that key group."
        )
    blocks = "\n\n".join(_group_block(i, g) for i, g in enumerate(groups))
    return f"{HEADER}\n\n{blocks}\n\n{wrap(trailer, 75)}"
