"""Where the client's server address and credentials come from.

Order (controller-runtime's ``config.GetConfig``): the ``--kubeconfig`` flag, then ``KUBECONFIG``
(a path list, merged), then the in-cluster service account, then ``~/.kube/config``.

kubernetes-asyncio is imported only when a kubeconfig user needs a credential plugin (exec,
OIDC/GCP providers); the in-cluster configuration and ordinary kubeconfigs (token,
token file, client certificates) are read by ``kube.kubeconfig``, which saves its ~60 MiB import.
The in-cluster token is read by ``TokenFileAuth``, which re-reads the projected token file every
minute and after a 401 (bound tokens rotate). The types they all build (``ClientConfig``, the
authenticators, ``ConfigError``) live in ``kube.clientconfig``, below both loaders, and are
re-exported here. Everything else (HTTP, watches) is ours.

Contract:
- ``await load_config(...)`` returns a ``ClientConfig``; ``ConfigError`` says what was tried.
- ``ClientConfig.auth`` yields the ``Authorization`` header value per request (``None`` for none);
  ``await auth.refresh()`` re-runs the credential plugin after a 401 and says whether it changed.
- The kubeconfig file is never written back (``persist_config=False``).

Not promised: credential caching across processes; exec plugins are re-run on each refresh.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kustomize_controller.kube.clientconfig import (
    Authenticator,
    ClientConfig,
    ConfigError,
    NoAuth,
    StaticToken,
    TokenFileAuth,
)
from kustomize_controller.kube.kubeconfig import read_kubeconfig

IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class _KubernetesAsyncioAuth:
    """Reads the Authorization value from a kubernetes-asyncio ``Configuration``.

    ``refresh()`` re-runs the kubeconfig's credential plugin (exec, OIDC, GCP) through the loader.
    """

    def __init__(self, configuration: Any, loader: Any | None) -> None:
        self._cfg = configuration
        self._loader = loader

    async def authorization(self) -> str | None:
        value = await self._cfg.get_api_key_with_prefix("BearerToken")
        if value:
            return str(value)
        basic = self._cfg.get_basic_auth_token() if self._cfg.username else None
        return str(basic) if basic else None

    async def refresh(self) -> bool:
        before = self._cfg.api_key.get("BearerToken")
        if self._loader is not None:
            await self._loader.load_and_set(self._cfg)
        return bool(self._cfg.api_key.get("BearerToken") != before)


def _from_k8s_configuration(cfg: Any, loader: Any | None, *, namespace: str, source: str) -> ClientConfig:
    return ClientConfig(
        server=str(cfg.host).rstrip("/"),
        auth=_KubernetesAsyncioAuth(cfg, loader),
        ca_file=cfg.ssl_ca_cert,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        verify_ssl=bool(cfg.verify_ssl),
        tls_server_name=getattr(cfg, "tls_server_name", None),
        proxy=getattr(cfg, "proxy", None),
        namespace=namespace,
        source=source,
    )


async def load_kubeconfig(path: str, *, context: str | None = None) -> ClientConfig:
    """Load a kubeconfig file (or an ``os.pathsep`` separated list, merged like kubectl).

    Ordinary kubeconfigs (token, token file, client certificates) are read by ``kube.kubeconfig``;
    kubernetes-asyncio is imported only for users that need a credential plugin (exec, auth-provider).
    """
    simple = read_kubeconfig(path, context=context)
    if simple is not None:
        return simple
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import kube_config
    from kubernetes_asyncio.config.config_exception import ConfigException

    cfg = Configuration()
    try:
        loader = await kube_config.load_kube_config(
            config_file=path, context=context, client_configuration=cfg, persist_config=False
        )
    except (ConfigException, OSError, ValueError, KeyError) as err:
        raise ConfigError(f"invalid kubeconfig {path}: {err}") from err
    ctx = loader.current_context or {}
    namespace = "default"
    if isinstance(ctx, Mapping):
        namespace = str((ctx.get("context") or {}).get("namespace") or "default")
    return _from_k8s_configuration(cfg, loader, namespace=namespace, source=f"kubeconfig {path}")


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def load_incluster(
    *,
    environ: Mapping[str, str] | None = None,
    token_file: str | None = None,
    ca_file: str | None = None,
    namespace_file: str = IN_CLUSTER_NAMESPACE_FILE,
) -> ClientConfig:
    """The in-cluster configuration (client-go's ``InClusterConfig``): API address from
    ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``, CA and token from the service-account
    mount; the token is re-read as it rotates (``TokenFileAuth``)."""
    env = environ if environ is not None else os.environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "in-cluster configuration unavailable: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"
        )
    token_path = token_file or f"{SERVICE_ACCOUNT_DIR}/token"
    ca_path = ca_file or f"{SERVICE_ACCOUNT_DIR}/ca.crt"
    for what, path in (("token", token_path), ("CA certificate", ca_path)):
        if not os.path.isfile(path):
            raise ConfigError(f"in-cluster configuration unavailable: service account {what} {path} not found")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6
    auth = TokenFileAuth(token_path)
    auth._read()  # fail now, not on the first request, when the token is unreadable
    return ClientConfig(
        server=f"https://{host}:{port}",
        auth=auth,
        ca_file=ca_path,
        namespace=in_cluster_namespace(namespace_file) or "default",
        source="in-cluster",
    )


def in_cluster_namespace(path: str = IN_CLUSTER_NAMESPACE_FILE) -> str | None:
    """The pod's namespace from the service account mount, or ``None`` outside a cluster."""
    try:
        value = Path(path).read_text().strip()
    except OSError:
        return None
    return value or None


async def load_config(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientConfig:
    """Load the configuration in controller-runtime's order (see the module docstring)."""
    env = environ if environ is not None else os.environ
    if kubeconfig:
        return await load_kubeconfig(kubeconfig, context=context)
    if env.get("KUBECONFIG"):
        return await load_kubeconfig(env["KUBECONFIG"], context=context)
    tried = ["--kubeconfig (unset)", "KUBECONFIG (unset)"]
    if env.get("KUBERNETES_SERVICE_HOST"):
        try:
            return load_incluster(environ=env)
        except ConfigError as err:
            tried.append(str(err))
    else:
        tried.append("in-cluster (KUBERNETES_SERVICE_HOST unset)")
    home = Path(env.get("HOME") or Path.home()) / ".kube" / "config"
    if home.is_file():
        return await load_kubeconfig(str(home), context=context)
    tried.append(f"{home} (missing)")
    raise ConfigError("no Kubernetes configuration found; tried " + ", ".join(tried))


__all__ = [
    "Authenticator",
    "ClientConfig",
    "ConfigError",
    "NoAuth",
    "StaticToken",
    "TokenFileAuth",
    "in_cluster_namespace",
    "load_config",
    "load_incluster",
    "load_kubeconfig",
]
