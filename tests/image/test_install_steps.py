"""The container image's install steps, run here without Docker (issue 22).

The Dockerfile's build stage copies a few files into ``/src`` and runs ``scripts/install_image.py all``;
this test copies the same files (read from the Dockerfile's ``COPY`` lines) into a temporary directory,
runs the same script into a fresh virtual environment — wheels built first, then installed with no
index and binaries only — and runs the controller from that environment. A dependency that can only be
installed from source with the index at hand (as ``ruamel.yaml.clibz`` once broke ``docker build``)
fails here.

It needs the package index (or pip's cache) to build the wheels, so it is marked ``image``:
``pytest -m "not image"`` leaves it out. About 40 s with pip's cache warm (2 cores, quiet), 70–120 s under heavy load.
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
    result = subprocess.run([sys.executable, str(src / "scripts" / "install_image.py"), "all", str(src), str(venv)],
                            capture_output=True, text=True, timeout=840)
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


def test_the_image_reference_is_the_manifests_and_the_package_version() -> None:
    ref = load_script("image_ref")
    text = (REPO / "manifests" / "deployment" / "kustomization.yaml").read_text()
    assert ref.image_ref(text) == f"kustomize-controller-python:{__version__}"
    assert ref.image_ref("images:\n  - name: other\n    newTag: '1'\n  - name: kustomize-controller-python\n"
                         "    newName: ghcr.io/me/kc\n    newTag: \"2.0\"\n") == "ghcr.io/me/kc:2.0"
    with pytest.raises(SystemExit, match="no images entry"):
        ref.image_ref("resources: []\n")
