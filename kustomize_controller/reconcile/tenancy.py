"""Which client acts for a Kustomization: impersonation and remote clusters (upstream ``Impersonator``).

Contract:
- ``spec.serviceAccountName`` (else ``--default-service-account``) → every read and write done for
  the tenant (apply, prune, health checks) impersonates ``system:serviceaccount:<ks-ns>:<name>``.
- ``spec.kubeConfig.secretRef`` → a client for the cluster in the kubeconfig stored in that Secret
  (key ``spec.kubeConfig.secretRef.key``, else ``value``, else ``value.yaml``), impersonating the
  service account on that cluster when one is set. ``exec`` credential plugins are refused unless
  ``--insecure-kubeconfig-exec``; ``insecure-skip-tls-verify`` unless ``--insecure-kubeconfig-tls``.
- ``spec.kubeConfig.configMapRef`` (cloud workload identity) is not supported: a clear error.
- Errors are ``TenantClientError``; the reconciler adds "failed to build kube client: " to the event and the
  log, not to the Ready condition (as upstream).
- Remote clients own a connection pool: ``tenant_client`` is an async context manager that closes it.
- Secrets are read with the controller's own client (not impersonated), as upstream does.
- A remote client throttles as the root client does (``kube.flowcontrol``): no client-side limiter when
  its server has priority and fairness, else the flags' limits. ``RemoteClients`` builds the remote
  clients and keeps what the probes learnt (``ThrottlingCache``): the probe is paid once per server and
  10 minutes, or once per 30 s while the server does not answer (the reconcile then fails on its first
  request, with the same error, without waiting out the probe again); each probe's outcome is logged.
  One ``RemoteClients`` per controller process, owned by the app and passed in ``TenancyOptions``.
  Remote requests count in the process's ``rest_client_*`` metrics.
"""

from __future__ import annotations

import base64
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import yaml

from kustomize_controller.api.kustomization import Kustomization
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import ClientConfig, load_kubeconfig
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.kube.flowcontrol import ThrottlingCache
from kustomize_controller.kube.ratelimit import MonotonicClock

_log = structlog.get_logger()


class TenantClientError(Exception):
    pass


class SecretGetter(Protocol):
    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...


class RemoteClients:
    """Builds the clients for remote clusters and remembers how each server throttles (module contract).

    ``qps``/``burst`` are the ``--kube-api-qps``/``--kube-api-burst`` flags (the controller's own client
    may have dropped its limiter after its probe; a remote server decides anew).
    """

    def __init__(self, *, qps: float = 50.0, burst: int = 300, clock: MonotonicClock | None = None) -> None:
        self.throttling = ThrottlingCache(qps=qps, burst=burst, clock=clock)

    async def build(self, config: ClientConfig, *, base: KubeClient) -> KubeClient:
        """A client for ``config``'s server, sharing ``base``'s request timeout and metrics."""
        cache = self.throttling
        remote = KubeClient(
            config=config,
            request_timeout=base.request_timeout,
            metrics=base.rest_metrics,
            qps=cache.qps,
            burst=cache.burst,
        )
        try:
            throttling, probed = await cache.configure(remote)
        except BaseException:
            await remote.close()  # not handed out: nobody else would close its connections
            raise
        if probed:
            _log.info(
                "remote cluster client throttling",
                server=config.server,
                mode=throttling.mode,
                qps=throttling.qps,
                burst=throttling.burst,
                probe_error=throttling.probe_error or None,
            )
        return remote


@dataclass(frozen=True)
class TenancyOptions:
    default_service_account: str = ""
    insecure_kubeconfig_exec: bool = False
    insecure_kubeconfig_tls: bool = False
    # process-wide state behind the options: the app passes its one instance
    remote_clients: RemoteClients = field(default_factory=RemoteClients, compare=False)


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def impersonated_service_account(ks: Kustomization, options: TenancyOptions) -> str | None:
    return ks.spec.service_account_name or options.default_service_account or None


