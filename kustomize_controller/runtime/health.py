"""Health probes in controller-runtime's ``pkg/healthz`` format, served on ``--health-addr``.

Contract:
- ``/healthz`` (liveness) and ``/readyz`` (readiness) run every named check of their set, sorted by
  name. All pass → 200 ``ok``; any fails → 500 with ``[+]name ok`` / ``[-]name failed: reason
  withheld`` lines then ``healthz check failed``. ``?verbose`` lists the checks on success too,
  ending with ``healthz check passed``; ``?exclude=name`` skips a check (``[+]name excluded: ok``).
  ``/healthz/<name>`` runs one check: 200 ``ok``, or 500 ``internal server error: <reason>``
  (404 for an unknown name). With no checks registered, an implicit ``ping`` is used.
- Responses are ``text/plain; charset=utf-8`` with ``X-Content-Type-Options: nosniff``.
- A check is a callable returning ``None`` (healthy) or raising; it may be async. In the aggregated
  view the reason is logged, never shown ("withheld", as upstream).

Not promised: the per-check timeouts of newer controller-runtime versions.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection

from aiohttp import web

from kustomize_controller.runtime.logs import get_logger

Check = Callable[[], Awaitable[None] | None]

_HEADERS = {"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"}


def ping() -> None:
    return None


class CheckSet:
    def __init__(self, name: str) -> None:
        self.name = name
        self._checks: dict[str, Check] = {}
        self._log = get_logger("healthz", endpoint=name)

    def add(self, name: str, check: Check) -> None:
        if name in self._checks:
            raise ValueError(f"{self.name}: check {name!r} already registered")
        self._checks[name] = check

    def checks(self) -> dict[str, Check]:
        return dict(self._checks) if self._checks else {"ping": ping}

    async def run_one(self, check: Check) -> str | None:
        """``None`` when healthy, else the failure reason."""
        try:
            result = check()
            if inspect.isawaitable(result):
                await result
        except Exception as err:
            return str(err) or type(err).__name__
        return None

    async def evaluate(self, *, exclude: Collection[str] = (), verbose: bool = False) -> tuple[bool, str]:
        """Run the checks: ``(healthy, body)`` in controller-runtime's text format."""
        unknown = set(exclude)
        lines: list[str] = []
        failed = False
        for name, check in sorted(self.checks().items()):
            if name in unknown:
                unknown.discard(name)
                lines.append(f"[+]{name} excluded: ok")
                continue
            reason = await self.run_one(check)
            if reason is None:
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: reason withheld")
                self._log.info(f"{self.name} check failed", check=name, reason=reason)
        if not failed and not verbose:
            return True, "ok"
        if unknown:
            quoted = ",".join(f'"{n}"' for n in sorted(unknown))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        lines.append("healthz check failed" if failed else "healthz check passed")
        return not failed, "\n".join(lines) + "\n"

    async def handle(self, request: web.Request) -> web.Response:
        healthy, body = await self.evaluate(
            exclude=request.query.getall("exclude", []), verbose="verbose" in request.query
        )
        return web.Response(status=200 if healthy else 500, body=body.encode(), headers=_HEADERS)

    async def handle_one(self, request: web.Request) -> web.Response:
        name = request.match_info["check"]
        check = self.checks().get(name)
        if check is None:
            return web.Response(status=404, body=b"404 page not found\n", headers=_HEADERS)
        reason = await self.run_one(check)
        if reason is not None:
            self._log.info(f"{self.name} check failed", check=name, reason=reason)
            body = f"internal server error: {reason}\n".encode()
            return web.Response(status=500, body=body, headers=_HEADERS)
        return web.Response(status=200, body=b"ok", headers=_HEADERS)


class Probes:
    """The ``/healthz`` and ``/readyz`` check sets and their aiohttp routes."""

    def __init__(self) -> None:
        self.healthz = CheckSet("healthz")
        self.readyz = CheckSet("readyz")

    def add_healthz_check(self, name: str, check: Check) -> None:
        self.healthz.add(name, check)

    def add_readyz_check(self, name: str, check: Check) -> None:
        self.readyz.add(name, check)

    def app(self) -> web.Application:
        app = web.Application()
        for path, checks in (("/healthz", self.healthz), ("/readyz", self.readyz)):
            app.router.add_get(path, checks.handle)
            app.router.add_get(path + "/", checks.handle)
            app.router.add_get(path + "/{check}", checks.handle_one)
        return app
