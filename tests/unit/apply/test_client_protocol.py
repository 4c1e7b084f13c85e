"""The real ``KubeClient`` satisfies the apply engine's client Protocols (checked by mypy, and here)."""

from __future__ import annotations

import inspect

from kustomize_controller.apply.client import ApplyClient, ReadClient
from kustomize_controller.kube.client import KubeClient


def _accepts(_: ApplyClient) -> None:  # mypy checks the structural match at this call
    return None


def check_static(client: KubeClient) -> ReadClient:
    _accepts(client)
    return client


def test_kube_client_has_the_protocol_methods_with_compatible_keywords() -> None:
    for name in ("get", "list", "apply", "patch", "delete"):
        proto = inspect.signature(getattr(ApplyClient, name))
        real = inspect.signature(getattr(KubeClient, name))
        for param in proto.parameters.values():
            assert param.name in real.parameters, (name, param.name)
