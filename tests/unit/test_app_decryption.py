"""What the controller builds for decryption from its flags: the token cache only with a positive
size (and its series on the manager's registry), --sops-vault-configmap only with RUNTIME_NAMESPACE."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from kustomize_controller.app.decryption import token_cache, workload_identity
from kustomize_controller.runtime.clock import FakeClock
from kustomize_controller.settings import FeatureGates, Settings


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()


class _Manager:
    def __init__(self) -> None:
        self.metrics = _Metrics()


def test_vault_configmap_needs_runtime_namespace() -> None:
    clock, client = FakeClock(), object()
    manager: Any = _Manager()
    no_namespace = Settings(sops_vault_configmap="vault", runtime_namespace="", token_cache_max_size=0)
    without = workload_identity(no_namespace, client, clock, manager)  # type: ignore[arg-type]
    assert without.options.vault_configmap is None
    gates = FeatureGates(values={"ObjectLevelWorkloadIdentity": True})
    settings = Settings(sops_vault_configmap="vault", runtime_namespace="flux-system",
                        default_decryption_service_account="sa", feature_gates=gates)
    with_ns = workload_identity(settings, client, clock, manager)  # type: ignore[arg-type]
    assert with_ns.options.vault_configmap == ("flux-system", "vault")
    assert with_ns.options.object_level and with_ns.options.default_service_account == "sa"


def test_token_cache_from_flags() -> None:
    manager: Any = _Manager()
    assert token_cache(Settings(token_cache_max_size=0), FakeClock(), manager) is None
    cache = token_cache(Settings(token_cache_max_size=5, token_cache_max_duration=timedelta(hours=3)), FakeClock(),
                        manager)
    assert cache is not None
    assert cache._max_size == 5 and cache._max_duration == 3600.0  # capped at one hour
    assert manager.metrics.registry.get_sample_value("gotk_token_cached_items") == 0.0
