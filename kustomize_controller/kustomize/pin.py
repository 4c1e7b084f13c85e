"""The builder version this controller is made for: the one upstream Flux pins.

Upstream's kustomize-controller v1.9 links the kustomize API v0.21.1, i.e. kustomize v5.8.1; the
registry-installable binary carrying exactly that is kubectl v1.36.3 (``scripts/install_kubectl.py``
installs it next to the Python interpreter: into the virtualenv by ``make builder``, into the image by
the Dockerfile). This module is the one definition of both versions: the installer reads it by path
(it runs before the package is installed, so this file imports nothing), and the controller warns at
start-up when the builder it found reports another kustomize version.
"""

from __future__ import annotations

PINNED_KUSTOMIZE = "v5.8.1"
PINNED_KUBECTL = "v1.36.3"

__all__ = ["PINNED_KUBECTL", "PINNED_KUSTOMIZE"]
