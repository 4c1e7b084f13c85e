"""A controller that never meets a cloud key does not load the key service modules (issue 23:
its memory must not change); the first cloud key loads its provider's modules only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
KEY_MODULES = (
    "awskms",
    "aws_credentials",
    "aws_sts",
    "aws_sigv4",
    "gcpkms",
    "gcp_credentials",
    "azkv",
    "azure_credentials",
    "oauth",
    "hcvault",
    "vault_auth",
)

SCRIPT = """
import json, sys
import kustomize_controller.app
from kustomize_controller.kustomize.sops import SopsDecryptor
from kustomize_controller.kustomize.sops.formats import Format
from tests.unit.kustomize.sops.sopsgen import TESTDATA
with SopsDecryptor.from_secret_data({"age.agekey": (TESTDATA / "keys" / "age.txt").read_bytes()}, environ={}) as dec:
    dec._decrypt_file((TESTDATA / "algorithms" / "age.yaml").read_bytes(), Format.YAML)
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("kustomize_controller.kustomize.sops.keys.",
      "botocore", "boto3", "google", "azure")))))
"""


def test_age_only_controller_loads_no_key_service() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    loaded = {m.rsplit(".", 1)[1] for m in json.loads(out) if m.startswith("kustomize_controller")}
    assert loaded.isdisjoint(KEY_MODULES), loaded
    assert not [m for m in json.loads(out) if not m.startswith("kustomize_controller")]
