"""The real control-plane harness without its binaries: one line saying what is missing, and a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.controlplane import missing_assets

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_missing_assets_names_what_is_missing(tmp_path: Path) -> None:
    assert "KUBE_ASSETS is not set" in missing_assets(None)
    assert missing_assets(tmp_path / "nowhere") == f"KUBE_ASSETS={tmp_path / 'nowhere'}: no such directory"
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    assert missing_assets(tmp_path) == f"KUBE_ASSETS={tmp_path}: no executable kube-apiserver"
    (tmp_path / "kube-apiserver").write_text("#!/bin/sh\n")
    (tmp_path / "kube-apiserver").chmod(0o755)
    assert missing_assets(tmp_path) == ""  # the controller manager is optional


def _run(*args: str, assets: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBE_ASSETS"}
    if assets is not None:
        env["KUBE_ASSETS"] = assets
    return subprocess.run([sys.executable, "-m", "tests.controlplane", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_without_assets_the_runner_says_so_in_one_line_and_skips(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = _run("run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", assets=None)
    assert done.returncode == 0
    assert done.stderr.strip().splitlines() == [
        "skipped: no real control plane: KUBE_ASSETS is not set (a directory with etcd, kube-apiserver and "
        "optionally kube-controller-manager)"]
    assert not marker.exists()  # the command needs the control plane: it is not run without one
    assert _run("run", "--require", "--", "true", assets=str(tmp_path)).returncode == 2


def test_extra_users_get_tokens_of_their_own_in_the_token_file(tmp_path: Path) -> None:
    from tests.controlplane.pki import ADMIN_USER, make_pki

    pki = make_pki(tmp_path / "pki", users=("bench-ours", "bench-upstream", ADMIN_USER))
    assert set(pki.user_tokens) == {"bench-ours", "bench-upstream"}  # the admin keeps its one token
    rows = [line.split(",") for line in pki.token_file.read_text().splitlines()]
    assert [(r[0], r[1]) for r in rows] == [(pki.admin_token, ADMIN_USER),
                                            (pki.user_tokens["bench-ours"], "bench-ours"),
                                            (pki.user_tokens["bench-upstream"], "bench-upstream")]
    assert len({r[0] for r in rows}) == 3 and all(r[3] == '"system:masters"' for r in rows)
