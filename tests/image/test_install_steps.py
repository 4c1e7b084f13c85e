"""The container image's install steps, run here without Docker (issue 22).

The Dockerfile's build stage copies a few files into ``/src`` and runs ``scripts/install_image.py all``;
this test copies the same files (read from the Dockerfile's ``COPY`` lines) into a temporary directory,
runs the same script into a fresh virtual environment — wheels built first, then installed with no
index and binaries only — and runs the controller from that environment. A dependency that can only be
installed from source with the index at hand (as ``ruamel.yaml.clibz`` once broke ``docker build``)
fails here.

It needs the package index (PyPI or the mirror pip is configured for; no other source), so it is marked
``image``: ``pytest -m "not image"`` leaves it out. The dependency wheels of the last good run are kept in
``WHEEL_CACHE`` (``.cache/image-wheels``, git-ignored) and offered to the next run (``--wheel-cache``), so
that only the first run in a checkout builds ``ruamel.yaml.clibz`` with zig when pip's cache is cold (the
wheels step took 4 min so, 28 s with this cache, at a load average of 22–25 on 2 cores); delete the
directory to repeat that cold path, as a fresh CI checkout does.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kustomize_controller import __version__

REPO = Path(__file__).resolve().parents[2]
WHEEL_CACHE = REPO / ".cache" / "image-wheels"
pytestmark = [pytest.mark.image, pytest.mark.timeout(900)]


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_stage() -> list[str]:
    """The Dockerfile's first stage, one instruction per item (continuations joined)."""
    text = (REPO / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    stages = re.split(r"^FROM\s", joined, flags=re.MULTILINE)
    return [line.strip() for line in stages[1].splitlines()[1:] if line.strip()]


def test_the_dockerfile_runs_the_shared_install_script() -> None:
    runs = [line for line in build_stage() if line.startswith("RUN ")]
    assert len(runs) == 1 and "scripts/install_image.py all /src /opt/venv" in runs[0], runs
    copies = (REPO / "Dockerfile").read_text()
    assert "COPY --from=build /opt/venv /opt/venv" in copies
    assert "--from=build /wheels" not in copies  # nothing but the environment reaches the runtime stage


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("image")
    src = root / "src"
    src.mkdir()
    for line in build_stage():
        if line.startswith("WORKDIR "):
            assert line.split()[1] == "/src"
        if not line.startswith("COPY "):
            continue
        *sources, dest = shlex.split(line)[1:]
        target = src / dest.removeprefix("./") if dest not in ("./", ".") else src
        for source in sources:
            origin = REPO / source
            if origin.is_dir():
                shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(origin, target)
    venv = root / "venv"
    result = subprocess.run([sys.executable, str(src / "scripts" / "install_image.py"), "all", str(src), str(venv),
                             "--wheel-cache", str(WHEEL_CACHE)], capture_output=True, text=True, timeout=840)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return {"venv": venv, "log": result.stdout}


def run_in(venv: Path, *args: str) -> str:
    result = subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, timeout=120,
                            cwd=venv)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_installed_environment_runs_the_controller(installed: dict[str, Any]) -> None:
    venv: Path = installed["venv"]
    code = ("import kustomize_controller, kustomize_controller.app, kustomize_controller.cli, "
            "kustomize_controller.demo as d; "
            "print(kustomize_controller.__file__); print(kustomize_controller.__version__); "
            "print(d.default_examples())")
    module_file, version, examples = run_in(venv, "python", "-c", code).split()
    assert Path(module_file).is_relative_to(venv) and version == __version__  # the installed copy, not the checkout
    assert Path(examples) == venv / "share" / "kustomize-controller" / "examples"
    assert (Path(examples) / "kustomization.yaml").is_file()  # `kustomize-controller demo` works as installed
    assert "Usage: kustomize-controller" in run_in(venv, "kustomize-controller", "--help")
    assert "Kustomize Version: v5.8.1" in run_in(venv, "kubectl", "version", "--client")
    assert not (venv / "bin" / "pip").exists()  # no installer in the image's environment
    ui = Path(module_file).parent / "ui"  # `kustomize-controller ui` as installed: templates and static files
    for name in ("templates/base.html", "templates/macros.html", "static/fleet.js", "static/ui.css",
                 "static/vendor/cytoscape.min.js", "static/vendor/LICENSE.cytoscape"):
        assert (ui / name).is_file(), name


def test_nothing_was_built_or_fetched_at_install_time(installed: dict[str, Any]) -> None:
    log: str = installed["log"]
    install = log[log.index("install --no-index"):]
    assert "--only-binary=:all:" in log
    assert "Building wheel" not in install and "Downloading" not in install


def test_a_source_archive_in_the_wheelhouse_stops_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the old Dockerfile did (``pip download`` saved ruamel.yaml.clibz's sdist) is refused up front."""
    script = load_script("install_image")

    def fake_pip(*args: str) -> None:  # `pip download` of an sdist-only dependency
        wheelhouse = Path(args[args.index("--wheel-dir") + 1])
        (wheelhouse / "pyyaml-6.0.3-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"")
        (wheelhouse / "ruamel_yaml_clibz-0.3.7.tar.gz").write_bytes(b"")

    monkeypatch.setattr(script, "_pip", fake_pip)
    with pytest.raises(SystemExit, match=r"not wheels in .*: ruamel_yaml_clibz-0\.3\.7\.tar\.gz"):
        script.build_wheels(REPO, tmp_path / "wheels")


def test_a_wheel_cache_is_offered_to_pip_and_keeps_dependency_wheels_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("install_image")
    cache = tmp_path / "cache"
    calls: list[tuple[str, ...]] = []

    def fake_pip(*args: str) -> None:
        calls.append(args)
        wheelhouse = Path(args[args.index("--wheel-dir") + 1])
        for name in ("kustomize_controller-0.1.0-py3-none-any.whl", "ruamel_yaml_clibz-0.3.7-cp311-linux_x86_64.whl"):
            (wheelhouse / name).write_bytes(b"")

    monkeypatch.setattr(script, "_pip", fake_pip)
    script.build_wheels(REPO, tmp_path / "cold", reuse=cache)  # no cache yet: nothing to offer
    assert "--find-links" not in calls[-1]
    (cache / "old-1.0-py3-none-any.whl").parent.mkdir()
    (cache / "old-1.0-py3-none-any.whl").write_bytes(b"")
    wheels = script.build_wheels(REPO, tmp_path / "warm", reuse=cache)
    assert calls[-1][calls[-1].index("--find-links") + 1] == str(cache)
    script.save_wheel_cache(wheels, cache)
    # this build's dependency wheels only: not the project's (always built from the source), not stale ones
    assert sorted(p.name for p in cache.iterdir()) == ["ruamel_yaml_clibz-0.3.7-cp311-linux_x86_64.whl"]


def test_the_image_reference_is_the_manifests_and_the_package_version() -> None:
    ref = load_script("image_ref")
    text = (REPO / "manifests" / "deployment" / "kustomization.yaml").read_text()
    assert ref.image_ref(text) == f"kustomize-controller-python:{__version__}"
    assert ref.image_ref("images:\n  - name: other\n    newTag: '1'\n  - name: kustomize-controller-python\n"
                         "    newName: ghcr.io/me/kc\n    newTag: \"2.0\"\n") == "ghcr.io/me/kc:2.0"
    with pytest.raises(SystemExit, match="no images entry"):
        ref.image_ref("resources: []\n")
