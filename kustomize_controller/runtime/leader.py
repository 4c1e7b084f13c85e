"""Leader election on a ``coordination.k8s.io/v1`` Lease, client-go's algorithm.

``try_acquire_or_renew()`` (one step of the state machine):
1. Fast path: while we lead and our observed lease has not expired, update it with ``renewTime=now``
   (acquireTime and leaseTransitions kept). On failure fall through.
2. GET the lease; if it does not exist, CREATE it with us as holder.
3. When the lease's spec differs from the one last seen, remember it with ``observed_at = local
   monotonic now``. Expiry is ``observed_at + leaseDurationSeconds`` on the *local* clock, never the
   lease's renewTime, so clock skew between candidates does not matter.
4. Held by someone else and not expired → fail.
5. UPDATE with us as holder (compare-and-swap on resourceVersion): renewTime=now; if we already held it,
   acquireTime and leaseTransitions are kept, otherwise acquireTime=now and leaseTransitions+1.
   A conflict means another candidate won.

Loops: ``acquire()`` tries every ``retry_period`` (jittered ×1.2) until it wins, and at once whenever
its watch of the Lease (one object, by name) sees it released (holder ``""``) or deleted: a stand-by
takes over right after a graceful stop instead of up to a retry period later (client-go polls only).
The watch is an accelerator: when it fails (no ``watch`` permission, an API server away) it is retried
every ``retry_period`` and the polling goes on as before. ``hold()`` renews
every ``retry_period`` and raises ``LeaderElectionLost`` (the manager then cancels every reconcile and
exits the process with status 1 at once, like Flux) as soon as it knows it no longer leads:
- no renewal succeeded within ``renew_deadline`` of the start of the last one that did — an attempt
  still running at that moment (a hung request, a ``Retry-After``) is cancelled then, not awaited;
- an attempt found the lease held by someone else (it was taken over: we cannot get it back before it
  expires, and the other may already be reconciling) — at once, not at the deadline.
``release()`` (on a normal stop, ``release_on_cancel``) writes holder ``""``, leaseDurationSeconds 1,
renewTime=acquireTime=now, transitions unchanged, retrying conflicts until ``renew_deadline``.

Every lease request has its own timeout, max(renew_deadline/2, 1 s), and its ``Retry-After`` waits
end within that time too (``KubeClient.with_timeout``). ``leader_election_master_status{name}`` is 1
while leading, else 0.

Fencing, as far as a Lease gives it: a candidate starts leading only once the lease it last saw has gone
unchanged for ``lease_duration`` on its own clock — also when the Lease was deleted meanwhile (someone ran
``kubectl delete lease``): it does not create a new one while the holder it saw may still be working (the
holder itself re-creates it at its next renewal). The holder gives up at the latest ``renew_deadline``
after the start of its last successful renewal, which the candidate saw no earlier, so with
``lease_duration > renew_deadline`` the old leader has stopped issuing requests ``lease_duration −
renew_deadline`` before the new one may start (with Flux's defaults, 5 s), provided both processes' clocks
run at the same rate and neither is paused (a stopped VM, a debugger) for that long. Not promised: a
request the old leader had already sent cannot be recalled; it lands when the API server serves it, which
is before the new leader starts unless it was held longer than that margin. The new leader applies
everything again on its first reconcile, so such a write is undone by it only if it landed before.
Not promised either: coordinated leader election (``strategy``/``preferredHolder``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import ConflictError, KubeError, NotFoundError
from kustomize_controller.runtime.clock import Clock, sleep_unless, within
from kustomize_controller.runtime.logs import get_logger
from kustomize_controller.runtime.metrics import RuntimeMetrics

LEASE_API_VERSION = "coordination.k8s.io/v1"
JITTER_FACTOR = 1.2


class LeaderElectionLost(Exception):
    """The lease could not be renewed within the renew deadline: the process must exit with status 1."""


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def format_micro_time(t: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with microseconds, UTC, ``Z`` suffix."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 35.0
    renew_deadline: float = 30.0
    retry_period: float = 5.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("leader election: lease duration must be greater than the renew deadline")
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError(f"leader election: renew deadline must be greater than {JITTER_FACTOR} × retry period")
        if not self.identity:
            raise ValueError("leader election: identity must not be empty")

    @property
    def request_timeout(self) -> float:
        return max(self.renew_deadline / 2, 1.0)


def _spec_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions")
    return {k: spec.get(k) for k in keys}


class LeaderElector:
    def __init__(
        self,
        *,
        client: KubeClient,
        config: LeaderElectionConfig,
        clock: Clock,
        metrics: RuntimeMetrics | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._client = client.with_timeout(config.request_timeout)
        self._watch_client = client  # a watch is a long request: the lease requests' timeout is not for it
        self._clock = clock
        self._rng = rng or random.Random()
        self._observed: dict[str, Any] | None = None  # spec fields of the lease as last seen
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None  # the full last-seen object (for its resourceVersion)
        self._renewed_at = 0.0  # when the last successful acquire or renewal started (local monotonic)
        self._status = metrics.leader_election_master_status.labels(name=config.name) if metrics else None
        if self._status is not None:
            self._status.set(0)
        self._log = get_logger("leader-election", lease=f"{config.namespace}/{config.name}")

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def observed_holder(self) -> str:
        return str((self._observed or {}).get("holderIdentity") or "")

    @property
    def observed_transitions(self) -> int:
        return int((self._observed or {}).get("leaseTransitions") or 0)

    def is_leader(self) -> bool:
        return self.observed_holder == self.config.identity

    def _observed_valid(self) -> bool:
        duration = float((self._observed or {}).get("leaseDurationSeconds") or 0)
        return self._observed_at + duration > self._clock.monotonic()

    def _set_observed(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        spec = _spec_fields(lease.get("spec") or {})
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self._clock.monotonic()

    def _set_status(self, leading: bool) -> None:
        if self._status is not None:
            self._status.set(1 if leading else 0)

    def _lease_object(self, spec: Mapping[str, Any], *, resource_version: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": meta, "spec": dict(spec)}

    async def try_acquire_or_renew(self) -> bool:
        started = self._clock.monotonic()
        if await self._try_acquire_or_renew():
            self._renewed_at = started
            return True
        return False

    async def _try_acquire_or_renew(self) -> bool:
        now = format_micro_time(self._clock.now())
        duration = int(self.config.lease_duration)
        # 1. fast path
        if self.is_leader() and self._observed_valid() and self._lease is not None:
            spec = {**(self._observed or {}), "renewTime": now, "leaseDurationSeconds": duration}
            rv = str(self._lease["metadata"].get("resourceVersion") or "")
            try:
                updated = await self._client.update(self._lease_object(spec, resource_version=rv))
            except KubeError as err:
                self._log.debug("fast-path renew failed", error=str(err))
            else:
                self._set_observed(updated)
                return True
        # 2. get or create
        try:
            lease = await self._client.get(LEASE_API_VERSION, "Lease", self.config.name, self.config.namespace)
        except NotFoundError:
            holder = self.observed_holder
            if holder and holder != self.identity and self._observed_valid():
                # deleted while another held it: that leader may still be working until its lease, as we
                # saw it, expires (it re-creates the Lease at its next renewal); fencing, module docstring
                self._log.debug("lease deleted while held by another candidate; waiting for its expiry",
                                holder=holder)
                return False
            spec = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": duration,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            }
            try:
                created = await self._client.create(self._lease_object(spec, resource_version=None))
            except KubeError as err:
                self._log.info("error initially creating leader election record", error=str(err))
                return False
            self._set_observed(created)
            return True
        except KubeError as err:
            self._log.info("error retrieving resource lock", error=str(err))
            return False
        # 3. record what we saw
        self._set_observed(lease)
        observed = self._observed or {}
        holder = str(observed.get("holderIdentity") or "")
        # 4. someone else holds an unexpired lease
        if holder and holder != self.identity and self._observed_valid():
            return False
        # 5. take or keep it
        if holder == self.identity:
            acquire_time = observed.get("acquireTime") or now
            transitions = int(observed.get("leaseTransitions") or 0)
        else:
            acquire_time = now
            transitions = int(observed.get("leaseTransitions") or 0) + 1
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": duration,
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        try:
            updated = await self._client.update(self._lease_object(spec, resource_version=rv))
        except KubeError as err:
            self._log.info("failed to update lease", error=str(err))
            return False
        self._set_observed(updated)
        return True

    async def acquire(self) -> None:
        """Return once we lead. Cancellable."""
        self._log.info("attempting to acquire leader lease")
        released = asyncio.Event()
        watcher = asyncio.create_task(self._watch_release(released), name=f"lease-watch-{self.config.name}")
        try:
            while True:
                released.clear()  # a release seen during the attempt below still wakes the wait after it
                if await self.try_acquire_or_renew():
                    self._set_status(True)
                    self._log.info("successfully acquired lease", identity=self.identity)
                    return
                if self.observed_holder:
                    self._log.debug("lease is held by another candidate", holder=self.observed_holder)
                # a jittered retry period, cut short when the Lease is released
                await sleep_unless(self._clock,
                                   self.config.retry_period * (1 + self._rng.random() * (JITTER_FACTOR - 1)), released)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch_release(self, released: asyncio.Event) -> None:
        """Set ``released`` whenever the Lease is seen without a holder or deleted; runs until cancelled."""
        last_error = ""
        while True:
            try:
                events = self._watch_client.watch(
                    LEASE_API_VERSION, "Lease", self.config.namespace,
                    field_selector=f"metadata.name={self.config.name}", timeout_seconds=300, allow_bookmarks=False)
                async with contextlib.aclosing(events):
                    async for event in events:
                        spec = (event.get("object") or {}).get("spec") or {}
                        if event.get("type") == "DELETED" or (
                                event.get("type") in ("ADDED", "MODIFIED") and not spec.get("holderIdentity")):
                            released.set()
            except Exception as err:  # an accelerator only: whatever fails, the polling goes on
                if str(err) != last_error:
                    self._log.debug("lease watch failed; polling every retry period", error=str(err))
                last_error = str(err)
            await self._clock.sleep(self.config.retry_period)

    async def hold(self) -> None:
        """Renew while leading; raise ``LeaderElectionLost`` as soon as we know we no longer lead: the renew
        deadline passed since the last successful renewal started, or the lease is held by someone else."""
        lease = f"{self.config.namespace}/{self.config.name}"
        while True:
            await self._clock.sleep(self.config.retry_period)
            while True:
                deadline = self._renewed_at + self.config.renew_deadline
                if await self._renew_before(deadline):
                    break
                holder = self.observed_holder
                if holder and holder != self.identity:
                    self._set_status(False)
                    self._log.error("lease taken over by another candidate", holder=holder)
                    raise LeaderElectionLost(f"leader election lost: lease {lease} is held by {holder}")
                if self._clock.monotonic() + self.config.retry_period >= deadline:
                    self._set_status(False)
                    self._log.error("failed to renew lease", lease_duration=self.config.lease_duration)
                    raise LeaderElectionLost(
                        f"leader election lost: lease {lease} not renewed within {self.config.renew_deadline:g}s"
                    )
                await self._clock.sleep(self.config.retry_period)

    async def _renew_before(self, deadline: float) -> bool:
        """One renewal attempt, cancelled if it is still running at ``deadline`` (then False)."""
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            return False
        try:
            return await within(self._clock, remaining, self.try_acquire_or_renew())
        except TimeoutError:
            return False

    async def release(self) -> bool:
        """Give the lease up (holder cleared, duration 1 s) so another candidate takes over at once."""
        deadline = self._clock.monotonic() + self.config.renew_deadline
        while self.is_leader() and self._lease is not None:
            now = format_micro_time(self._clock.now())
            spec = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": self.observed_transitions,
            }
            rv = str(self._lease["metadata"].get("resourceVersion") or "")
            try:
                updated = await self._client.update(self._lease_object(spec, resource_version=rv))
            except KubeError as err:
                if self._clock.monotonic() >= deadline:
                    self._log.error("failed to release lease", error=str(err))
                    return False
                if not isinstance(err, ConflictError):
                    await self._clock.sleep(min(self.config.retry_period, 1.0))
                try:
                    self._set_observed(
                        await self._client.get(LEASE_API_VERSION, "Lease", self.config.name, self.config.namespace)
                    )
                except KubeError:
                    await self._clock.sleep(min(self.config.retry_period, 1.0))
                continue
            self._set_observed(updated)
            self._set_status(False)
            self._log.info("released leader lease")
            return True
        self._set_status(False)
        return False
