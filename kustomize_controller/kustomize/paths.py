"""Path rules shared by generation, confinement and the pipeline.

- :func:`secure_join` joins an untrusted relative path under a root like Go's
  ``securejoin.SecureJoin``: ``..`` never climbs above the root (it is clamped, not an error), and
  symlinks met on the way are resolved as if the root were ``/``. The result is always inside the
  root lexically; the caller still checks what the final component is.
- :func:`resolve_inside` follows symlinks for real (``os.path.realpath``) and tells whether the
  target is the root or below it. This is the check that guards every read kustomize may do.
"""

from __future__ import annotations

import os
from pathlib import Path

KUSTOMIZATION_FILE_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_MAX_LINKS = 255


def find_kustomization_file(directory: Path) -> Path | None:
    """The first recognised kustomization file in ``directory`` that is not a directory."""
    for name in KUSTOMIZATION_FILE_NAMES:
        candidate = directory / name
        if candidate.exists() and not candidate.is_dir():
            return candidate
    return None


def secure_join(root: Path, unsafe: str) -> Path:
    """Join ``unsafe`` below ``root`` without ever leaving it (symlinks are evaluated in-root)."""
    parts = [p for p in unsafe.replace("\\", "/").split("/") if p not in ("", ".")]
    current: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if current:
                current.pop()
            continue
        candidate = root.joinpath(*current, part)
        if candidate.is_symlink():
            links += 1
            if links > _MAX_LINKS:
                raise OSError(f"secure join {unsafe}: too many levels of symbolic links")
            target = os.readlink(candidate)
            target_parts = [p for p in target.split("/") if p not in ("", ".")]
            if target.startswith("/"):
                current = []
            parts = target_parts + parts
            continue
        current.append(part)
    return root.joinpath(*current)


def resolve_inside(root: Path, path: Path) -> tuple[Path, bool]:
    """``(realpath(path), inside)`` where ``inside`` means at or below ``realpath(root)``."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    inside = real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)
    return Path(real), inside


def relative_to_root(root: Path, path: Path) -> str:
    """``path`` shown relative to the root for messages (never an absolute temp-dir path)."""
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return str(path)
    return "." if rel == "." else rel