def _check_kubeconfig(doc: Mapping[str, Any], options: TenancyOptions) -> None:
    for user in doc.get("users") or []:
        if (user.get("user") or {}).get("exec") and not options.insecure_kubeconfig_exec:
            raise TenantClientError(
                "kubeconfig uses an exec credential plugin, which is refused unless the controller runs with "
                "--insecure-kubeconfig-exec"
            )
    for cluster in doc.get("clusters") or []:
        if (cluster.get("cluster") or {}).get("insecure-skip-tls-verify") and not options.insecure_kubeconfig_tls:
            raise TenantClientError(
                "kubeconfig disables TLS verification, which is refused unless the controller runs with "
                "--insecure-kubeconfig-tls"
            )


async def _read_kubeconfig(ks: Kustomization, secrets: SecretGetter) -> bytes:
    ref = ks.spec.kube_config.secret_ref if ks.spec.kube_config else None
    assert ref is not None
    namespace = ks.metadata.namespace or ""
    secret_name = f"{namespace}/{ref.name}"
    try:
        secret = await secrets.get("v1", "Secret", ref.name, namespace)
    except KubeError as err:
        # the API's own message, as upstream wraps the client error (ours prefixes Kind/ns/name)
        detail = getattr(err, "message", "") or str(err)
        raise TenantClientError(f"unable to read KubeConfig secret '{secret_name}' error: {detail}") from err
    data = secret.get("data") or {}
    keys = [ref.key] if ref.key else ["value", "value.yaml"]
    for key in keys:
        if data.get(key):
            try:
                return base64.b64decode(data[key])
            except ValueError as err:
                message = f"KubeConfig secret '{secret_name}' key '{key}' is not base64"
                raise TenantClientError(message) from err
    raise TenantClientError(f"KubeConfig secret '{secret_name}' does not contain a '{keys[0]}' key with a kubeconfig")


async def remote_client(raw: bytes, *, options: TenancyOptions, base: KubeClient) -> KubeClient:
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise TenantClientError(f"invalid kubeconfig: {err}") from err
    if not isinstance(doc, Mapping):
        raise TenantClientError("invalid kubeconfig: not a mapping")
    _check_kubeconfig(doc, options)
    fd, path = tempfile.mkstemp(prefix="kubeconfig-", suffix=".yaml")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        config = await load_kubeconfig(path)
    except KubeError as err:
        raise TenantClientError(str(err).replace(path, "<secret>")) from err
    finally:
        os.unlink(path)
    return await options.remote_clients.build(config, base=base)


@contextlib.asynccontextmanager
async def tenant_client(
    ks: Kustomization, *, client: KubeClient, options: TenancyOptions
) -> AsyncIterator[KubeClient]:
    """The client to act with for ``ks`` (see the module contract)."""
    kube_config = ks.spec.kube_config
    if kube_config is not None and kube_config.config_map_ref is not None:
        raise TenantClientError(
            "spec.kubeConfig.configMapRef (cloud workload identity) is not supported by this controller; "
            "use spec.kubeConfig.secretRef"
        )
    service_account = impersonated_service_account(ks, options)
    if kube_config is not None and kube_config.secret_ref is not None:
        raw = await _read_kubeconfig(ks, client)
        remote = await remote_client(raw, options=options, base=client)
        try:
            if service_account:
                yield remote.impersonate(service_account_user(ks.metadata.namespace or "", service_account))
            else:
                yield remote
        finally:
            await remote.close()
        return
    if service_account:
        yield client.impersonate(service_account_user(ks.metadata.namespace or "", service_account))
    else:
        yield client


async def can_impersonate(ks: Kustomization, *, client: KubeClient, options: TenancyOptions) -> bool:
    """Whether the service account to impersonate still exists (deletion may then skip pruning)."""
    service_account = impersonated_service_account(ks, options)
    if not service_account or ks.spec.kube_config is not None:
        return True
    try:
        await client.get("v1", "ServiceAccount", service_account, ks.metadata.namespace)
    except NotFoundError:
        return False
    return True
