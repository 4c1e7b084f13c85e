"""What decryption needs beyond the decryption Secret, made once per controller: the token cache
(``--token-cache-max-size``/``--token-cache-max-duration``, its ``gotk_token_*`` series on the
manager's registry; none at size 0, as upstream) and the workload identity of the key services
(``ObjectLevelWorkloadIdentity``, ``--default-decryption-service-account``,
``--sops-vault-configmap`` — applied only when ``RUNTIME_NAMESPACE`` is set, as upstream)."""

from __future__ import annotations

import os
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kustomize.sops.identity.workload import WorkloadIdentity, WorkloadIdentityOptions
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.manager import Manager
from kustomize_controller.runtime.tokencache import TokenCache, TokenCacheMetrics
from kustomize_controller.settings import Settings


def token_cache(settings: Settings, clock: Clock, manager: Manager) -> TokenCache[Any] | None:
    if settings.token_cache_max_size <= 0:
        return None
    return TokenCache(max_size=settings.token_cache_max_size, clock=clock,
                      max_duration=settings.token_cache_max_duration,
                      metrics=TokenCacheMetrics(manager.metrics.registry))


def workload_identity(settings: Settings, client: KubeClient, clock: Clock, manager: Manager) -> WorkloadIdentity:
    # upstream reads RUNTIME_NAMESPACE itself: the kubeconfig's namespace does not count here
    vault = (settings.runtime_namespace, settings.sops_vault_configmap) if (
        settings.runtime_namespace and settings.sops_vault_configmap) else None
    options = WorkloadIdentityOptions(
        object_level=settings.feature_gates.enabled("ObjectLevelWorkloadIdentity"),
        default_service_account=settings.default_decryption_service_account,
        vault_configmap=vault,
        environ=dict(os.environ),
    )
    return WorkloadIdentity(client=client, options=options, cache=token_cache(settings, clock, manager), clock=clock)
