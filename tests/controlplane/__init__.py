"""A real control plane (etcd, kube-apiserver, kube-controller-manager) for the project's own tests.

Binaries come from ``KUBE_ASSETS`` (see ``plane.py``); nothing here builds or downloads them.
"""

from .plane import ASSETS_ENV, ControlPlane, ControlPlaneError, control_plane, missing_assets

__all__ = ["ASSETS_ENV", "ControlPlane", "ControlPlaneError", "control_plane", "missing_assets"]
