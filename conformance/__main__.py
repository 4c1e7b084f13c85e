"""``python -m conformance``: run the corpus under both controllers and compare (``conformance/README.md``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from . import report
from .corpus import CASES
from .run import cluster, install_upstream_crds, run_corpus, run_swap, why_skipped, write_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--json", type=Path, default=None, help="write the full records and verdicts here")
    parser.add_argument("--logs", type=Path, default=None, help="keep the controllers' logs in this directory")
    parser.add_argument("--write-docs", type=Path, default=None, help="rewrite the table in this Markdown file")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--no-swap", action="store_true", help="run the corpus only")
    parser.add_argument("--swap-only", action="store_true", help="run the swap only")
    args = parser.parse_args(argv)
    if args.list:
        for case in CASES:
            print(f"{case.name:32} {case.profile:9} {case.title}")
        return 0
    why = why_skipped()
    if why:
        print(f"skipped: differential run: {why}", file=sys.stderr)
        return 0
    wanted = {c for c in args.cases.split(",") if c}
    unknown = wanted - {c.name for c in CASES}
    if unknown:
        print(f"unknown cases: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    cases = [c for c in CASES if not wanted or c.name in wanted]
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        with cluster(logs) as (kubeconfig, _):
            asyncio.run(install_upstream_crds(kubeconfig))
            result = None if args.swap_only else asyncio.run(run_corpus(cases, kubeconfig=kubeconfig, logs=logs))
            swap = None if args.no_swap or wanted else asyncio.run(run_swap(kubeconfig=kubeconfig, logs=logs))
    failed = False
    if result is not None:
        if args.json:
            write_json(result, args.json)
        print(report.summary(result))
        failed = bool(result.unexplained)
    if swap is not None:
        print(report.swap_summary(swap))
        failed = failed or bool(swap.failures)
    if args.write_docs and result is not None:
        report.write_docs(result, swap, args.write_docs, complete=not wanted)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
