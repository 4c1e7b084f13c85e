#!/usr/bin/env python3
"""Install the controller into a virtual environment from wheels only: the container image's install steps.

The Dockerfile's build stage runs ``install_image.py all /src /opt/venv``; the runtime stage copies the
finished ``/opt/venv`` and nothing else, so no wheel, source archive or build tool reaches the image.
``tests/image/test_install_steps.py`` runs the very same steps on this machine (no Docker), which is how
CI notices a dependency that cannot be installed that way.

Steps (each also a subcommand, for debugging one of them):

``wheels SRC WHEELHOUSE``
    ``pip wheel`` of the project and of every dependency, pinned by ``constraints.txt``. A dependency
    published as source only (``ruamel.yaml.clibz``, built with setuptools-zig) is built into a wheel
    here, where the package index and the build tools are reachable.
``venv WHEELHOUSE VENV``
    A fresh virtual environment without pip, and ``pip install --no-index --only-binary=:all:`` of the
    project from the wheelhouse: a source archive there is an error, never a build.
``extras SRC VENV``
    The pinned kubectl (``install_kubectl.py``) into ``VENV/bin``, and the demo's ``examples/`` into
    ``VENV/share/kustomize-controller/examples`` (where ``kustomize-controller demo`` finds them).
``all SRC VENV [--wheel-cache DIR]``
    The three in order, the wheelhouse in a temporary directory removed afterwards. With
    ``--wheel-cache`` (tests/image, repeated local builds; never the Dockerfile) the dependency wheels of
    a previous run in ``DIR`` are offered to ``pip wheel`` (``--find-links``): a wheel there beats the
    index's source archive, so ``ruamel.yaml.clibz`` is not built again with zig even when pip's own
    cache is cold (pip still fetches the other wheels from the index). After a good build ``DIR`` holds
    this build's dependency wheels (never the project's own, always built from ``SRC``; only ``.whl``
    files, so a source archive never reaches it). A new or re-pinned dependency is fetched or built as
    without the cache.

Standard library only (it runs before any virtual environment exists); pip is the running Python's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = "kustomize-controller"
#: where ``kustomize-controller demo`` looks for its examples under an installation prefix
EXAMPLES_UNDER_PREFIX = Path("share") / "kustomize-controller" / "examples"
PIP_TIMEOUT = 1800  # building ruamel.yaml.clibz with zig on 2 slow cores stays well under this


def _pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, timeout=PIP_TIMEOUT)


def build_wheels(src: Path, wheelhouse: Path, *, reuse: Path | None = None) -> list[Path]:
    """Wheels of the project and its pinned dependencies in ``wheelhouse``; an error if any is not a wheel.
    ``reuse``: a directory of wheels pip may take instead of fetching or building them."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    reusing = ["--find-links", str(reuse)] if reuse is not None and reuse.is_dir() else []
    _pip("wheel", "--wheel-dir", str(wheelhouse), "--constraint", str(src / "constraints.txt"), *reusing, str(src))
    others = sorted(p.name for p in wheelhouse.iterdir() if p.suffix != ".whl")
    if others:
        raise SystemExit(f"install_image: not wheels in {wheelhouse}: {', '.join(others)}")
    return sorted(wheelhouse.glob("*.whl"))


def install_venv(wheelhouse: Path, venv: Path) -> Path:
    """A new virtual environment at ``venv`` with the project from ``wheelhouse`` alone; its python."""
    if venv.exists():
        raise SystemExit(f"install_image: {venv} exists; the image's environment is always made afresh")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "--no-index", "--only-binary=:all:", "--no-cache-dir",
         "--find-links", str(wheelhouse), PROJECT)
    return python


def install_extras(src: Path, venv: Path) -> None:
    """kubectl into ``venv/bin``; the demo's examples under the environment's prefix."""
    subprocess.run([sys.executable, str(src / "scripts" / "install_kubectl.py"), str(venv / "bin")],
                   check=True, timeout=PIP_TIMEOUT)
    examples = venv / EXAMPLES_UNDER_PREFIX
    shutil.rmtree(examples, ignore_errors=True)
    shutil.copytree(src / "examples", examples)


def save_wheel_cache(wheels: list[Path], cache: Path) -> None:
    """Replace ``cache``'s content with the dependency wheels among ``wheels`` (not the project's own)."""
    own = PROJECT.replace("-", "_") + "-"
    staging = cache.with_name(f"{cache.name}.new-{os.getpid()}")  # two runs at once never share one
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for wheel in wheels:
        if wheel.suffix == ".whl" and not wheel.name.startswith(own):
            shutil.copy2(wheel, staging / wheel.name)
    shutil.rmtree(cache, ignore_errors=True)
    try:
        staging.rename(cache)
    except OSError:  # another run saved its wheels in between: theirs are as good
        shutil.rmtree(staging, ignore_errors=True)


def install_all(src: Path, venv: Path, *, wheel_cache: Path | None = None) -> Path:
    with tempfile.TemporaryDirectory(prefix="kc-wheelhouse-") as tmp:
        wheels = build_wheels(src, Path(tmp), reuse=wheel_cache)
        python = install_venv(Path(tmp), venv)
        if wheel_cache is not None:
            save_wheel_cache(wheels, wheel_cache)
    install_extras(src, venv)
    return python


def main(argv: list[str]) -> int:
    steps = {"wheels": 2, "venv": 2, "extras": 2, "all": 2}
    wheel_cache: Path | None = None
    if len(argv) == 5 and argv[0] == "all" and argv[3] == "--wheel-cache":
        wheel_cache, argv = Path(argv[4]).absolute(), argv[:3]
    if len(argv) < 1 or argv[0] not in steps or len(argv) != steps[argv[0]] + 1:
        print(__doc__, file=sys.stderr)
        return 2
    step, first, second = argv[0], Path(argv[1]).resolve(), Path(argv[2]).absolute()
    if step == "wheels":
        build_wheels(first, second)
    elif step == "venv":
        install_venv(first, second)
    elif step == "extras":
        install_extras(first, second)
    else:
        install_all(first, second, wheel_cache=wheel_cache)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
