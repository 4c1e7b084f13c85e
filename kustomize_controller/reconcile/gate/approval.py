"""An approval is a token, handled once: its key, and its record in the ``Approved`` condition (pure).

An approval is the pair (``approved-plan``, ``approved-at``) on the Kustomization; ``approved-at`` is an
opaque token (``kustomize-controller approve`` writes the current time) and may be absent. Its *key* is 16
hex digits of a BLAKE2b digest of the pair: bounded, and never the raw user-set token, which no status
shows. Setting either annotation anew is a new approval (a new key).

The ``v1`` status has no field for it, so the record of the last approval the controller took up is the
end of the ``Approved`` condition's message, in one fixed form that ``record_in`` parses back::

    ... [approval key=<16 hex> plan=<12 hex> live=<16 hex> applying]   taken up, about to write
    ... [approval key=<16 hex> plan=<12 hex> used]                      used up by the apply it allowed

``applying`` is written to the status before the first write of the approved plan, with the plan id and
the fingerprint of the live objects the plan was computed against (``plan.Plan.live``); ``used`` replaces
it once the apply wrote something. A controller that died in between finds ``applying``: if the plan it
computes now has the same id and the same live fingerprint, nothing of it was written and the approval may
still be used; otherwise it counts as used (``decision.py``). Only the record at the very end of the
message counts (the rest of the message quotes revisions, which come from the source).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Final, Literal

APPLYING: Final = "applying"
USED: Final = "used"
State = Literal["applying", "used"]

_KEY_BYTES = 8
_RECORD = re.compile(
    r"\[approval key=(?P<key>[0-9a-f]{16}) plan=(?P<plan>[0-9a-f]{12})(?: live=(?P<live>[0-9a-f]{16}))? "
    r"(?P<state>applying|used)\]$"
)
_PLAN_ID = re.compile(r"[0-9a-f]{12}")


def is_plan_id(text: str) -> bool:
    """Whether ``text`` has the form of a plan id (12 hex digits)."""
    return _PLAN_ID.fullmatch(text) is not None


def approval_key(plan_id: str, approved_at: str) -> str:
    """The key of the approval (``approved-plan``, ``approved-at``); ``""`` without an approved plan."""
    if not plan_id:
        return ""
    return hashlib.blake2b(f"{plan_id}\n{approved_at}".encode(), digest_size=_KEY_BYTES).hexdigest()


@dataclass(frozen=True)
class ApprovalRecord:
    key: str
    plan: str
    state: State
    live: str = ""  # applying: the live fingerprint the plan was computed against

    def used(self) -> ApprovalRecord:
        return replace(self, state=USED, live="")

    def text(self) -> str:
        live = f" live={self.live}" if self.state == APPLYING else ""
        return f"[approval key={self.key} plan={self.plan}{live} {self.state}]"


def record_in(message: str | None) -> ApprovalRecord | None:
    """The record that ends a condition message (None when it carries none)."""
    found = _RECORD.search(message or "")
    if found is None:
        return None
    state: State = APPLYING if found["state"] == APPLYING else USED
    if state == APPLYING and not found["live"]:
        state = USED  # an applying record without its fingerprint cannot be resumed
    return ApprovalRecord(key=found["key"], plan=found["plan"], state=state,
                          live=found["live"] or "" if state == APPLYING else "")


def with_record(message: str, record: ApprovalRecord | None) -> str:
    """``message`` (without any record it ended with) followed by ``record``."""
    base = _RECORD.sub("", message).rstrip()
    return f"{base} {record.text()}" if record is not None else base
