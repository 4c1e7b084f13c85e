"""The benchmark suite (``python -m bench``, ``make bench``): see ``bench/cli.py`` and docs/benchmarks.md."""
