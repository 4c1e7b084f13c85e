"""The ``flux`` CLI from ``FLUX_ASSETS`` against a kubeconfig, and what makes two of its outputs comparable.

    flux = FluxCli(kubeconfig=..., cache_dir=tmp)
    result = await flux("get", "ks", "-n", ns)          # never raises on a non-zero exit
    result.exit_code, result.stdout, result.stderr

The CLI runs with ``TZ=UTC`` (``flux trace`` prints local times), ``--kubeconfig`` and ``--cache-dir`` (its
discovery cache stays in the test's directory, not in ``~/.kube``), and a deadline (``within``) after which
it is killed.

``normalise(text, names)`` makes outputs of the same command against two controllers comparable:
``names`` maps what differs by design (namespaces, object names) to placeholders, and times, ages,
durations and UIDs become ``<time>``, ``<age>``, ``<duration>``, ``<uid>``. Nothing else is touched.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import assets
from .process import communicate


@dataclass(frozen=True)
class FluxResult:
    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"$ {shlex.join(self.argv)}\nexit {self.exit_code}\n--- stdout ---\n{self.stdout}"
                f"--- stderr ---\n{self.stderr}")


@dataclass
class FluxCli:
    kubeconfig: Path | str
    cache_dir: Path | str
    binary: Path = field(default_factory=lambda: assets.binary(assets.FLUX_CLI))

    async def __call__(self, *args: str, within: float = 120.0, cwd: Path | None = None,
                       env: Mapping[str, str] | None = None, stdin: bytes | None = None) -> FluxResult:
        argv = (str(self.binary), *args, f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}")
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "FLUX_"))}
        environ.update(TZ="UTC", **(env or {}))
        code, out, err = await communicate(argv, within=within, stdin=stdin, env=environ, cwd=cwd)
        return FluxResult(argv=argv, exit_code=code, stdout=out.decode(errors="replace"),
                          stderr=err.decode(errors="replace"))


_UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
# RFC 3339 (2026-11-28T10:00:00Z, with fractions and offsets) and Go's time.String() / default format
# (2026-11-28 10:00:00 +0000 UTC, with fractions and a monotonic suffix)
_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?"
                   r"(?:Z|[+-]\d\d:\d\d| [+-]\d{4} [A-Z]+(?: m=[+-][\d.]+)?)?")
# Go durations as printed: 1.234s, 250ms, 2m0s, 1h0m0s, 12µs
_DURATION = re.compile(r"\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:s|ms|µs|us|ns)\b|\b\d+h\d+m\b|\b\d+m\b")


def normalise(text: str, names: Mapping[str, str] | Sequence[tuple[str, str]] = (), *,
              collapse_space: bool = True) -> str:
    """``text`` with ``names`` replaced (longest first) and times, durations and UIDs masked; with
    ``collapse_space`` every run of blanks becomes one space and lines lose trailing blanks (a table's
    padding follows the width of what was masked)."""
    pairs = list(names.items()) if isinstance(names, Mapping) else list(names)
    for old, new in sorted(pairs, key=lambda pair: -len(pair[0])):
        text = text.replace(old, new)
    text = _UID.sub("<uid>", text)
    text = _TIME.sub("<time>", text)
    text = _DURATION.sub("<duration>", text)
    if collapse_space:
        text = "\n".join(re.sub(r"[ \t]+", " ", line).rstrip() for line in text.split("\n"))
    return text
