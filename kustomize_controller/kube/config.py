"""Where the client's server address and credentials come from.

Order (controller-runtime's ``config.GetConfig``): the ``--kubeconfig`` flag, then ``KUBECONFIG``
(a path list, merged), then the in-cluster service account, then ``~/.kube/config``.

kubernetes-asyncio is imported only when a kubeconfig user needs a credential plugin (exec,
OIDC/GCP providers); the in-cluster configuration and ordinary kubeconfigs (token,
token file, client certificates) are read by ``kube.kubeconfig``, which saves its ~60 MiB import.
The in-cluster token is read by ``TokenFileAuth``, which re-reads the projected token file every
minute and after a 401 (bound tokens rotate). Everything else (HTTP, watches) is ours.

Contract:
- ``await load_config(...)`` returns a ``ClientConfig``; ``ConfigError`` says what was tried.
- ``ClientConfig.auth`` yields the ``Authorization`` header value per request (``None`` for none);
  ``await auth.refresh()`` re-runs the credential plugin after a 401 and says whether it changed.
- The kubeconfig file is never written back (``persist_config=False``).

Not promised: credential caching across processes; exec plugins are re-run on each refresh.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kustomize_controller.kube.errors import KubeError
from kustomize_controller.kube.ratelimit import MonotonicClock, SystemClock

IN_CLUSTER_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class ConfigError(KubeError):
    """No usable cluster configuration could be loaded."""


class Authenticator(Protocol):
    async def authorization(self) -> str | None: ...

    async def refresh(self) -> bool: ...


class NoAuth:
    async def authorization(self) -> str | None:
        return None

    async def refresh(self) -> bool:
        return False


@dataclass
class StaticToken:
    """A fixed bearer token (tests, or a token handed over explicitly)."""

    token: str

    async def authorization(self) -> str | None:
        return f"Bearer {self.token}"

    async def refresh(self) -> bool:
        return False


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


@dataclass
class ClientConfig:
    """Everything needed to open connections to one API server."""

    server: str
    auth: Authenticator = field(default_factory=NoAuth)
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    namespace: str = "default"
    source: str = ""

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if not self.verify_ssl:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


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
    from kustomize_controller.kube.kubeconfig import read_kubeconfig

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


class TokenFileAuth:
    """A bearer token read from a file that is rotated underneath us (projected service-account
    tokens): re-read every ``period`` seconds, as client-go's cached token source does, and at once
    when ``refresh()`` is called after a 401."""

    def __init__(self, path: str, *, period: float = 60.0, clock: MonotonicClock | None = None) -> None:
        self.path = path
        self.period = period
        self._clock: MonotonicClock = clock or SystemClock()
        self._token = ""
        self._read_at: float | None = None

    def _read(self) -> bool:
        try:
            token = Path(self.path).read_text().strip()
        except OSError as err:
            if not self._token:
                raise ConfigError(f"service account token {self.path}: {err}") from err
            return False  # keep the last good token; the next period tries again
        self._read_at = self._clock.monotonic()
        changed = token != self._token
        if token:
            self._token = token
        return changed

    async def authorization(self) -> str | None:
        if self._read_at is None or self._clock.monotonic() - self._read_at >= self.period:
            self._read()
        return f"Bearer {self._token}" if self._token else None

    async def refresh(self) -> bool:
        return self._read()


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
