"""How many CPUs this process may use: :func:`usable_cpus`.

Contract:

- The answer is the smaller of the CPUs the process may run on (its affinity mask,
  ``os.sched_getaffinity``; ``os.cpu_count()`` where there is none) and its cgroup's CPU quota in whole
  CPUs, rounded up (a quota of 0.5 CPU is 1, of 1.5 is 2): a Deployment with ``resources.limits.cpu``
  gets that many, where ``os.cpu_count()`` would see the whole node. Never below 1.
- The quota is that of the cgroup ``/proc/self/cgroup`` names, found where ``/proc/self/mountinfo`` says
  its hierarchy is mounted, and of every ancestor up to the mount's root: the tightest one binds (a pod's
  limit sits on the pod's cgroup, its container's on a child of it). cgroup v2: ``cpu.max``
  (``"<quota> <period>"``, quota ``max`` for none); v1: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
  (quota -1 for none) of the hierarchy that has the ``cpu`` controller, which wins over v2 on a hybrid
  host. Go 1.25 sizes ``GOMAXPROCS`` by the same quota (its own process's cgroup only, rounded up, at least
  2).
- Unreadable, missing or garbled files mean "no quota there", never an error: the answer then falls back
  to the affinity. Files are read once, under ``root`` (``/``; tests build a fake tree); nothing is kept.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

AFFINITY = "affinity"
CPU_COUNT = "cpu count"
CGROUP_QUOTA = "cgroup quota"


@dataclass(frozen=True)
class UsableCpus:
    """``count`` CPUs, limited by ``source`` (``affinity``, ``cpu count`` or ``cgroup quota``)."""

    count: int
    source: str
    online: int  # the CPUs of the affinity mask (or the machine's count)
    quota: float | None = None  # the tightest cgroup quota in CPUs, None: no quota found
    cgroup: str | None = None  # the cgroup directory that sets it


@dataclass(frozen=True)
class _Mount:
    root: str  # the cgroup path mounted (``/`` unless the mount shows only part of the hierarchy)
    point: str  # where it is mounted
    version: int  # 1 or 2
    controllers: frozenset[str]  # v1: the controllers of the hierarchy (super options)


def usable_cpus(*, root: Path = Path("/"), online: int | None = None) -> UsableCpus:
    """The CPUs this process may use (module docstring); ``online`` replaces the affinity (tests)."""
    source = AFFINITY
    if online is None:
        online, source = _online()
    quota, cgroup = _quota(root) or (None, None)
    if quota is not None and math.ceil(quota) < online:
        return UsableCpus(count=max(1, math.ceil(quota)), source=CGROUP_QUOTA, online=online, quota=quota,
                          cgroup=cgroup)
    return UsableCpus(count=max(1, online), source=source, online=online, quota=quota, cgroup=cgroup)


def _online() -> tuple[int, str]:
    try:
        return len(os.sched_getaffinity(0)), AFFINITY
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1, CPU_COUNT


def _quota(root: Path) -> tuple[float, str] | None:
    """The tightest quota (CPUs, cgroup directory) of this process's cgroup and its ancestors."""
    try:
        memberships = _read(root, "/proc/self/cgroup")
        mounts = list(_mounts(_read(root, "/proc/self/mountinfo")))
    except (OSError, ValueError):
        return None
    for version, path in _cgroup_paths(memberships):
        for mount in mounts:  # the first mount of that hierarchy that shows the process's cgroup
            if mount.version == version and (version == 2 or "cpu" in mount.controllers) and _inside(path, mount):
                return _tightest(root, mount, path)
    return None


def _cgroup_paths(text: str) -> Iterator[tuple[int, str]]:
    """(version, cgroup path): v1's ``cpu`` hierarchy first, then v2's unified one."""
    v1: list[str] = []
    v2: list[str] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2.append(path)
        elif "cpu" in controllers.split(","):
            v1.append(path)
    yield from ((1, p) for p in v1)
    yield from ((2, p) for p in v2)


def _mounts(text: str) -> Iterator[_Mount]:
    for line in text.splitlines():
        # "<id> <parent> <major:minor> <root> <mount point> <options> [optional…] - <type> <source> <super options>"
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2":
            yield _Mount(root=_unescape(fields[3]), point=_unescape(fields[4]), version=2, controllers=frozenset())
        elif tail[0] == "cgroup":
            yield _Mount(root=_unescape(fields[3]), point=_unescape(fields[4]), version=1,
                         controllers=frozenset(tail[2].split(",")))


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline or backslash in a path as an octal escape (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _inside(path: str, mount: _Mount) -> bool:
    cgroup, top = PurePosixPath(path), PurePosixPath(mount.root)
    return cgroup == top or top in cgroup.parents


def _tightest(root: Path, mount: _Mount, path: str) -> tuple[float, str] | None:
    best: tuple[float, str] | None = None
    relative = PurePosixPath(path).relative_to(mount.root)
    while True:
        directory = str(PurePosixPath(mount.point) / relative)
        quota = _limit(root, directory, mount.version)
        if quota is not None and (best is None or quota < best[0]):
            best = (quota, directory)
        if relative == PurePosixPath("."):
            return best
        relative = relative.parent


def _limit(root: Path, directory: str, version: int) -> float | None:
    """The quota set on one cgroup directory, in CPUs; None: none, or unreadable."""
    try:
        if version == 2:
            fields = _read(root, f"{directory}/cpu.max").split()
            if len(fields) != 2 or fields[0] == "max":
                return None
            quota, period = int(fields[0]), int(fields[1])
        else:
            quota = int(_read(root, f"{directory}/cpu.cfs_quota_us").strip())
            period = int(_read(root, f"{directory}/cpu.cfs_period_us").strip())
    except (OSError, ValueError):
        return None
    if quota <= 0 or period <= 0:
        return None  # -1 (v1): no limit
    return quota / period


def _read(root: Path, absolute: str) -> str:
    return (root / absolute.lstrip("/")).read_text(encoding="utf-8", errors="replace")


__all__ = ["AFFINITY", "CGROUP_QUOTA", "CPU_COUNT", "UsableCpus", "usable_cpus"]
