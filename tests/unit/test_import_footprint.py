"""What the controller's start-up imports: nothing the run path does not need (issue 27, the per-process
base of every shard). A fresh interpreter imports the command line and the application, as
``kustomize-controller run`` does before it starts; the modules below are loaded later, only by the
Kustomizations that use them (decryption), or by other commands and tools."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# each is a heavy module tree the controller's start-up used to import, or never needs
NOT_AT_START = (
    "kustomize_controller.kustomize.sops.decryptor",  # ciphers, stores, key services: the first decryption
    "kustomize_controller.kustomize.sops.keys.age",
    "pyrage",
    "cryptography.hazmat.primitives.ciphers.aead",
    "ruamel.yaml",  # only renders the CRD (api.crdgen.render_crd) and SOPS YAML comments
    "cel",  # CEL expressions: the first healthCheckExprs / readyExpr
    "kustomize_controller.testing",  # the embedded API server and test artifacts
    "kustomize_controller.demo",
    "kustomize_controller.diff_command",
    "kustomize_controller.approve_command",
)


@pytest.fixture(scope="module")
def started_modules() -> set[str]:
    code = (
        "import json, sys\n"
        "import kustomize_controller.cli, kustomize_controller.app.run\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", NOT_AT_START)
def test_start_up_does_not_import(started_modules: set[str], module: str) -> None:
    assert "kustomize_controller.app.run" in started_modules
    loaded = sorted(m for m in started_modules if m == module or m.startswith(module + "."))
    assert not loaded, f"{module} is imported at start-up: {loaded}"


def test_sops_names_still_resolve_on_first_use() -> None:
    import kustomize_controller.kustomize.sops as sops
    from kustomize_controller.kustomize.sops.decryptor import SopsDecryptor
    from kustomize_controller.kustomize.sops.errors import SopsKeyError

    assert sops.SopsDecryptor is SopsDecryptor
    assert sops.SopsKeyError is SopsKeyError
    assert set(sops.__all__) <= set(dir(sops)) | set(sops._HOMES)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = sops.nothing
