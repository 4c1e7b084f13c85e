"""Benchmark (not a test): the CPU of getting a many-file artifact ready for a build.

``python -m bench.extraction [--files 5000] [--repeat 5] [--dir DIR]`` packs the big scenario's artifact
(bench/big.py: one ConfigMap per file) and measures, median of ``--repeat`` runs, the user and system
CPU seconds of each stage the controller runs before kustomize: extracting it into the shared tree,
the reach (confinement walk, hashes, weights), and a build's view of it made of copies and, where the
code has them, of hard links. ``--dir`` is where the trees are written (the controller's workspace is
under ``TMPDIR``; default the system's temporary directory): creating files costs mostly kernel CPU,
which depends on the file system and on what else writes to the same disk.

Run it from another checkout (``PYTHONPATH=that/checkout python -m bench.extraction``) to compare code.
"""

from __future__ import annotations

import argparse
import inspect
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.big import big_files
from kustomize_controller.kustomize import extract, reach
from kustomize_controller.kustomize.generate import Overlay
from kustomize_controller.testing.artifacts import pack_files


def _cpu() -> tuple[float, float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime, time.perf_counter()


def _measure(into: dict[str, list[tuple[float, float, float]]], stage: str, run: Callable[..., Any],
             *args: Any, **kwargs: Any) -> Any:
    user0, sys0, wall0 = _cpu()
    out = run(*args, **kwargs)
    user1, sys1, wall1 = _cpu()
    into.setdefault(stage, []).append((user1 - user0, sys1 - sys0, wall1 - wall0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    blob = pack_files({f"app/{rel}": text for rel, text in big_files(args.files, namespace="apps").items()})
    links = "link" in inspect.signature(reach.materialise).parameters
    stages: dict[str, list[tuple[float, float, float]]] = {}
    for _ in range(args.repeat):
        base = Path(tempfile.mkdtemp(prefix="extraction-", dir=args.dir))
        try:
            (base / "tree").mkdir()
            (base / "a.tgz").write_bytes(blob)
            tree = base / "tree"
            _measure(stages, "extract", extract.extract_tarball, base / "a.tgz", tree)
            found = _measure(stages, "reach", reach.reach, tree, tree / "app", Overlay(), allow_remote=False)
            _measure(stages, "view (copies)", reach.materialise, found, tree, base / "copies")
            if links:
                _measure(stages, "view (links)", reach.materialise, found, tree, base / "links", link=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    print(f"{args.files} files, median of {args.repeat}, seconds: user / system CPU (wall)")
    for stage, runs in stages.items():
        user, system, wall = (statistics.median(r[i] for r in runs) for i in range(3))
        print(f"  {stage:14s} {user:6.3f} / {system:6.3f}  ({wall:6.3f})")


if __name__ == "__main__":
    main()
