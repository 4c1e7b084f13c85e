"""HTTP handlers: authentication, impersonation, authorisation, faults, routing, and the request log.

One aiohttp application serves ``/version``, the health endpoints, discovery and every resource path. Each
request goes through, in order: authentication → impersonation → request log entry → injected latency and
failures → routing → authorisation (RBAC when enabled, always for anonymous users) → the operation in
``Cluster``. Failures are answered with the real ``Status`` body; an unexpected exception is a 500
``InternalError`` (and is logged) rather than a dropped connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from . import errors, openapi, reads, routing
from .auth import ANONYMOUS, Authenticator, UserInfo, impersonate
from .clientfaults import ClientFaults
from .cluster import PATCH_TYPES, Cluster, WriteContext
from .conversion import Converter
from .errors import ApiStatusError
from .faults import FaultInjector
from .kinds import ResourceType
from .objects import with_version
from .rbac import Attributes, Authorizer, forbidden_message
from .requestlog import WRITE_VERBS, RequestLog, RequestRecord
from .selectors import parse_field_selector, parse_label_selector
from .storage import encode
from .tokens import TokenIssuer
from .versioned import VersionedRequests
from .watch import WatchRequest, serve_watch

log = logging.getLogger(__name__)

USER_KEY = web.RequestKey("user", UserInfo)
INFO_KEY = web.RequestKey("info", dict[str, Any])

VERSION_INFO = {
    "major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36",
    "gitVersion": "v1.36.0-embedded", "gitCommit": "embedded", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "python", "compiler": "python", "platform": "linux/amd64",
}


@dataclass
class ServerOptions:
    rbac: bool = False
    watch_timeout: float = 1800.0
    bookmark_interval: float = 60.0
    # API Priority and Fairness, as a kube-apiserver since 1.20 shows it: every answer names the flow
    # schema and priority level that classified the request (clients turn their own limiter off on it)
    flow_control_headers: bool = True
    # the share (0..1) of resource requests answered 429 + Retry-After, as APF does when a priority
    # level's queues are full; drawn from ``throttle_rng`` (seeded, so a test run is reproducible)
    throttle_share: float = 0.0
    throttle_retry_after: int = 1
    throttle_rng: random.Random = field(default_factory=lambda: random.Random(0))


# the UIDs of the "global-default" flow schema and priority level of a fresh cluster (fixed here)
FLOW_SCHEMA_UID = "7c8c6f3e-2f4c-4a51-9d7e-0c1f0f9b8a01"
PRIORITY_LEVEL_UID = "4b1b7d2a-8e2c-4f0e-a6c3-5d2e8f1c9b02"


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=encode(body), status=status, content_type="application/json")


def error_response(err: ApiStatusError) -> web.Response:
    body = err.body()
    if not err.reason:
        body.pop("reason", None)
    response = json_response(body, err.code)
    retry_after = (err.details or {}).get("retryAfterSeconds")
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def _cut(request: web.Request) -> web.StreamResponse:
    """Abort the request's connection without an answer (a lost connection)."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=499)


