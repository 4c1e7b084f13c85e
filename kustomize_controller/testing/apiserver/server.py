"""``ApiServer``: the embedded API server, in process, over real HTTP on 127.0.0.1.

Usage::

    async with ApiServer() as server:
        server.url              # "https://127.0.0.1:PORT" (self-signed; plain HTTP with tls=False)
        server.token            # bearer token of an admin user (group system:masters)
        server.kubeconfig_path  # kubeconfig with that token, for kubectl or kubernetes-asyncio
        server.faults.fail(method="PATCH", path="/configmaps/", status=500, count=2)
        server.requests.writes(resource="configmaps")
        server.options.throttle_share = 0.2   # a fifth of resource requests answered 429 + Retry-After
        server.options.flow_control_headers = False  # look like a server without priority and fairness
        server.client_faults.crash_after("controller", writes=3, on_crash=...)  # faults for one client

Lifecycle: ``start()`` binds the port, bootstraps the system namespaces and the ``cluster-admin``
ClusterRole, makes a throw-away serving certificate (client-go sends bearer tokens only over TLS),
and writes the kubeconfig; ``stop()`` closes every open watch, stops the listener, cuts every connection
it accepted and removes the kubeconfig directory it created. Both are idempotent. ``restart(down_for)``
(or ``go_down()`` then ``come_back()``) simulates an API server restart: connections refused and every
open one cut for a while, then the same address serves the same state again. One instance owns all of its
state: two servers in one process share nothing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import shutil
import ssl
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

from .auth import Authenticator, UserInfo
from .clientfaults import ClientFaults
from .cluster import Cluster, WallClock
from .faults import FaultInjector
from .handlers import Api, ServerOptions
from .kinds import ResourceType
from .listener import Listener
from .requestlog import RequestLog
from .tls import ServingCert, make_serving_cert

ADMIN = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))


class ApiServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_size: int = 10000,
        rbac: bool = False,
        anonymous_auth: bool = False,
        token: str | None = None,
        kubeconfig_path: str | Path | None = None,
        watch_timeout: float = 1800.0,
        bookmark_interval: float = 60.0,
        watcher_buffer: int = 10000,
        clock: WallClock | None = None,
        tls: bool = True,
        simulate_workloads: bool = False,
        populate_namespaces: bool = False,
        flow_control_headers: bool = True,
        throttle_share: float = 0.0,
    ) -> None:
        self._host = host
        self._port = port
        self.token = token or secrets.token_urlsafe(32)
        self.cluster = Cluster(history_size=history_size, clock=clock, watcher_buffer=watcher_buffer,
                               simulate_workloads=simulate_workloads, populate_namespaces=populate_namespaces)
        self.faults = FaultInjector()
        self.client_faults = ClientFaults()
        self.requests = RequestLog()
        self.authenticator = Authenticator(anonymous=anonymous_auth)
        self.authenticator.add_token(self.token, ADMIN)
        self.options = ServerOptions(rbac=rbac, watch_timeout=watch_timeout, bookmark_interval=bookmark_interval,
                                     flow_control_headers=flow_control_headers, throttle_share=throttle_share)
        self._api = Api(cluster=self.cluster, authenticator=self.authenticator, faults=self.faults,
                        request_log=self.requests, options=self.options, client_faults=self.client_faults)
        self.tokens = self._api.tokens  # the TokenRequest issuer (its public key verifies its tokens)
        self.cluster.delete_hooks.append(
            lambda rt, obj: self.faults.check_delete(rt.plural, obj["metadata"].get("namespace", ""),
                                                     obj["metadata"]["name"]))
        self._runner: web.AppRunner | None = None
        self._listener: Listener | None = None
        self._requested_kubeconfig = Path(kubeconfig_path) if kubeconfig_path else None
        self._tmpdir: str | None = None
        self._tls = tls
        self._cert: ServingCert | None = None
        self.url = ""
        self.kubeconfig_path = ""
        self._bootstrapped = False
        self._bound_port = port
        self._down = False

    # lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            return
        self._tmpdir = tempfile.mkdtemp(prefix="kc-apiserver-")
        if self._tls:
            self._cert = make_serving_cert(Path(self._tmpdir), host=self._host)
            self.cluster.ca_bundle = self._cert.cert_pem.decode()
        if not self._bootstrapped:
            self.cluster.controllers.bootstrap()
            self._bootstrapped = True
        port = await self._listen(self._port)
        scheme = "https" if self._tls else "http"
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.url = f"{scheme}://{host}:{port}"
        self.kubeconfig_path = str(self._write_kubeconfig())

    async def _listen(self, port: int) -> int:
        """Serve on ``port`` (0: any free one); returns the port bound."""
        ssl_context = None if self._cert is None else self._cert.server_context()
        listener = Listener.bind_to(self._host, port)
        runner = web.AppRunner(self._api.app(), handle_signals=False, access_log=None, shutdown_timeout=1.0)
        try:
            await runner.setup()
            await web.SockSite(runner, listener, ssl_context=ssl_context).start()
        except BaseException:
            await runner.cleanup()
            listener.close()
            raise
        self._runner, self._listener = runner, listener
        self._bound_port = int(listener.getsockname()[1])
        return self._bound_port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await self._shut(runner)
        elif not self._down:
            return
        self._down = False
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    # restart (embedded only) ------------------------------------------------------------------------

    async def go_down(self) -> int:
        """The API server process goes away, as in a restart: the listener closes (a new connection is
        refused, ECONNREFUSED) and every open connection is cut without a reply, watch streams and
        requests in flight included (clients see "Server disconnected" or a reset). Everything stored is
        kept (objects, resourceVersions, watch history), as etcd keeps it. Returns how many connections
        were cut. ``come_back()`` serves again on the same address."""
        runner = self._runner
        if runner is None:
            raise RuntimeError("ApiServer: not serving")
        self._runner = None
        self._down = True
        return await self._shut(runner)

    async def _shut(self, runner: web.AppRunner) -> int:
        """Close the listener and cut every connection it accepted, one still in its TLS handshake included
        (aiohttp knows a connection only once the handshake is done); returns how many were cut."""
        for site in list(runner.sites):
            await site.stop()  # the listening socket is closed: connecting is refused from now on
        # end every watch first: a handler only notices a cut connection when it next writes
        self.cluster.storage.close_all_watchers()
        listener, self._listener = self._listener, None
        cut = 0 if listener is None else listener.cut()
        server = runner.server
        for handler in [] if server is None else server.connections:
            transport = handler.transport
            if transport is not None and not transport.is_closing():
                transport.abort()  # at once, not on the handler's next read
        await runner.cleanup()
        if listener is not None:
            await listener.wait_closed()
        return cut

    async def come_back(self) -> None:
        """Serve again on the address ``go_down()`` left (same URL, certificate and state)."""
        if not self._down:
            raise RuntimeError("ApiServer: not down")
        await self._listen(self._bound_port)
        self._down = False

    async def restart(self, down_for: float) -> int:
        """``go_down()``, ``down_for`` seconds without a server, ``come_back()``; returns the connections cut."""
        cut = await self.go_down()
        try:
            await asyncio.sleep(down_for)
        finally:
            await self.come_back()
        return cut

    @property
    def serving(self) -> bool:
        return self._runner is not None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # kubeconfig -----------------------------------------------------------------------------------

    def kubeconfig(self, *, token: str | None = None, user: str = "admin", namespace: str = "default"
                   ) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.url}
        if self._cert is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._cert.cert_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "embedded", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token or self.token}}],
            "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": user,
                                                          "namespace": namespace}}],
            "current-context": "embedded",
            "preferences": {},
        }

    def _write_kubeconfig(self) -> Path:
        if self._requested_kubeconfig is not None:
            path = self._requested_kubeconfig
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            assert self._tmpdir is not None
            path = Path(self._tmpdir) / "kubeconfig"
        path.write_text(json.dumps(self.kubeconfig(), indent=2) + "\n")
        path.chmod(0o600)
        return path

    # test helpers ---------------------------------------------------------------------------------

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM of the serving certificate (None without TLS)."""
        return None if self._cert is None else self._cert.cert_pem

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client SSL context trusting this server (None without TLS)."""
        return None if self._cert is None else self._cert.client_context()

    def session(self, **kwargs: Any) -> aiohttp.ClientSession:
        """An aiohttp session for this server as its admin (base URL, token, TLS trust)."""
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        context = self.ssl_context()
        connector = aiohttp.TCPConnector(ssl=context) if context is not None else None
        return aiohttp.ClientSession(self.url, headers=headers, connector=connector, **kwargs)

    def add_user(self, name: str, groups: tuple[str, ...] = (), *, token: str | None = None) -> str:
        """Register a bearer token for another user; returns the token."""
        token = token or secrets.token_urlsafe(24)
        all_groups = groups if "system:authenticated" in groups else (*groups, "system:authenticated")
        self.authenticator.add_token(token, UserInfo(name, all_groups))
        return token

    def close_watches(self) -> int:
        """End every open watch stream (clients see a clean end of stream); returns how many."""
        return self.cluster.storage.close_all_watchers()

    def resync_workload_status(self, namespace: str | None = None) -> int:
        """With ``simulate_workloads``: every simulated workload's controller writes its status again
        (a new resourceVersion, nothing else changed), as real controllers do whenever pods change."""
        return self.cluster.controllers.resync_workload_status(namespace)

    def compact(self) -> None:
        """Drop the watch history: a watch or a continue token from an older resourceVersion gets 410."""
        self.cluster.storage.compact()

    @property
    def resource_version(self) -> int:
        return self.cluster.storage.resource_version

    def watcher_count(self) -> int:
        return self.cluster.storage.watcher_count()

    def resource_type(self, api_version: str, kind: str) -> ResourceType | None:
        return self.cluster.registry.lookup_kind(api_version, kind)

    def object_count(self, api_version: str, kind: str, namespace: str | None = None) -> int:
        rt = self.resource_type(api_version, kind)
        return 0 if rt is None else self.cluster.storage.count(rt.storage_key, namespace)

    def object_names(self, api_version: str, kind: str, namespace: str | None = None) -> list[str]:
        """The names of the stored objects of a kind (in every namespace when ``namespace`` is None)."""
        rt = self.resource_type(api_version, kind)
        if rt is None:
            return []
        return [str(obj["metadata"]["name"]) for obj in self.cluster.storage.iterate(rt.storage_key, namespace)]

    def finalized_objects(self, namespace: str) -> list[str]:
        """``resource/name [finalizers]`` of every object in ``namespace`` that has finalizers: what keeps
        a terminating namespace from going (a real cluster says it in the namespace's conditions)."""
        return [f"{key[1]}/{obj['metadata']['name']} {obj['metadata']['finalizers']}"
                for key in self.cluster.storage.namespaces_in_use(namespace)
                for obj in self.cluster.storage.iterate(key, namespace) if obj["metadata"].get("finalizers")]
