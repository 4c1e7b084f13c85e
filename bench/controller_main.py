"""``python -m bench.controller_main ARGS``: the controller with one change — a per-process
``VerifiedApplies`` given to every ``ResourceManager`` the reconciler creates.

This is the one-line wiring proposed for ``reconcile/apply_step.py`` (see docs/benchmarks.md); the
benchmark runs it as a separate variant so the saving is measured end to end before the reconciler
adopts it. Everything else is ``python -m kustomize_controller`` unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

from kustomize_controller.apply.manager import ResourceManager
from kustomize_controller.apply.verified import VerifiedApplies
from kustomize_controller.reconcile import apply_step


def _wire(verified: VerifiedApplies) -> None:
    # a reconciler that already passes its own ``verified=`` keeps it (setdefault)
    def manager(**kwargs: Any) -> ResourceManager:
        kwargs.setdefault("verified", verified)
        return ResourceManager(**kwargs)

    setattr(apply_step, "ResourceManager", manager)  # noqa: B010 - the module attribute is what we replace


def main() -> int:
    _wire(VerifiedApplies())
    from kustomize_controller.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
