"""Fleet-wide sync windows: the ConfigMap named by ``--sync-windows-configmap=NAMESPACE/NAME``.

Its ``data.windows`` holds a YAML or JSON list of windows (``windows.py``) that may also carry
selectors — ``namespaces`` and ``names`` (lists of shell globs: ``prod-*``) and ``selector`` (a label
selector, ``tier=prod,team in (a,b)``, matched against the Kustomization's labels). A window applies to
a Kustomization when every selector it sets matches; a window without selectors applies to all.

Contract:
- The ConfigMap is read with the controller's own client at most once per ``ttl`` seconds (10 s by
  the clock), shared by every reconcile; a change takes effect on the next read.
- No ConfigMap, or no ``windows`` key: no fleet windows (deleting the ConfigMap lifts them).
- An invalid list, or a read that fails (forbidden, timeout): ``InvalidSyncWindowError`` naming the
  ConfigMap, for every Kustomization — fail closed, since a broken freeze must not let changes
  through unnoticed (``decision.py`` holds the changes and says why).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import KubeError, NotFoundError
from kustomize_controller.reconcile.gate.windows import InvalidSyncWindowError, SyncWindow, parse_windows
from kustomize_controller.runtime.clock import Clock

DATA_KEY = "windows"


def parse_configmap_ref(value: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` of the flag; ``ValueError`` otherwise."""
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"--sync-windows-configmap {value!r}: expected NAMESPACE/NAME")
    return namespace, name


class FleetWindows:
    """The fleet windows, cached for ``ttl`` seconds (module contract)."""

    def __init__(self, *, client: KubeClient, clock: Clock, namespace: str, name: str, ttl: float = 10.0) -> None:
        self._client = client
        self._clock = clock
        self._namespace, self._name = namespace, name
        self._ttl = ttl
        self._lock = asyncio.Lock()
        self._read_at: float | None = None
        self._windows: list[SyncWindow] = []
        self._error = ""

    @property
    def source(self) -> str:
        return f"ConfigMap {self._namespace}/{self._name}"

    async def windows_for(self, *, namespace: str, name: str, labels: Mapping[str, str]) -> list[SyncWindow]:
        """The fleet windows that select ``namespace/name``; raises ``InvalidSyncWindowError``."""
        async with self._lock:
            now = self._clock.monotonic()
            if self._read_at is None or now - self._read_at >= self._ttl:
                await self._read()
                self._read_at = now
        if self._error:
            raise InvalidSyncWindowError(self._error)
        return [w for w in self._windows if w.selects(namespace=namespace, name=name, labels=labels)]

    async def _read(self) -> None:
        self._windows, self._error = [], ""
        try:
            cm = await self._client.get("v1", "ConfigMap", self._name, self._namespace)
        except NotFoundError:
            return
        except KubeError as err:
            self._error = f"cannot read the sync windows of {self.source}: {err}"
            return
        text = (cm.get("data") or {}).get(DATA_KEY)
        if text is None:
            return
        try:
            self._windows = parse_windows(str(text), source=f"{self.source} data.{DATA_KEY}", fleet=True)
        except InvalidSyncWindowError as err:
            self._error = str(err)
