"""Client-side throttling only where the API server has no flow control of its own.

A kube-apiserver with API Priority and Fairness (every release since 1.20, on by default) queues and
sheds load fairly by itself; a client-side token bucket in front of it only slows the client down
(measured: the 50 qps default made a cold start of 100 Kustomizations five times slower). client-go's
``flowcontrol.IsEnabled`` and fluxcd/pkg ``runtime/client`` decide as follows, and so do we:

- ``GET /livez/ping`` (cheap, exempt from flow control, no authorisation needed beyond the usual);
  an answer carrying ``X-Kubernetes-PF-FlowSchema-UID`` or ``X-Kubernetes-PF-PriorityLevel-UID``
  means APF is on → no client-side limiter (qps and burst −1);
- no such header, or no answer at all (the probe fails open to the flags: an unreachable server gets
  the conservative choice) → the ``--kube-api-qps``/``--kube-api-burst`` bucket, exactly as before.

``configure_throttling(client, qps=…, burst=…)`` probes and configures the client's bucket (shared by
every client derived from it: impersonated clients talk to the same server), records the choice in
``kustomize_controller_kube_client_throttling{host,mode}`` and returns it; the caller logs it.

``ThrottlingCache(qps=…, burst=…)`` remembers the decision per server URL for remote clusters
(``kubeConfig.secretRef``), where a client is built for every reconcile: the probe is paid once per server
and ``ttl`` seconds (10 minutes) when it was answered, and once per ``unanswered_ttl`` seconds (30 s) when it
was not: a reconcile of a Kustomization whose remote server is down then fails on its own first request,
as it would after the probe, instead of first waiting out the probe every time. Concurrent callers for
one server share one probe. The cache holds the flags' limits itself, so a decision is never reused under
other limits. The app owns one (``reconcile.tenancy.RemoteClients``), nothing else keeps it.

The probe has its own, shorter timeout (``PROBE_TIMEOUT``, 5 s): ``/livez/ping`` is answered without
touching storage, so a server that has not answered by then is treated as not answering.

Not promised: noticing that a server turned APF off while we run (no release can do that without a
restart; a remote server's decision is re-probed after ``ttl``). A remote server that comes back within
``unanswered_ttl`` is throttled by the flags until its decision expires (the conservative choice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from kustomize_controller.kube.clientconfig import ClientConfig
from kustomize_controller.kube.errors import KubeError
from kustomize_controller.kube.ratelimit import MonotonicClock, SystemClock, Throttling

FLOW_SCHEMA_UID_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
PING_PATH = "/livez/ping"
PROBE_TIMEOUT = 5.0  # seconds; ordinary requests have 30



class ProbedClient(Protocol):
    """What the probe needs of a client (``kube.client.KubeClient`` is one). Structural, so that the
    client, which takes the decision, does not have to be known here: the decision is injected into it
    through ``set_throttling``."""

    @property
    def config(self) -> ClientConfig: ...

    async def probe(self, path: str, *, request_timeout: float) -> tuple[int, Mapping[str, str]]: ...

    def set_throttling(self, throttling: Throttling) -> None: ...


async def priority_and_fairness_enabled(client: ProbedClient) -> bool:
    """Whether the server answers ``/livez/ping`` with a flow-control header (``KubeError`` when it
    gives no usable answer)."""
    # the status does not matter: a server that refuses the ping (403 on a locked-down cluster) has
    # still classified it, and says so in the headers
    _status, headers = await client.probe(PING_PATH, request_timeout=PROBE_TIMEOUT)
    # header names are case-insensitive, and Go's net/http sends them canonicalised
    # (``X-Kubernetes-Pf-Flowschema-Uid``), not as the constants spell them
    present = {name.lower() for name, value in headers.items() if value}
    return any(name.lower() in present for name in (FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER))


def decide(*, apf: bool, qps: float, burst: int, probe_error: str = "") -> Throttling:
    if apf:
        return Throttling(mode="priority-and-fairness", qps=-1, burst=-1)
    if qps < 0 or burst < 0:
        return Throttling(mode="none", qps=-1, burst=-1, probe_error=probe_error)
    return Throttling(mode="client-side", qps=qps, burst=burst, probe_error=probe_error)


async def detect(client: ProbedClient, *, qps: float, burst: int) -> Throttling:
    """Probe the server of ``client`` and decide (no side effect on the client)."""
    try:
        apf = await priority_and_fairness_enabled(client)
    except KubeError as err:
        return decide(apf=False, qps=qps, burst=burst, probe_error=str(err))
    return decide(apf=apf, qps=qps, burst=burst)


async def configure_throttling(client: ProbedClient, *, qps: float, burst: int) -> Throttling:
    """Probe, then set the client's (shared) bucket accordingly; see the module contract."""
    throttling = await detect(client, qps=qps, burst=burst)
    client.set_throttling(throttling)
    return throttling


class ThrottlingCache:
    """Decisions per server URL under the flags ``qps``/``burst`` (remote clusters; see the module contract)."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        ttl: float = 600.0,
        unanswered_ttl: float = 30.0,
        clock: MonotonicClock | None = None,
        max_entries: int = 1000,
    ) -> None:
        self.qps = qps
        self.burst = burst
        self._ttl = ttl
        self._unanswered_ttl = unanswered_ttl
        self._clock: MonotonicClock = clock or SystemClock()
        self._max = max(1, max_entries)
        self._entries: dict[str, tuple[float, Throttling]] = {}  # server → (expiry, decision)
        # server → (lock, callers waiting for or holding it); an entry lives only while someone is in configure
        self._probing: dict[str, tuple[asyncio.Lock, int]] = {}

    def _fresh(self, key: str) -> Throttling | None:
        cached = self._entries.get(key)
        if cached is None or self._clock.monotonic() >= cached[0]:
            return None
        return cached[1]

    def _remember(self, key: str, throttling: Throttling) -> None:
        self._entries.pop(key, None)
        if len(self._entries) >= self._max:
            self._entries.pop(next(iter(self._entries)))  # the oldest decision
        ttl = self._unanswered_ttl if throttling.probe_error else self._ttl
        self._entries[key] = (self._clock.monotonic() + ttl, throttling)

    async def configure(self, client: ProbedClient) -> tuple[Throttling, bool]:
        """Configure ``client`` for its server; the flag says whether the server was probed just now."""
        key = client.config.server
        lock, users = self._probing.get(key) or (asyncio.Lock(), 0)
        self._probing[key] = (lock, users + 1)
        try:
            async with lock:  # one probe per server at a time; the others take its decision
                cached = self._fresh(key)
                if cached is not None:
                    client.set_throttling(cached)
                    return cached, False
                throttling = await configure_throttling(client, qps=self.qps, burst=self.burst)
                self._remember(key, throttling)
                return throttling, True
        finally:
            lock, users = self._probing[key]
            if users == 1:
                del self._probing[key]
            else:
                self._probing[key] = (lock, users - 1)


__all__ = [
    "FLOW_SCHEMA_UID_HEADER",
    "PRIORITY_LEVEL_UID_HEADER",
    "PROBE_TIMEOUT",
    "ProbedClient",
    "Throttling",
    "ThrottlingCache",
    "configure_throttling",
    "decide",
    "detect",
    "priority_and_fairness_enabled",
]
