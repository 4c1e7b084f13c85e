"""Run one target on given inputs without atheris, showing what escapes.

    python -m tests.fuzz.replay TARGET FILE [FILE ...]      # e.g. a crash from .fuzz/crashes/TARGET/
    python -m tests.fuzz.replay TARGET --hex 00ab...          # an input a failed seeded run printed
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from tests.fuzz.harness import TARGETS, load


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in TARGETS:
        print(__doc__, file=sys.stderr)
        return 2
    target = load(argv[0])
    inputs = [bytes.fromhex(argv[2])] if argv[1] == "--hex" else [Path(p).read_bytes() for p in argv[1:]]
    status = 0
    for data in inputs:
        started = time.monotonic()
        try:
            target.one_input(data)
        except BaseException:
            traceback.print_exc()
            status = 1
        print(f"{len(data)} bytes: {time.monotonic() - started:.3f} s", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
