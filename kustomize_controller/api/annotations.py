"""Annotations that stand in for spec fields: one parser for their fixed sets of values.

The ``v1`` CRD schema stays upstream's, so our opt-in switches are annotations (``drift-detection``,
``approval``). Their values are matched after trimming blanks, case-insensitively; anything else is
an error the reconciler reports, never a silent fallback to the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

E = TypeVar("E", bound=StrEnum)


def annotation_choice(
    annotations: Mapping[str, str] | None, key: str, choices: type[E], *, default: E, error: type[ValueError]
) -> E:
    """The member of ``choices`` the annotation ``key`` selects (``default`` when absent); ``error`` otherwise."""
    raw = (annotations or {}).get(key)
    if raw is None:
        return default
    try:
        return choices(str(raw).strip().lower())
    except ValueError:
        expected = " or ".join(f"'{c.value}'" for c in choices)
        raise error(f"invalid annotation {key}: {raw!r}, expected {expected}") from None
