"""``make fuzz``: coverage-guided fuzzing of every target with atheris, one process per target.

    python -m tests.fuzz [TARGET ...] [--seconds 60] [--timeout 1] [--rss-limit-mb 1024] [--workdir .fuzz]

For each target a child process runs libFuzzer for ``--seconds`` with a per-input hang limit
(``-timeout``) and an RSS bound (``-rss_limit_mb``). It reads the committed corpus
(``tests/fuzz/corpus/<target>``) and the run-time seeds, and keeps what it finds in
``<workdir>/corpus/<target>`` (git-ignored) so the next run starts from there; a crash, hang or
out-of-memory input is written to ``<workdir>/crashes/<target>/`` and the target counts as failed.
The summary lists executions, time and the outcome per target; the exit status is 1 when any target
found something. Replay one input with ``python -m tests.fuzz.replay TARGET FILE``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.fuzz.harness import REPO, TARGETS

_DONE = re.compile(rb"Done (\d+) runs in (\d+) second")
_STAT = re.compile(rb"#(\d+)\s+(?:pulse|NEW|REDUCE|DONE|INITED)\s+cov: (\d+)")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help=f"default: all ({', '.join(TARGETS)})")
    parser.add_argument("--seconds", type=int, default=60, help="time budget per target (default 60)")
    parser.add_argument("--timeout", type=int, default=1, help="per-input hang limit in seconds (default 1)")
    parser.add_argument("--rss-limit-mb", type=int, default=1024, help="memory bound per process (default 1024)")
    parser.add_argument("--workdir", type=Path, default=REPO / ".fuzz", help="corpus and crashes (default .fuzz)")
    args = parser.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    return args


def _run_target(name: str, args: argparse.Namespace, seconds: float, log: Path
                ) -> tuple[int, int, float, Path | None]:
    """One libFuzzer run: (executions, coverage, seconds, what it found or None)."""
    crashes = args.workdir / "crashes" / name
    before = set(crashes.glob("*")) if crashes.is_dir() else set()
    cmd = [sys.executable, "-m", "tests.fuzz.run", name, "--workdir", str(args.workdir), "--",
           f"-max_total_time={int(seconds)}", f"-timeout={args.timeout}", f"-rss_limit_mb={args.rss_limit_mb}",
           "-print_final_stats=1"]
    started = time.monotonic()
    with log.open("wb") as out:
        rc = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    elapsed = time.monotonic() - started
    output = log.read_bytes()
    done = _DONE.search(output)
    stats = _STAT.findall(output)
    runs = int(done.group(1)) if done else (int(stats[-1][0]) if stats else 0)
    cov = int(stats[-1][1]) if stats else 0
    if rc == 0:
        return runs, cov, elapsed, None
    new = sorted(set(crashes.glob("*")) - before) if crashes.is_dir() else []
    return runs, cov, elapsed, new[0] if new else log


def _replays_fast(name: str, artifact: Path, args: argparse.Namespace) -> bool:
    """Whether the input runs within the hang limit, uninstrumented, three times out of three."""
    for _ in range(3):
        probe = subprocess.run([sys.executable, "-m", "tests.fuzz.replay", name, str(artifact)], cwd=REPO,
                               capture_output=True, text=True, check=False, timeout=120)
        times = [float(line.split(": ")[1].split()[0]) for line in probe.stderr.splitlines() if " bytes: " in line]
        if probe.returncode != 0 or not times or max(times) >= args.timeout:
            return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris is not installed: `make fuzz` installs it (pip install atheris)", file=sys.stderr)
        return 2
    rows = []
    for name in args.targets or list(TARGETS):
        log_dir = args.workdir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        print(f"fuzzing {name} for {args.seconds} s (logs: {log_dir}/{name}*.log)", flush=True)
        runs, cov, elapsed, outcome, spurious = 0, 0, 0.0, "ok", 0
        part = 0
        while args.seconds - elapsed >= 5:
            log = log_dir / (f"{name}.log" if part == 0 else f"{name}.{part}.log")
            part += 1
            result = _run_target(name, args, args.seconds - elapsed, log)
            runs, cov, elapsed = runs + result[0], max(cov, result[1]), elapsed + result[2]
            if result[3] is None:
                break
            artifact = result[3]
            if artifact is not None and artifact.name.startswith("timeout-") and _replays_fast(name, artifact, args):
                # a slow moment of a shared machine, not a slow input: keep fuzzing for the rest of the budget
                spurious += 1
                artifact.rename(artifact.with_name("spurious-" + artifact.name))
                continue
            outcome = f"FOUND: {artifact or 'see ' + str(log)}"
            break
        if spurious:
            outcome += f" ({spurious} timeout(s) under load that replay in < {args.timeout} s: ignored)"
        rows.append((name, runs, elapsed, cov, outcome))
        print(f"  {name}: {runs} executions in {elapsed:.0f} s ({runs / max(elapsed, 1e-9):.0f}/s), "
              f"coverage {cov}: {outcome}", flush=True)
    print("\ntarget        executions   seconds   exec/s   coverage   outcome")
    for name, runs, elapsed, cov, outcome in rows:
        print(f"{name:<13} {runs:>10} {elapsed:>9.0f} {runs / max(elapsed, 1e-9):>8.0f} {cov:>10}   {outcome}")
    return 0 if all(row[4].startswith("ok") for row in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
