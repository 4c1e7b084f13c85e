"""Where Flux's binaries and CRDs are: the ``FLUX_ASSETS`` directory, and what a test lacks, in one line."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

ASSETS_ENV = "FLUX_ASSETS"
SOURCE_CONTROLLER = "source-controller"
NOTIFICATION_CONTROLLER = "notification-controller"
KUSTOMIZE_CONTROLLER = "kustomize-controller"
FLUX_CLI = "flux"


def assets_dir() -> Path | None:
    value = os.environ.get(ASSETS_ENV)
    return Path(value) if value else None


def missing(binaries: Iterable[str], *, crds: bool = False) -> str:
    """Why ``binaries`` (and, with ``crds``, the ``crds/`` directory) cannot be had from ``FLUX_ASSETS``, in
    one line; ``""`` when they can."""
    names = list(binaries)
    directory = assets_dir()
    if directory is None:
        return f"{ASSETS_ENV} is not set (a directory with {', '.join(names)}{' and crds/' if crds else ''})"
    if not directory.is_dir():
        return f"{ASSETS_ENV}={directory}: no such directory"
    lacking = [name for name in names if not os.access(directory / name, os.X_OK)]
    if crds and not any((directory / "crds").glob("*.yaml")):
        lacking.append("crds/*.yaml")
    return f"{ASSETS_ENV}={directory}: no {', '.join(lacking)}" if lacking else ""


def binary(name: str) -> Path:
    directory = assets_dir()
    if directory is None:
        raise LookupError(missing([name]))
    return directory / name


def crd_files(*groups: str) -> list[Path]:
    """The CRD files of ``FLUX_ASSETS/crds`` whose names start with one of ``groups`` (all without)."""
    directory = assets_dir()
    if directory is None:
        return []
    files = sorted((directory / "crds").glob("*.yaml"))
    return [f for f in files if not groups or f.name.startswith(groups)]
