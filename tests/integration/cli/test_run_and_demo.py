"""The command line users start the controller with: flags errors, help, and the demo that `make run` runs."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from kustomize_controller.cli import main


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nope"], "error: unknown flag: --nope"),
        (["run", "--concurrent", "x"], 'error: invalid argument "x" for "--concurrent" flag'),
        (["--feature-gates=Bogus=true"], "error: feature-gate 'Bogus' not supported"),
    ],
)
def test_bad_flags_fail_at_start_up_with_pflag_messages(argv: list[str], message: str) -> None:
    code, _, err = run_cli(*argv)
    assert code == 2
    assert err.startswith(message)


def test_help_lists_upstream_flags() -> None:
    code, out, _ = run_cli("--help")
    assert code == 0
    for flag in ("--concurrent int", "--enable-leader-election", "--requeue-dependency duration"):
        assert flag in out


@pytest.mark.integration
@pytest.mark.builder
def test_demo_once_converges_to_ready() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kustomize_controller", "demo", "--once", "--timeout", "90"],
        capture_output=True, text=True, timeout=110, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert json.loads(last)["ready"] is True
    assert "Deployment.apps podinfo/podinfo" in proc.stdout
    assert "web UI: http://127.0.0.1:" in proc.stdout  # make run shows the converging demo in a browser too
    # The health check (wait: true) passed; intermediate states may be too brief to be printed.
    assert "Succeeded: Health check passed in" in proc.stdout


@pytest.mark.integration
@pytest.mark.builder
def test_demo_shows_an_approval_and_a_sync_window() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kustomize_controller", "demo", "--once", "--change-management", "--timeout", "90"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["change_management"] is True
    assert "Approved     False    ApprovalRequired: Approval required for revision" in proc.stdout
    assert "SyncAllowed  False    SyncWindowClosed: Sync window closed (active: deny window" in proc.stdout
