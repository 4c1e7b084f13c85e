"""``python -m bench [--quick] [--scenarios ...] [--sizes ...]``: run the suite, write docs/benchmarks.md."""

from __future__ import annotations

import sys

from bench.cli import main

sys.exit(main())
