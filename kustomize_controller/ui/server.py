"""The UI's aiohttp application: pages rendered from Jinja2 templates, live updates as Server-Sent Events, and
the actions, all as the user of the kubeconfig.

Routes:

| route | what |
| --- | --- |
| ``GET /`` | the fleet: every Kustomization the user may list, counts, search and filters |
| ``GET /graph``, ``/graph.json`` | the ``dependsOn`` graph (page, Cytoscape elements) |
| ``GET /windows`` | the fleet windows' ConfigMap and what it selects |
| ``GET /ks/{ns}/{name}`` | one Kustomization: conditions, history, source, inventory, events, spec, windows |
| ``GET /ks/{ns}/{name}/inventory`` | the inventory tree with each object's health (HTML fragment, read on demand) |
| ``GET /ks/{ns}/{name}/object?id=`` | one inventory object's live YAML, Secret values masked |
| ``GET /ks/{ns}/{name}/plan`` | the pending plan as ``diff`` computes it, and Approve |
| ``GET /fleet/select?selector=`` | the keys of the rows a label selector matches (the fleet's label filter) |
| ``GET /stream?topic=&since=`` | Server-Sent Events of a topic (``live.py``) |
| ``POST /ks/{ns}/{name}/{reconcile,suspend,resume,approve}`` | the actions (``actions.py``) |
| ``GET /static/...`` | JavaScript, CSS and the vendored graph library |

Every answer passes the security middleware (``security.py``): Host check, session cookie, same-origin and
CSRF check on POST, and the headers (CSP without inline scripts). A refusal by the API server (RBAC) is
answered 403 with the server's message; an action's JSON answer carries ``ok`` and ``message``.

``UiServer`` owns everything it starts: the informers and the hub (one task), the HTTP site; ``stop()`` ends
the streams, then the site, then the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
import structlog
from aiohttp import web

from kustomize_controller.api.changes import APPROVAL_ANNOTATION, SYNC_WINDOWS_ANNOTATION
from kustomize_controller.api.drift import DRIFT_DETECTION_ANNOTATION
from kustomize_controller.api.duration import format_duration
from kustomize_controller.apply.labelselector import parse_label_selector
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.discovery import NoKindMatchError
from kustomize_controller.kube.errors import ForbiddenError, KubeError, NotFoundError
from kustomize_controller.reconcile.preview import PreviewError
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.store import Obj
from kustomize_controller.ui import actions, model, reads, security
from kustomize_controller.ui.live import FLEET_TOPIC, LiveCache, detail_topic
from kustomize_controller.ui.plan import Planner

_log = structlog.get_logger("ui")
HERE = Path(__file__).resolve().parent
KEEPALIVE_SECONDS = 15.0
_ACTIONS = ("reconcile", "suspend", "resume", "approve")
SESSION = web.RequestKey("session", str)
CSRF = web.RequestKey("csrf", str)
_SPEC_ANNOTATIONS = (APPROVAL_ANNOTATION, DRIFT_DETECTION_ANNOTATION, SYNC_WINDOWS_ANNOTATION)


@dataclass(frozen=True)
class UiOptions:
    host: str = "127.0.0.1"
    port: int = 0
    extra_hosts: tuple[str, ...] = ()  # other names the UI is reached by (a non-loopback bind)
    namespace: str | None = None  # watch one namespace (a user who may not list cluster-wide)
    fleet_windows: tuple[str, str] | None = None  # --sync-windows-configmap
    batch: float = 0.25


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kustomize_controller.ui", "templates"),
        autoescape=True,  # every template, every value: the cluster's strings may hold markup
        undefined=jinja2.ChainableUndefined,  # cluster objects: an absent optional field renders empty
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shortrev"] = model.short_revision
    env.filters["css"] = model.css_class
    env.filters["redact"] = reads.redact_url
    env.filters["duration"] = format_duration
    return env


def _time(value: datetime | str | None, now: datetime) -> str:
    moment = value if isinstance(value, datetime) else model.parse_time(value) if value else None
    if moment is None:
        return ""
    seconds = int((now - moment).total_seconds())
    span = abs(seconds)
    text = (f"{span}s" if span < 120 else f"{span // 60}m" if span < 7200 else f"{span // 3600}h" if span < 172800
            else f"{span // 86400}d")
    relative = f"in {text}" if seconds < 0 else f"{text} ago"
    return f"{moment.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')} ({relative})"


class Pages:
    """Renders pages and live fragments from the cache (the hub's ``Renderer``)."""

    def __init__(self, *, cache: LiveCache, clock: Clock) -> None:
        self.cache = cache
        self.clock = clock
        self.env = templates()
        self.env.filters["when"] = lambda value: _time(value, self.clock.now())
        self._macros = self.env.get_template("macros.html").module

    def macro(self, macro: str, /, *args: Any, **kwargs: Any) -> str:
        return str(getattr(self._macros, macro)(*args, **kwargs))

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    # the hub's renderer ---------------------------------------------------------------------------

    def rows(self) -> list[model.Row]:
        return sorted((model.fleet_row(ks) for ks in self.cache.kustomizations.list()), key=lambda r: r.key)

    def fleet(self, keys: Iterable[str] | None) -> dict[str, Any]:
        every = self.rows()
        wanted = every if keys is None else [r for r in (self._row(k) for k in keys) if r is not None]
        deleted = [] if keys is None else [k for k in keys if self.cache.kustomizations.get(k) is None]
        return {
            "rows": [[row.key, self.macro("fleet_row", row)] for row in wanted],
            "deleted": deleted,
            "counts": self.macro("counts", model.counts(every)),
            "namespaces": sorted({r.namespace for r in every}),
        }

    def _row(self, key: str) -> model.Row | None:
        ks = self.cache.kustomizations.get(key)
        return model.fleet_row(ks) if ks is not None else None

    def detail(self, key: str) -> dict[str, Any]:
        ks = self.cache.kustomizations.get(key)
        if ks is None:
            return {"gone": True, "sections": {}}
        context = self.detail_context(ks)
        return {
            "gone": False,
            "sections": {name: self.macro(name, **context) for name in
                         ("summary", "conditions", "history", "events", "source", "windows", "spec")},
            "inventory": context["inventory_digest"],
            "suspended": context["row"].state == model.SUSPENDED,
        }

    def detail_context(self, ks: Obj) -> dict[str, Any]:
        key = str(model.object_key(ks))
        kind, src_ns, src_name = model.source_ref(ks)
        fleet, fleet_error = model.parse_fleet_windows(self.cache.fleet_configmap_object(),
                                                       source=_fleet_source(self.cache))
        items = model.inventory_items(ks)
        events = sorted(self.cache.events_of(key), reverse=True,
                        key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        annotations = (ks.get("metadata") or {}).get("annotations") or {}
        return {
            "ks": ks,
            "row": model.fleet_row(ks),
            "conditions": (ks.get("status") or {}).get("conditions") or [],
            "history": (ks.get("status") or {}).get("history") or [],
            "events": events[:100],
            "source": {"kind": kind, "namespace": src_ns, "name": src_name,
                       "object": self.cache.source(kind, src_ns, src_name) if kind in self.cache.sources else None,
                       "known": kind in self.cache.sources},
            "windows": model.windows_view(ks, fleet=fleet, fleet_error=fleet_error, now=self.clock.now()),
            "spec": ks.get("spec") or {},
            "annotations": {k: v for k, v in annotations.items() if k in _SPEC_ANNOTATIONS},
            "inventory_digest": hashlib.blake2b("\n".join(i.id for i in items).encode(), digest_size=8).hexdigest(),
            "inventory_count": len(items),
        }


def _fleet_source(cache: LiveCache) -> str:
    ref = cache.fleet_windows_ref
    return f"ConfigMap {ref[0]}/{ref[1]}" if ref is not None else ""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class UiServer:
    """The UI on ``options.host:port``, acting as ``client``'s user (module contract)."""

    def __init__(self, *, client: KubeClient, clock: Clock, options: UiOptions, planner: Planner | None = None,
                 sessions: security.Sessions | None = None) -> None:
        self.client = client
        self.clock = clock
        self.options = options
        self.planner = planner
        self.sessions = sessions or security.Sessions()
        self.cache = LiveCache(client=client, clock=clock, namespace=options.namespace,
                               fleet_windows=options.fleet_windows, batch=options.batch)
        self.pages = Pages(cache=self.cache, clock=clock)
        self.cache.hub.renderer = self.pages
        self.allowed_hosts: frozenset[str] = frozenset()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None

    # lifecycle ----------------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=64 * 1024)
        app.router.add_get("/", self._fleet)
        app.router.add_get("/graph", self._graph)
        app.router.add_get("/graph.json", self._graph_json)
        app.router.add_get("/windows", self._windows)
        app.router.add_get("/fleet/select", self._select)
        app.router.add_get("/stream", self._stream)
        app.router.add_get("/ks/{namespace}/{name}", self._detail)
        app.router.add_get("/ks/{namespace}/{name}/inventory", self._inventory)
        app.router.add_get("/ks/{namespace}/{name}/object", self._object)
        app.router.add_get("/ks/{namespace}/{name}/plan", self._plan)
        app.router.add_post("/ks/{namespace}/{name}/{verb}", self._action)
        app.router.add_static("/static/", HERE / "static", follow_symlinks=False, show_index=False)
        return app

    async def start(self) -> str:
        """Start the informers and serve; returns the URL (``http://HOST:PORT``)."""
        self._task = asyncio.create_task(self.cache.run(), name="ui-live-cache")
        runner = web.AppRunner(self.app(), handle_signals=False, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.options.host, self.options.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            await self._stop_task()
            raise
        self._runner = runner
        port = int(runner.addresses[0][1])  # the bound port (port 0: one the OS chose)
        self.allowed_hosts = security.allowed_hosts(self.options.host, port, extra=self.options.extra_hosts)
        host = self.options.host if security.is_loopback(self.options.host) or self.options.host not in (
            "0.0.0.0", "::") else "127.0.0.1"
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        return self.url

    async def _stop_task(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop(self) -> None:
        await self._stop_task()  # the hub's end closes every stream
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> UiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # security -----------------------------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not security.host_allowed(request.headers.get("Host"), self.allowed_hosts):
            return self._headers(web.Response(status=421, text="unexpected Host header: refused (only the "
                                              "addresses the UI was started on are answered)\n"))
        session = request.cookies.get(security.SESSION_COOKIE)
        fresh = not self.sessions.valid(session)
        if fresh or session is None:
            session = self.sessions.new()
        request[SESSION] = session
        request[CSRF] = self.sessions.csrf_token(session)
        if request.method not in ("GET", "HEAD"):
            if not security.origin_allowed(request.headers.get("Origin"), self.allowed_hosts):
                return self._headers(web.Response(status=403, text="cross-origin request refused\n"))
            token = request.headers.get(security.CSRF_HEADER)
            if token is None and request.content_type == "application/x-www-form-urlencoded":
                token = str((await request.post()).get(security.CSRF_FIELD) or "")
            if fresh or not self.sessions.csrf_ok(session, token):
                return self._headers(web.Response(status=403, text="missing or invalid CSRF token\n"))
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # 404, 405, …: the same headers, raised on as aiohttp wants
            self._headers(exc)
            raise
        if fresh and not response.prepared:
            response.set_cookie(security.SESSION_COOKIE, session, httponly=True, samesite="Strict", path="/")
        return self._headers(response)

    @staticmethod
    def _headers(response: web.StreamResponse) -> web.StreamResponse:
        if not response.prepared:
            response.headers.update(security.HEADERS)
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    # pages --------------------------------------------------------------------------------------------

    def _page(self, request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
        body = self.pages.render(template, csrf=request[CSRF], errors=self.cache.errors(),
                                 synced=self.cache.synced(), version=self.cache.hub.version, **context)
        return web.Response(text=body, status=status, content_type="text/html")

    def _error(self, request: web.Request, status: int, message: str) -> web.Response:
        return self._page(request, "error.html", status=status, message=message, title="Error")

    async def _fleet(self, request: web.Request) -> web.StreamResponse:
        rows = self.pages.rows()
        return self._page(request, "fleet.html", title="Fleet", rows=rows, counts=model.counts(rows),
                          namespaces=sorted({r.namespace for r in rows}), states=model.STATES)

    async def _graph(self, request: web.Request) -> web.StreamResponse:
        return self._page(request, "graph.html", title="Dependencies")

    async def _graph_json(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"version": self.cache.hub.version,
                                  "elements": model.dependency_graph(self.cache.kustomizations.list())})

    async def _windows(self, request: web.Request) -> web.StreamResponse:
        cm = self.cache.fleet_configmap_object()
        fleet, error = model.parse_fleet_windows(cm, source=_fleet_source(self.cache))
        now = self.clock.now()
        every = self.cache.kustomizations.list()
        selected = [sorted(str(model.object_key(ks)) for ks in every if w.selects(
            namespace=str(ks["metadata"].get("namespace") or ""), name=str(ks["metadata"].get("name") or ""),
            labels=ks["metadata"].get("labels") or {})) for w in fleet]  # in the order of the table's rows
        held = [row for row in self.pages.rows() if row.state in (model.HELD, model.WAITING)]
        view = model.windows_table(fleet, now=now, errors=[error] if error else [])
        return self._page(request, "windows.html", title="Sync windows", ref=self.cache.fleet_windows_ref,
                          found=cm is not None, view=view,
                          selected=selected, held=held, annotated=sorted(
                              str(model.object_key(ks)) for ks in every
                              if SYNC_WINDOWS_ANNOTATION in ((ks["metadata"].get("annotations")) or {})))

    async def _select(self, request: web.Request) -> web.StreamResponse:
        try:
            selector = parse_label_selector(request.query.get("selector", ""))
        except ValueError as err:
            return web.json_response({"error": str(err)}, status=400)
        return web.json_response({"keys": sorted(
            str(model.object_key(ks)) for ks in self.cache.kustomizations.list()
            if selector.matches((ks.get("metadata") or {}).get("labels") or {}))})

    def _ks(self, request: web.Request) -> tuple[str, str, Obj | None]:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        return namespace, name, self.cache.kustomizations.get(f"{namespace}/{name}")

    async def _detail(self, request: web.Request) -> web.StreamResponse:
        namespace, name, ks = self._ks(request)
        if ks is None:
            return self._error(request, 404, f"Kustomization/{namespace}/{name} not found "
                               f"(or not visible to you)")
        detail = self.pages.detail_context(ks)
        return self._page(request, "ks.html", title=f"{namespace}/{name}", key=f"{namespace}/{name}",
                          topic=detail_topic(f"{namespace}/{name}"), detail=detail, **detail)

    async def _inventory(self, request: web.Request) -> web.StreamResponse:
        namespace, name, ks = self._ks(request)
        if ks is None:
            return web.Response(status=404, text="not found")
        items = model.inventory_items(ks)
        health = await reads.inventory_health(self.client, items, clock=self.clock)
        html = self.pages.macro("inventory", tree=model.inventory_tree(items), health=health,
                                namespace=namespace, name=name, total=len(items), limit=reads.HEALTH_LIMIT)
        return web.Response(text=html, content_type="text/html")

    async def _object(self, request: web.Request) -> web.StreamResponse:
        namespace, name, ks = self._ks(request)
        wanted = request.query.get("id", "")
        item = next((i for i in model.inventory_items(ks) if i.id == wanted), None) if ks is not None else None
        if item is None:
            return self._error(request, 404, f"no object {wanted!r} in the inventory of "
                               f"Kustomization/{namespace}/{name}")
        try:
            text, error = await reads.object_yaml(self.client, item), ""
        except (KubeError, NoKindMatchError) as err:
            text, error = "", str(err)
        return self._page(request, "object.html", title=item.subject, item=item, yaml=text, error=error,
                          namespace=namespace, name=name)

    async def _plan(self, request: web.Request) -> web.StreamResponse:
        namespace, name, ks = self._ks(request)
        if ks is None:
            return self._error(request, 404, f"Kustomization/{namespace}/{name} not found")
        if self.planner is None:
            return self._error(request, 503, "plans need a kustomize builder (kubectl or kustomize): none found")
        try:
            view, error = await self.planner.plan(namespace=namespace, name=name), ""
        except (PreviewError, KubeError) as err:
            view, error = None, str(err)
        approvable = model.approval_manual(ks)
        return self._page(request, "plan.html", title=f"Plan of {namespace}/{name}", namespace=namespace, name=name,
                          view=view, error=error, approvable=approvable, row=model.fleet_row(ks))

    # live ---------------------------------------------------------------------------------------------

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        topic = request.query.get("topic", FLEET_TOPIC)
        if topic != FLEET_TOPIC and not (topic.startswith("ks:") and topic.count("/") == 1):
            raise web.HTTPBadRequest(text="unknown topic")
        try:
            since = int(request.query.get("since", "-1"))
        except ValueError:
            since = -1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               **security.HEADERS})
        await response.prepare(request)
        hub = self.cache.hub
        sub = hub.subscribe(topic, since=since)
        try:
            while True:
                try:
                    message = await asyncio.wait_for(sub.next(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if message is None:
                    break
                await response.write(message)
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            hub.unsubscribe(sub)
        return response

    # actions ------------------------------------------------------------------------------------------

    async def _action(self, request: web.Request) -> web.StreamResponse:
        namespace, name, verb = request.match_info["namespace"], request.match_info["name"], request.match_info["verb"]
        if verb not in _ACTIONS:
            raise web.HTTPNotFound()
        form = await request.post() if request.content_type == "application/x-www-form-urlencoded" else {}
        subject = f"Kustomization/{namespace}/{name}"
        status, message = 200, ""
        try:
            if verb == "reconcile":
                token = await actions.reconcile_now(self.client, namespace=namespace, name=name, clock=self.clock)
                message = f"{subject}: reconcile requested ({token})"
            elif verb == "suspend":
                await actions.suspend(self.client, namespace=namespace, name=name)
                message = f"{subject} suspended"
            elif verb == "resume":
                await actions.resume(self.client, namespace=namespace, name=name)
                message = f"{subject} resumed"
            else:
                plan_id = str(form.get("plan") or "")
                await actions.check_approvable(self.client, namespace=namespace, name=name)
                await actions.approve_plan(self.client, namespace=namespace, name=name, plan_id=plan_id,
                                            clock=self.clock)
                message = f"{subject}: approved plan {plan_id}"
        except ForbiddenError as err:
            status, message = 403, f"refused by the cluster's RBAC: {err.message or err}"
        except NotFoundError as err:
            status, message = 404, str(err)
        except actions.ActionError as err:
            status, message = 409, str(err)
        except KubeError as err:
            status, message = 502, str(err)
        _log.info("ui action", action=verb, kustomization=f"{namespace}/{name}", status=status)
        if "application/json" in request.headers.get("Accept", ""):
            return web.json_response({"ok": status == 200, "message": message}, status=status)
        return self._page(request, "result.html", status=status, title="Action", ok=status == 200, message=message,
                          namespace=namespace, name=name)

