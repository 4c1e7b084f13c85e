"""Change sets: what the apply engine did (or found) for each object, in processing order.

An entry prints as ``Kind/namespace/name action`` exactly as fluxcd/pkg ``ssa`` does; the change set
prints one entry per line. Entries keep the API version the object was handled with, which the
inventory records next to the id. No deduplication is done here: callers append what happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from kustomize_controller.apply.objects import Object, ObjRef, version_of


class Action(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    DELETED = "deleted"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"

    @property
    def changed(self) -> bool:
        """Whether the action wrote something (the controller's ``HasChanged``)."""
        return self in (Action.CREATED, Action.CONFIGURED, Action.DELETED)


@dataclass(frozen=True, slots=True)
class ChangeSetEntry:
    ref: ObjRef
    version: str
    action: Action

    @classmethod
    def for_object(cls, obj: Object, action: Action) -> ChangeSetEntry:
        return cls(ref=ObjRef.from_object(obj), version=version_of(obj), action=action)

    @property
    def subject(self) -> str:
        return str(self.ref)

    def __str__(self) -> str:
        return f"{self.subject} {self.action}"


@dataclass(slots=True)
class ChangeSet:
    entries: list[ChangeSetEntry] = field(default_factory=list)

    def add(self, entry: ChangeSetEntry) -> None:
        self.entries.append(entry)

    def extend(self, entries: Iterable[ChangeSetEntry]) -> None:
        self.entries.extend(entries)

    def __iter__(self) -> Iterator[ChangeSetEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.entries)

    def changes(self) -> ChangeSet:
        """Only the entries that wrote something (created, configured, deleted)."""
        return ChangeSet([e for e in self.entries if e.action.changed])

    def to_map(self) -> dict[str, str]:
        """Subject → action (the ``server-side apply completed`` log payload)."""
        return {e.subject: str(e.action) for e in self.entries}

    def to_grouped_map(self) -> dict[str, list[str]]:
        """Action → subjects, in entry order (the ``GroupChangeLog`` log payload)."""
        grouped: dict[str, list[str]] = {}
        for e in self.entries:
            grouped.setdefault(str(e.action), []).append(e.subject)
        return grouped

    def refs(self, *, exclude: Iterable[Action] = ()) -> list[ObjRef]:
        excluded = set(exclude)
        return [e.ref for e in self.entries if e.action not in excluded]
