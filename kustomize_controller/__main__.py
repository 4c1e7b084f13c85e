"""``python -m kustomize_controller``: the same entry point as the ``kustomize-controller`` script."""

import sys

from kustomize_controller.cli import main

sys.exit(main())