class Api:
    def __init__(self, *, cluster: Cluster, authenticator: Authenticator, faults: FaultInjector,
                 request_log: RequestLog, options: ServerOptions, client_faults: ClientFaults | None = None
                 ) -> None:
        self.cluster = cluster
        self.authenticator = authenticator
        self.faults = faults
        self.client_faults = client_faults or ClientFaults()
        self.log = request_log
        self.options = options
        self.authorizer = Authorizer(cluster.storage)
        self._yaml = YAML(typ="safe", pure=True)
        # requests for a custom resource's non-storage version convert (versioned.py, conversion.py)
        self.versioned = VersionedRequests(cluster, Converter(cluster.registry))
        self.tokens = TokenIssuer()  # serviceaccounts/token (tokens.py)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        app.on_response_prepare.append(self._flow_control_headers)
        return app

    async def _flow_control_headers(self, request: web.Request, response: web.StreamResponse) -> None:
        if self.options.flow_control_headers:
            response.headers["X-Kubernetes-PF-FlowSchema-UID"] = FLOW_SCHEMA_UID
            response.headers["X-Kubernetes-PF-PriorityLevel-UID"] = PRIORITY_LEVEL_UID

    def _throttled(self, request: web.Request) -> ApiStatusError | None:
        """APF's answer to a request it sheds (health and version endpoints are exempt, as on a cluster)."""
        share = self.options.throttle_share
        if share <= 0 or not request.path.startswith(("/api/", "/apis/")):
            return None
        if self.options.throttle_rng.random() >= share:
            return None
        err = ApiStatusError(429, "TooManyRequests", "Too many requests, please try again later.")
        err.details = {"retryAfterSeconds": self.options.throttle_retry_after}
        return err

    # middleware: authn, impersonation, faults, log --------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        info: dict[str, Any] = {"verb": "", "user": ""}
        request[INFO_KEY] = info
        status = 500
        client_faults = self.client_faults
        tracked = False
        try:
            user = self.authenticator.authenticate(request.headers)
            info["user"] = user.name
            user = impersonate(user, request.headers, self.authorizer.may_impersonate)
            info["user"] = user.name
            request[USER_KEY] = user
            tracked = client_faults.track(user.name, request.transport)
            delay = self.faults.latency_for(request.method, request.path)
            if delay:
                await asyncio.sleep(delay)
            if tracked:
                # a faulted client (clientfaults.py): with the body read here nothing below waits before
                # storing (but a conversion webhook call, for a non-storage version), so a client cut off
                # now cannot have a write stored after its crash
                if request.can_read_body:
                    await request.read()
                if (not await client_faults.held(user.name, request.method, request.path,
                                                 dry_run="dryRun" in request.query, transport=request.transport)
                        or client_faults.is_cut(user.name)):
                    status = 499
                    if request.transport is not None:
                        request.transport.abort()
                    return web.Response(status=499)
            rule = self.faults.rule_for(request.method, request.path, dry_run="dryRun" in request.query)
            if rule is not None and rule.drop:
                status = 499
                return _cut(request)
            injected = rule.error if rule is not None else self._throttled(request)
            if injected is not None:
                raise injected
            response: web.StreamResponse = await handler(request)
            status = response.status
            if (info["verb"] in WRITE_VERBS and not info.get("dry_run", False) and status < 400
                    and not response.prepared):
                lost = self.faults.rule_for(request.method, request.path, stored=True)
                if lost is not None and lost.drop:
                    status = 499
                    return _cut(request)  # stored, but the connection is lost before the answer (faults.py)
                if lost is not None:
                    raise lost.error  # stored, but the client hears a failure (faults.py)
            if tracked:
                client_faults.served(user.name, verb=info["verb"], resource=info.get("resource", ""),
                                     status=status, dry_run=info.get("dry_run", False))
            if info.get("deprecation") and not response.prepared:
                # a deprecated CRD version: kube-apiserver warns on every request for it
                response.headers.add("Warning", _warning_value(info["deprecation"]))
            return response
        except ApiStatusError as err:
            status = err.code
            return error_response(err)
        except (ConnectionResetError, asyncio.CancelledError):
            status = 499
            raise
        except Exception as err:
            log.exception("embedded apiserver: unexpected error serving %s %s", request.method, request.path)
            status = 500
            return error_response(errors.internal_error(f"{type(err).__name__}: {err}"))
        finally:
            if tracked:
                client_faults.untrack(info["user"], request.transport)
            self.log.append(RequestRecord(
                method=request.method, path=request.path, query=request.query_string, status=status,
                user=info["user"], verb=info["verb"], group=info.get("group", ""),
                resource=info.get("resource", ""), subresource=info.get("subresource", ""),
                namespace=info.get("namespace", ""), name=info.get("name", ""),
                dry_run=info.get("dry_run", False), content_type=request.content_type,
                field_manager=request.query.get("fieldManager", ""),
            ))

    # dispatch -------------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        user: UserInfo = request.get(USER_KEY, ANONYMOUS)
        if not path.startswith(("/api/", "/apis/")) and path not in ("/api", "/apis"):
            return self._non_resource(request, user)
        target = routing.parse(self.cluster.registry, path)
        if isinstance(target, routing.Discovery):
            self._authorize_path(user, "get", path)
            if request.method != "GET":
                raise errors.method_not_allowed()
            return json_response(self._discovery(target))
        return await self._resource(request, user, target)

    def _non_resource(self, request: web.Request, user: UserInfo) -> web.StreamResponse:
        path = request.path
        self._authorize_path(user, request.method.lower() if request.method != "GET" else "get", path)
        if path == "/version":
            return json_response(VERSION_INFO)
        if path in ("/healthz", "/livez", "/readyz", "/healthz/ping", "/livez/ping", "/readyz/ping"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/openapi/v3":
            return json_response(openapi.index(self.cluster.registry))
        if path.startswith("/openapi/v3/"):
            parts = path[len("/openapi/v3/"):].split("/")
            group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (
                (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("", ""))
            doc = openapi.document(self.cluster.registry, group, version) if version else None
            if doc is not None:
                return json_response(doc)
        raise errors.page_not_found()

    def _authorize_path(self, user: UserInfo, verb: str, path: str) -> None:
        if not (self.options.rbac or user.anonymous):
            return
        attrs = Attributes(verb, "", "", "", "", "", path, resource_request=False)
        if not self.authorizer.allowed(user, attrs):
            raise errors.forbidden_path(user.name, verb, path)

    def _discovery(self, target: routing.Discovery) -> dict[str, Any]:
        registry = self.cluster.registry
        if target.group is None:
            return registry.api_group_list()
        if target.group == "" and target.version is None:
            return registry.api_versions()
        if target.version is None:
            return {"kind": "APIGroup", "apiVersion": "v1", **registry.api_group(target.group)}
        return registry.resource_list(target.group, target.version)

    async def _resource(self, request: web.Request, user: UserInfo, target: routing.Target) -> web.StreamResponse:
        rt = target.rt
        q = request.query
        method = request.method
        # an object's own path ignores ?watch=true (a real server answers a GET); /watch/ paths always watch
        watch = target.watch_path or (q.get("watch", "").lower() in ("true", "1") and not target.name)
        if method == "GET":
            verb = "watch" if watch else ("get" if target.name else "list")
        elif target.watch_path:
            raise errors.method_not_allowed()
        elif method == "POST":
            verb = "create"
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if target.name else "deletecollection"
        else:
            raise errors.method_not_allowed()
        dry_run = _dry_run(q.getall("dryRun", []))
        namespace = target.namespace or ""
        request[INFO_KEY].update(verb=verb, group=rt.group, resource=rt.plural, subresource=target.subresource,
                               namespace=namespace, name=target.name or "", dry_run=dry_run,
                               deprecation=rt.deprecation_warning)
        if target.subresource == "token":  # serviceaccounts/token: create only
            if verb != "create":
                raise errors.method_not_allowed()
            return await self._token_request(request, user, target)
        if verb not in rt.verbs and verb not in ("get", "patch", "update"):
            raise errors.method_not_allowed()
        if target.subresource and verb not in ("get", "patch", "update"):
            raise errors.method_not_allowed()
        if target.subresource == "finalize" and verb != "update":  # namespaces/finalize: PUT only
            raise errors.method_not_allowed()
        if (verb == "create" and target.name) or (verb in ("update", "patch") and not target.name):
            raise errors.method_not_allowed()
        if rt.namespaced and target.namespace is None and verb not in ("list", "watch"):
            raise errors.method_not_allowed()
        if self.options.rbac or user.anonymous:
            attrs = Attributes(verb, rt.group, rt.plural, target.subresource, namespace, target.name or "")
            if not self.authorizer.allowed(user, attrs):
                raise errors.forbidden(rt.plural, rt.group, target.name, forbidden_message(user, attrs))
        cluster = self.cluster
        manager = q.get("fieldManager") or _manager_from_agent(request.headers.get("User-Agent", ""))
        versioned = self.versioned if self.versioned.applies(rt) else None
        if verb == "get":
            stale = self._stale_version(user, rt.plural) if q.get("resourceVersion") == "0" else None
            if stale is not None:
                return await self._stale_get(rt, namespace, target.name or "", stale, versioned)
            if versioned is not None:
                return json_response(await versioned.get(rt, namespace, target.name or ""))
            return json_response(cluster.get(rt, namespace, target.name or ""))
        if verb in ("list", "watch", "deletecollection"):
            labels = parse_label_selector(q.get("labelSelector"))
            field_text = q.get("fieldSelector")
            if target.name:  # the deprecated /watch/ path to one object: a watch narrowed to that name
                field_text = ",".join(filter(None, [field_text, f"metadata.name={target.name}"]))
            fields = parse_field_selector(field_text, rt.kind, builtin=not rt.custom)
            if verb == "watch":
                timeout = float(_int(q.get("timeoutSeconds"), "timeoutSeconds") or self.options.watch_timeout)
                return await serve_watch(request, cluster.storage, WatchRequest(
                    rt=rt, namespace=target.namespace, resource_version=q.get("resourceVersion", ""),
                    timeout=timeout, bookmarks=q.get("allowWatchBookmarks", "").lower() == "true",
                    labels=labels, fields=fields,
                    send_initial_events=q.get("sendInitialEvents", "").lower() == "true",
                    bookmark_interval=self.options.bookmark_interval,
                    convert=versioned.watch_converter(rt) if versioned is not None else None,
                    user=user.name), client_faults=self.client_faults)
            limit = _int(q.get("limit"), "limit")
            exact = None
            if q.get("resourceVersionMatch") == "Exact" and verb == "list":
                exact = _int(q.get("resourceVersion"), "resourceVersion")
            elif q.get("resourceVersion") == "0" and verb == "list" and not q.get("continue"):
                exact = self._stale_version(user, rt.plural)
            listed = reads.list_objects(cluster, rt, target.namespace, labels=labels, fields=fields,
                                        limit=limit if limit else None, continue_token=q.get("continue"),
                                        exact_resource_version=exact)
            if verb == "list":
                return json_response(await versioned.list(rt, listed) if versioned is not None else listed)
            options = await self._delete_options(request)
            deleted = []
            for item in listed["items"]:
                ns = item["metadata"].get("namespace", "")
                if versioned is not None:
                    body, is_object = await versioned.delete(rt, ns, item["metadata"]["name"], options,
                                                             dry_run=dry_run)
                    deleted.append(body if is_object else (await versioned.out(rt, [item]))[0])
                    continue
                body, is_object = cluster.delete(rt, ns, item["metadata"]["name"], options, dry_run=dry_run)
                deleted.append(body if is_object else item)
            listed["items"] = deleted
            return json_response(listed)
        ctx = WriteContext(field_validation=_field_validation(q.get("fieldValidation")))
        if verb == "create":
            body = await self._json_body(request)
            if versioned is not None:
                created = await versioned.create(rt, namespace, body, dry_run=dry_run, manager=manager, ctx=ctx)
                return _with_warnings(json_response(created, 201), ctx)
            created = cluster.create(rt, namespace, body, dry_run=dry_run, manager=manager, ctx=ctx)
            return _with_warnings(json_response(created, 201), ctx)
        name = target.name or ""
        if verb == "update":
            body = await self._json_body(request)
            if versioned is not None:
                updated = await versioned.update(rt, namespace, name, body, subresource=target.subresource,
                                                 dry_run=dry_run, manager=manager, ctx=ctx)
                return _with_warnings(json_response(updated), ctx)
            updated = cluster.update(rt, namespace, name, body, subresource=target.subresource, dry_run=dry_run,
                                     manager=manager, ctx=ctx)
            return _with_warnings(json_response(updated), ctx)
        if verb == "patch":
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise errors.unsupported_media_type(request.content_type)
            raw = await request.read()
            patch = self._parse_yaml(raw) if patch_type == "apply" else _parse_json(raw)
            force = q.get("force", "").lower() == "true"
            if versioned is not None:
                patched, was_created = await versioned.patch(
                    rt, namespace, name, patch, patch_type=patch_type, subresource=target.subresource,
                    dry_run=dry_run, manager=q.get("fieldManager") if patch_type == "apply" else manager,
                    force=force, ctx=ctx)
                return _with_warnings(json_response(patched, 201 if was_created else 200), ctx)
            patched, was_created = cluster.patch(rt, namespace, name, patch, patch_type=patch_type,
                                                 subresource=target.subresource, dry_run=dry_run,
                                                 manager=q.get("fieldManager") if patch_type == "apply" else manager,
                                                 force=force, ctx=ctx)
            return _with_warnings(json_response(patched, 201 if was_created else 200), ctx)
        options = await self._delete_options(request)
        if not dry_run and options.get("dryRun"):
            # the real server honours DeleteOptions.dryRun in the body as well as the query parameter
            dry_run = _dry_run([str(v) for v in options["dryRun"]])
            request[INFO_KEY]["dry_run"] = dry_run
        self.faults.check_delete(rt.plural, namespace, name)
        if versioned is not None:
            body, _ = await versioned.delete(rt, namespace, name, options, dry_run=dry_run)
            return json_response(body)
        body, _ = cluster.delete(rt, namespace, name, options, dry_run=dry_run)
        return json_response(body)

    def _stale_version(self, user: UserInfo, resource: str) -> int | None:
        storage = self.cluster.storage
        return self.client_faults.stale_resource_version(user.name, resource, storage.resource_version,
                                                         storage.oldest_watchable)

    async def _stale_get(self, rt: ResourceType, namespace: str, name: str, rv: int,
                         versioned: VersionedRequests | None) -> web.StreamResponse:
        """A GET answered from a lagging watch cache: the object as it was at ``rv`` (clientfaults.py)."""
        listed = reads.list_objects(self.cluster, rt, namespace if rt.namespaced else None,
                                    labels=parse_label_selector(None),
                                    fields=parse_field_selector(f"metadata.name={name}", rt.kind,
                                                                builtin=not rt.custom),
                                    limit=None, continue_token=None, exact_resource_version=rv)
        if not listed["items"]:
            raise errors.not_found(rt.plural, rt.group, name)
        item = {"kind": rt.kind, **listed["items"][0]}  # list items of built-in kinds carry no kind
        if versioned is not None:
            item = (await versioned.out(rt, [item]))[0]
        return json_response(with_version(item, rt))

    async def _token_request(self, request: web.Request, user: UserInfo, target: routing.Target) -> web.Response:
        rt, namespace, name = target.rt, target.namespace or "", target.name or ""
        request[INFO_KEY].update(verb="create", name=name)
        if self.options.rbac or user.anonymous:
            attrs = Attributes("create", rt.group, rt.plural, "token", namespace, name)
            if not self.authorizer.allowed(user, attrs):
                raise errors.forbidden(rt.plural, rt.group, name, forbidden_message(user, attrs))
        body = await self._json_body(request)
        # as kube-apiserver v1.36: the body decoded, its name checked against the path, the ServiceAccount read
        # (404), then the request validated (422)
        self.tokens.check_name(body, name=name, namespace=namespace)
        service_account = self.cluster.get(rt, namespace, name)
        manager = request.query.get("fieldManager") or _manager_from_agent(request.headers.get("User-Agent", ""))
        answer = self.tokens.create(service_account, namespace, body, self.cluster.clock.now(), manager=manager)
        return json_response(answer, 201)

    async def _json_body(self, request: web.Request) -> Any:
        raw = await request.read()
        if request.content_type in ("application/yaml", "application/x-yaml"):
            return self._parse_yaml(raw)
        return _parse_json(raw)

    def _parse_yaml(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError:
            pass
        try:
            return self._yaml.load(raw.decode())
        except (YAMLError, UnicodeDecodeError) as err:
            raise errors.bad_request(f"error decoding YAML: {err}") from err

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        options: dict[str, Any] = {}
        if raw.strip():
            parsed = _parse_json(raw)
            if not isinstance(parsed, dict):
                raise errors.bad_request("DeleteOptions must be an object")
            options = parsed
        if "propagationPolicy" in request.query:
            options["propagationPolicy"] = request.query["propagationPolicy"]
        return options


def _field_validation(value: str | None) -> str:
    if value is None or value == "":
        return "Warn"
    if value not in ("Ignore", "Warn", "Strict"):
        raise errors.bad_request(f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", '
                                 f'"Strict", "Warn"')
    return value


def _with_warnings(response: web.Response, ctx: WriteContext) -> web.Response:
    for warning in ctx.warnings:
        response.headers.add("Warning", _warning_value(warning))
    return response


def _warning_value(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as err:
        raise errors.bad_request(f"the request body is not valid JSON: {err}") from err


def _int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError as err:
        raise errors.bad_request(f"invalid {name} parameter: {value!r}") from err
    if number < 0:
        raise errors.bad_request(f"invalid {name} parameter: {value!r}")
    return number


def _dry_run(values: list[str]) -> bool:
    for value in values:
        if value != "All":
            raise errors.invalid("CreateOptions", "meta.k8s.io", "", [errors.FieldError(
                "dryRun", "Unsupported value", 'supported values: "All"', value)])
    return bool(values)


def _manager_from_agent(agent: str) -> str:
    prefix = agent.split("/", 1)[0].strip()
    return prefix[:128] if prefix else "unknown"
