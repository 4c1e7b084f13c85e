"""The command dispatcher of ``kustomize_controller.cli`` (no builder needed)."""

from __future__ import annotations

import io
from typing import TextIO

import pytest

from kustomize_controller import cli


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return cli.main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_raw_commands_get_unparsed_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def handler(argv: list[str], out: TextIO, err: TextIO) -> int:
        seen.append(argv)
        if "--bad" in argv:
            raise cli.CommandError("unknown flag: --bad\nsecond line")
        return 7

    commands = dict(cli.COMMANDS)
    commands["run"] = cli.Command(help="the controller", raw_handler=handler)
    monkeypatch.setattr(cli, "COMMANDS", commands)
    assert run("--enable-leader-election=false", "--feature-gates", "A=true")[0] == 7
    assert run("run", "--x")[0] == 7
    assert seen == [["--enable-leader-election=false", "--feature-gates", "A=true"], ["--x"]]
    code, _, err = run("--bad")
    assert code == 1 and err == "error: unknown flag: --bad second line\n"


def test_help_and_usage_errors() -> None:
    assert run("--help")[0] == 0
    assert run("build")[0] == 2
    code, _, err = run("build", "/nonexistent-dir-for-test")
    assert code == 1 and err == "error: artifact root /nonexistent-dir-for-test is not a directory\n"
