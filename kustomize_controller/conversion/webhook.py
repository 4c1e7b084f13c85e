"""The conversion webhook: an HTTPS server on ``--webhook-addr`` answering ``POST /convert``.

It runs on every replica, leader or not (the API server may call any pod behind the Service), as a
manager runnable that does not need leadership.

Contract:

- ``run()`` binds ``--webhook-addr``, then every ``refresh`` seconds (and at once) points the CRD's
  conversion at us (``crd.py``, which owns ``spec.conversion``): ``url`` when ``--webhook-url`` is
  set (``auto`` meaning the address we are bound to; written by the leader only, while every replica
  serves; a replica that becomes leader does so at once, ``leading_started``), else ``service``:
  ``--webhook-service`` in the runtime namespace. With
  ``--webhook-cert-dir`` it (re)loads ``tls.crt``/``tls.key`` from that directory (cert-manager renews
  them there; its CA injector fills the CRD's ``caBundle``); otherwise it ensures the shared
  certificate Secret (``secret.py``: created, rotated), serves its certificate and writes its CA into
  ``caBundle``.
- A refresh that fails (no CRD yet, RBAC missing, API server away) is logged (once per distinct error)
  and retried at the next one; the server keeps serving the last good certificate. ``ready`` is set
  after the first good one.
- With a CRD that serves ``v1`` alone (upstream's), there is nothing to convert: no Secret is written
  and the CRD is left alone, so upstream's manifests and RBAC keep working unchanged.
- A new certificate takes effect for new connections without restarting the server.
- Stopping (cancel) closes the listener and removes the key files written to a private temp directory.

What users see when the controller is down: requests for ``v1`` keep working (no conversion is needed,
v1 is stored); requests for an old version fail with the API server's "conversion webhook ... failed"
error until a replica is back.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from kustomize_controller.api.crdgen import CONVERSION_PATH, CONVERSION_SERVICE
from kustomize_controller.conversion.crd import default_url, ensure_crd, get_crd, service_hosts, service_reference
from kustomize_controller.conversion.review import answer
from kustomize_controller.conversion.secret import ensure_certificate
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import ConflictError, KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock, sleep_unless
from kustomize_controller.runtime.logs import get_logger
from kustomize_controller.runtime.manager import parse_bind_address

__all__ = ["AUTO_URL", "SECRET_NAME", "ConversionWebhook", "WebhookOptions"]

SECRET_NAME = "kustomize-controller-webhook-cert"
#: ``--webhook-url=auto``: ``https://<bound host>:<bound port>/convert`` (an API server on this host)
AUTO_URL = "auto"

_log = get_logger("conversion-webhook")


@dataclass(frozen=True)
class WebhookOptions:
    addr: str = ":9443"
    url: str = ""
    cert_dir: str = ""
    namespace: str = ""
    secret_name: str = SECRET_NAME
    service_name: str = CONVERSION_SERVICE  # in cluster: the Service (in ``namespace``) the CRD points at
    refresh: float = 60.0


class ConversionWebhook:
    def __init__(self, *, client: KubeClient, clock: Clock, options: WebhookOptions,
                 leading: Callable[[], bool] = lambda: True) -> None:
        self._client = client
        self._clock = clock
        self._options = options
        # with --webhook-url, only the leader points the CRD at itself: two replicas with different
        # URLs would otherwise take the CRD from each other every minute
        self._leading = leading
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._loaded: bytes = b""
        self._dir: Path | None = None
        self._last_error = ""
        self.url = ""  # where the API server is told to call (set once bound)
        self.ready = asyncio.Event()
        self._wake = asyncio.Event()  # refresh now, not at the next period (``leading_started``)

    async def run(self) -> None:
        bind = parse_bind_address(self._options.addr)
        if bind is None:
            return
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post(CONVERSION_PATH, self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._dir = Path(tempfile.mkdtemp(prefix="kc-webhook-"))
        try:
            site = web.TCPSite(runner, bind[0], bind[1], ssl_context=self._context)
            await site.start()
            host, port = _bound(site, bind)
            url = self._options.url
            if url == AUTO_URL:
                url = default_url("127.0.0.1" if host in ("0.0.0.0", "::") else host, port)
            self.url = url
            _log.info("serving", endpoint="conversion-webhook", address=f"{host}:{port}", url=url or None)
            while True:
                self._wake.clear()
                await self._refresh_logged()
                await sleep_unless(self._clock, self._options.refresh, self._wake)
        finally:
            await runner.cleanup()
            shutil.rmtree(self._dir, ignore_errors=True)

    async def leading_started(self) -> None:
        """A manager runnable that needs leadership: with ``--webhook-url``, a replica that has just become
        leader points the CRD at itself now, not at its next refresh (up to ``refresh`` later)."""
        if self._options.url:
            self._wake.set()

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except (KubeError, OSError, ValueError, RuntimeError) as err:
            if str(err) != self._last_error:  # every minute the same error would drown the log
                _log.error("conversion webhook: refresh failed, retrying every minute", error=str(err))
            self._last_error = str(err)
        else:
            if self._last_error:
                _log.info("conversion webhook: refresh succeeded again")
            self._last_error = ""
            self.ready.set()

    async def refresh(self) -> None:
        ca_bundle: bytes | None = None
        if self._options.cert_dir:  # cert-manager's files; its CA injector owns the CRD's caBundle
            directory = Path(self._options.cert_dir)
            self._load((directory / "tls.crt").read_bytes(), (directory / "tls.key").read_bytes())
        service = (service_reference(self._options.service_name, self._options.namespace)
                   if self._options.service_name and self._options.namespace else None)
        for attempt in range(3):
            try:
                crd = await get_crd(self._client)
            except NotFoundError as err:
                raise RuntimeError("the Kustomization CRD is not installed (yet)") from err
            if len(crd.get("spec", {}).get("versions") or []) < 2:
                return  # v1 only: nothing will ever be converted
            if not self._options.cert_dir:
                hosts = service_hosts(service) if service else []
                if self.url:
                    hosts.append(_host_of(self.url))
                bundle = await ensure_certificate(self._client, namespace=self._options.namespace,
                                                  name=self._options.secret_name, hosts=hosts,
                                                  now=self._clock.now())
                self._load(bundle.cert, bundle.key)
                ca_bundle = bundle.ca_bundle
            # with --webhook-url, only the leader points the CRD at itself (a stand-by keeps what is there)
            target: dict[str, Any] | None = {"url": self.url} if self.url else {"service": service} if service \
                else None
            if self.url and not self._leading():
                target = None
            try:
                if await ensure_crd(self._client, crd=crd, ca_bundle=ca_bundle, target=target):
                    _log.info("conversion webhook: CRD conversion updated", url=self.url or None,
                              service=f"{service['namespace']}/{service['name']}" if service and not self.url
                              else None)
                return
            except ConflictError:
                if attempt == 2:
                    raise

    def _load(self, cert: bytes, key: bytes) -> None:
        if cert + key == self._loaded:
            return
        assert self._dir is not None
        cert_path, key_path = self._dir / "tls.crt", self._dir / "tls.key"
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        cert_path.write_bytes(cert)
        self._context.load_cert_chain(str(cert_path), str(key_path))
        self._loaded = cert + key

    async def _handle(self, request: web.Request) -> web.Response:
        status, body = answer(await request.read())
        if status != 200:
            return web.Response(status=status, text=body)
        result = json.loads(body)["response"]["result"]
        if result["status"] != "Success":
            _log.info("conversion refused", message=result.get("message"))
        return web.Response(status=status, text=body, content_type="application/json")


def _host_of(url: str) -> str:
    rest = url.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if ":" in rest else rest


def _bound(site: web.TCPSite, bind: tuple[str, int]) -> tuple[str, int]:
    server: Any = site._server  # the only way to read an ephemeral port
    for sock in getattr(server, "sockets", None) or []:
        name = sock.getsockname()
        return str(name[0]), int(name[1])
    return bind
