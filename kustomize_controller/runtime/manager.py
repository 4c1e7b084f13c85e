"""The manager: one owner for every long-lived task of the process.

Start order (controller-runtime's manager):
1. the ``/metrics`` server (``metrics_addr``) and the ``/healthz``+``/readyz`` server
   (``health_addr``); an address of ``"0"`` (or empty) disables a server;
2. informers and runnables that do not need leadership (the event recorder): caches may sync
   while this replica is a standby;
3. with leader election, ``acquire`` the Lease, then keep renewing it in a task;
4. controllers and leader-only runnables (workers start only when leading; each controller first
   waits for its caches, up to its cache-sync timeout).

Every task is created in one ``asyncio.TaskGroup``; nothing outlives ``run()``.

Stopping, and what ``run()`` returns:
- ``stop()`` (SIGTERM/SIGINT when ``handle_signals``): controllers stop taking work and cancel their
  in-flight reconciles at once (controller-runtime cancels the reconcile context), their cleanup gets
  at most ``graceful_shutdown_timeout`` seconds (then the controller tasks are cancelled), the lease
  is released (``release_on_cancel``), runnables with a ``flush`` (the event recorder) get up to 5 s to
  send what they hold, every other task is cancelled → ``0``. Informers keep running until the
  controllers are done, so nothing a reconcile still reads disappears under it.
  A second signal skips the grace period.
- Losing the lease (``LeaderElectionLost``) cancels everything at once, no drain, no release → ``1``:
  in-flight reconciles are cancelled at their current ``await`` and write nothing more (a request
  already sent cannot be recalled: ``leader.py`` on fencing), queued keys never start; the entry point
  exits the process with that status, as Flux does on "leader election lost".
- Any task failing (e.g. caches not synced in time) cancels everything → ``1``.
- Cancelling the task running ``run()`` tears everything down without releasing the lease (it is
  treated as a crash) and re-raises ``CancelledError``.

Readiness: ``/readyz`` has ``ping`` and ``informers`` (fails until every informer has synced);
``/healthz`` has ``ping``.

Not promised: restarting a failed controller; a per-controller leader election.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import prometheus_client
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.runtime.controller import Controller
from kustomize_controller.runtime.events import EventRecorder
from kustomize_controller.runtime.health import Probes, ping
from kustomize_controller.runtime.informer import Informer
from kustomize_controller.runtime.leader import LeaderElectionConfig, LeaderElectionLost, LeaderElector
from kustomize_controller.runtime.logs import get_logger
from kustomize_controller.runtime.metrics import RuntimeMetrics
from kustomize_controller.runtime.store import Obj

EXIT_OK = 0
EXIT_FAILURE = 1
FLUSH_TIMEOUT = 5.0


@dataclass(frozen=True)
class ManagerOptions:
    metrics_addr: str = ":8080"
    health_addr: str = ":9440"
    leader_election: LeaderElectionConfig | None = None
    graceful_shutdown_timeout: float = 30.0


@dataclass(frozen=True)
class _Runnable:
    name: str
    run: Callable[[], Awaitable[None]]
    needs_leader: bool
    flush: Callable[[], Awaitable[None]] | None = None


def parse_bind_address(addr: str) -> tuple[str, int] | None:
    """``":8080"`` → ``("0.0.0.0", 8080)``; ``"127.0.0.1:0"`` → ephemeral port; ``"0"``/``""`` → None."""
    if not addr or addr == "0":
        return None
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"invalid bind address {addr!r}, expected [host]:port")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class Manager:
    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        options: ManagerOptions | None = None,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.options = options or ManagerOptions()
        self.metrics = metrics or RuntimeMetrics(clock=clock, rest=client.rest_metrics)
        self.probes = Probes()
        self.probes.add_healthz_check("ping", ping)
        self.probes.add_readyz_check("ping", ping)
        self.probes.add_readyz_check("informers", self._informers_synced)
        self._informers: dict[tuple[Any, ...], Informer] = {}
        self._controllers: list[Controller] = []
        self._runnables: list[_Runnable] = []
        self.elector: LeaderElector | None = None
        if self.options.leader_election is not None:
            self.elector = LeaderElector(
                client=client, config=self.options.leader_election, clock=clock, metrics=self.metrics
            )
        self._stop_requested: asyncio.Event | None = None
        self._force_stop: asyncio.Event | None = None
        self._started = asyncio.Event()
        self._leading = False
        self.metrics_url: str | None = None
        self.health_url: str | None = None
        self._log = get_logger("manager")

    # ----------------------------------------------------------------------------------- assembly

    def informer(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> Informer:
        """The shared informer for these parameters (created once, started by ``run``; every informer
        must be requested before ``run()``)."""
        key = (api_version, kind, namespace, label_selector, field_selector, metadata_only, transform)
        informer = self._informers.get(key)
        if informer is None:
            if self._stop_requested is not None:
                raise RuntimeError(f"informer for {kind}.{api_version} requested after the manager started")
            informer = Informer(
                client=self.client,
                api_version=api_version,
                kind=kind,
                clock=self.clock,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                metadata_only=metadata_only,
                transform=transform,
            )
            self._informers[key] = informer
        return informer

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    @property
    def controllers(self) -> list[Controller]:
        return list(self._controllers)

    def add_controller(self, controller: Controller) -> None:
        self._controllers.append(controller)

    def add_runnable(
        self,
        name: str,
        run: Callable[[], Awaitable[None]],
        *,
        needs_leader: bool = False,
        flush: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Run ``run()`` for the life of the manager (after leadership when ``needs_leader``). On a
        graceful stop ``flush()``, if given, gets up to ``FLUSH_TIMEOUT`` seconds once the controllers
        are idle (e.g. to send the last queued events) before the task is cancelled."""
        self._runnables.append(_Runnable(name=name, run=run, needs_leader=needs_leader, flush=flush))

    def event_recorder(self, *, reporting_controller: str, reporting_instance: str = "") -> EventRecorder:
        """A core/v1 Event recorder whose sender task the manager owns."""
        recorder = EventRecorder(
            client=self.client,
            clock=self.clock,
            reporting_controller=reporting_controller,
            reporting_instance=reporting_instance
            or (self.options.leader_election.identity if self.options.leader_election else ""),
        )
        self.add_runnable("event-recorder", recorder.run, flush=recorder.flush)
        return recorder

    def _informers_synced(self) -> None:
        pending = [i.name for i in self._informers.values() if not i.has_synced()]
        if pending:
            raise RuntimeError("informers not synced: " + ", ".join(pending))

    @property
    def is_leader(self) -> bool:
        return self._leading

    async def wait_started(self) -> None:
        """Wait until the HTTP servers are bound (``metrics_url``/``health_url`` are set)."""
        await self._started.wait()

    # ----------------------------------------------------------------------------------------- stop

    def stop(self) -> None:
        """Request a graceful stop (a second request skips the grace period)."""
        if self._stop_requested is None or self._force_stop is None:
            return
        if self._stop_requested.is_set():
            self._force_stop.set()
        self._stop_requested.set()

    # ------------------------------------------------------------------------------------------ run

    async def run(self, *, handle_signals: bool = True) -> int:
        self._stop_requested = asyncio.Event()
        self._force_stop = asyncio.Event()
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        runners: list[web.AppRunner] = []
        code = EXIT_OK
        try:
            runners = await self._start_servers()
            self._started.set()
            async with asyncio.TaskGroup() as tg:
                await self._run_in(tg)
        except* LeaderElectionLost as group:
            self._log.error("leader election lost", error=str(group.exceptions[0]))
            code = EXIT_FAILURE
        except* Exception as group:
            for err in group.exceptions:
                self._log.error("problem running manager", error=str(err), exc_info=err)
            code = EXIT_FAILURE
        finally:
            self._leading = False
            for sig in signals:
                loop.remove_signal_handler(sig)
            for runner in runners:
                await runner.cleanup()
        return code

    def _on_signal(self, sig: signal.Signals) -> None:
        self._log.info("received signal, stopping", signal=sig.name)
        self.stop()

    async def _run_in(self, tg: asyncio.TaskGroup) -> None:
        assert self._stop_requested is not None and self._force_stop is not None
        background: list[asyncio.Task[None]] = []
        for informer in self._informers.values():
            background.append(tg.create_task(informer.run(), name=f"informer {informer.name}"))
        for r in self._runnables:
            if not r.needs_leader:
                background.append(tg.create_task(_as_coro(r.run), name=r.name))

        hold: asyncio.Task[None] | None = None
        if self.elector is not None:
            acquired = await self._until_stop(self.elector.acquire())
            if not acquired:
                _cancel_all(background)
                return
            hold = tg.create_task(self.elector.hold(), name="leader-election")
        self._leading = True

        workers: list[asyncio.Task[None]] = [
            tg.create_task(c.run(), name=f"controller {c.name}") for c in self._controllers
        ]
        workers += [tg.create_task(_as_coro(r.run), name=r.name) for r in self._runnables if r.needs_leader]
        await self._stop_requested.wait()

        self._log.info("Stopping and waiting for non leader election runnables")
        for c in self._controllers:
            c.stop()
        await self._drain(workers)
        if hold is not None:
            hold.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await hold
        election = self.options.leader_election
        if self.elector is not None and election is not None and election.release_on_cancel:
            await self.elector.release()
        self._leading = False
        await self._flush_runnables()
        _cancel_all(background)

    async def _flush_runnables(self) -> None:
        flushes: set[asyncio.Future[Any]] = {
            asyncio.ensure_future(_as_coro(r.flush)) for r in self._runnables if r.flush is not None
        }
        if not flushes:
            return
        timer = asyncio.ensure_future(self.clock.sleep(FLUSH_TIMEOUT))
        try:
            while flushes and not timer.done():
                done, _ = await asyncio.wait(flushes | {timer}, return_when=asyncio.FIRST_COMPLETED)
                for fut in done - {timer}:
                    if not fut.cancelled() and fut.exception() is not None:
                        self._log.error("flush failed", error=str(fut.exception()))
                flushes -= done
        finally:
            timer.cancel()
            for fut in flushes:
                fut.cancel()

    async def _until_stop(self, coro: Awaitable[None]) -> bool:
        """Run ``coro`` unless a stop comes first; True when it completed."""
        assert self._stop_requested is not None
        task = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self._stop_requested.wait())
        try:
            await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not task.done() or task.cancelled():
            return False
        task.result()  # an unexpected failure of ``coro`` fails the manager
        return True

    async def _drain(self, workers: list[asyncio.Task[None]]) -> None:
        """Wait for workers to finish their in-flight work, at most the grace period."""
        assert self._force_stop is not None
        pending = [w for w in workers if not w.done()]
        if pending:
            waiters: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(asyncio.wait(pending)),
                asyncio.ensure_future(self.clock.sleep(self.options.graceful_shutdown_timeout)),
                asyncio.ensure_future(self._force_stop.wait()),
            ]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
            late = [w for w in pending if not w.done()]
            if late:
                self._log.info("graceful shutdown period over, cancelling in-flight work", tasks=len(late))
        _cancel_all(workers)

    async def _start_servers(self) -> list[web.AppRunner]:
        runners: list[web.AppRunner] = []
        metrics_app = web.Application()
        metrics_app.router.add_get("/metrics", self._handle_metrics)
        for addr, app, attr in (
            (self.options.metrics_addr, metrics_app, "metrics_url"),
            (self.options.health_addr, self.probes.app(), "health_url"),
        ):
            bind = parse_bind_address(addr)
            if bind is None:
                continue
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            runners.append(runner)
            site = web.TCPSite(runner, bind[0], bind[1])
            try:
                await site.start()
            except OSError:
                for r in runners:
                    await r.cleanup()
                raise
            host, port = _bound(site, bind)
            setattr(self, attr, f"http://{host}:{port}")
            self._log.info("serving", endpoint=attr.removesuffix("_url"), address=f"{host}:{port}")
        return runners

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        # Rendered in a worker thread: with 1,000 Kustomizations the page is ~2.7 MB and takes a few
        # hundred ms of Python; on the event loop that would stall every reconcile and watch for as long.
        # prometheus_client's collectors lock their own state, so collecting off the loop is safe.
        # ``?name[]=x&name[]=y``: only those series (prometheus_client's filter), for cheap polling.
        names = request.query.getall("name[]", [])
        body = await asyncio.to_thread(self.metrics.exposition, names)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _bound(site: web.TCPSite, bind: tuple[str, int]) -> tuple[str, int]:
    server = site._server  # aiohttp keeps the asyncio server here; it is the only way to read an ephemeral port
    sockets = getattr(server, "sockets", None) or []
    for sock in sockets:
        name = sock.getsockname()
        return str(name[0]), int(name[1])
    return bind


def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        if not t.done():
            t.cancel()


async def _as_coro(fn: Callable[[], Awaitable[None]]) -> None:
    await fn()
