"""One side of a comparison: a kustomize-controller (ours, or Flux's own) and the namespace it watches,
with the Flux objects a user writes there and the ``flux`` CLI pointed at it.

Both sides of a test get the same objects (same names, same sources: one Git repository, one OCI
repository), so what the CLI prints, the events and the notifications differ only in the namespace, times
and UIDs; ``compare`` says where they differ beyond that.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.errors import NotFoundError
from tests.flux.cli import FluxCli, FluxResult, normalise

from ..harness import eventually

KS_API = "kustomize.toolkit.fluxcd.io/v1"
SOURCE_API = "source.toolkit.fluxcd.io/v1"
NOTIFICATION_API = "notification.toolkit.fluxcd.io/v1beta3"
RECEIVER_API = "notification.toolkit.fluxcd.io/v1"


def condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    status = obj.get("status") or {}
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def ready_status(obj: Mapping[str, Any]) -> str | None:
    ready = condition(obj, "Ready")
    return ready.get("status") if ready else None


@dataclass
class Side:
    """A kustomize-controller's namespace, as a user works with it (module contract)."""

    label: str  # "ours" or "upstream"
    namespace: str
    kube: KubeClient
    flux: FluxCli

    # --------------------------------------------------------------------------------- objects

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        body = {**obj, "metadata": {"namespace": self.namespace, **obj["metadata"]}}
        return await self.kube.create(body)

    async def git_repository(self, name: str, url: str, *, branch: str = "main",
                             interval: str = "1h") -> dict[str, Any]:
        return await self.create({"apiVersion": SOURCE_API, "kind": "GitRepository", "metadata": {"name": name},
                                  "spec": {"url": url, "interval": interval, "ref": {"branch": branch}}})

    async def oci_repository(self, name: str, url: str, *, tag: str = "latest",
                             interval: str = "1h") -> dict[str, Any]:
        return await self.create({"apiVersion": SOURCE_API, "kind": "OCIRepository", "metadata": {"name": name},
                                  "spec": {"url": url, "interval": interval, "ref": {"tag": tag},
                                           "insecure": True}})

    async def kustomization(self, name: str, *, source_kind: str = "GitRepository", source: str = "app",
                            interval: str = "1h", annotations: Mapping[str, str] | None = None,
                            **spec: Any) -> dict[str, Any]:
        """A Kustomization applying into its own namespace, pruning, on ``source_kind/source``."""
        body = {"interval": interval, "path": "./", "prune": True, "timeout": "1m",
                "targetNamespace": self.namespace, "sourceRef": {"kind": source_kind, "name": source}, **spec}
        metadata: dict[str, Any] = {"name": name}
        if annotations:
            metadata["annotations"] = dict(annotations)
        return await self.create({"apiVersion": KS_API, "kind": "Kustomization", "metadata": metadata,
                                  "spec": body})

    async def alert(self, address: str, *, name: str = "sink") -> None:
        """A generic-webhook Provider posting to ``address`` and an Alert for every Kustomization here."""
        await self.create({"apiVersion": NOTIFICATION_API, "kind": "Provider", "metadata": {"name": name},
                           "spec": {"type": "generic", "address": address}})
        await self.create({"apiVersion": NOTIFICATION_API, "kind": "Alert", "metadata": {"name": name},
                           "spec": {"providerRef": {"name": name}, "eventSeverity": "info",
                                    "eventSources": [{"kind": "Kustomization", "name": "*"}]}})

    async def get(self, api_version: str, kind: str, name: str) -> dict[str, Any]:
        return await self.kube.get(api_version, kind, name, self.namespace)

    async def ks(self, name: str = "app") -> dict[str, Any]:
        return await self.get(KS_API, "Kustomization", name)

    async def exists(self, api_version: str, kind: str, name: str) -> bool:
        try:
            await self.get(api_version, kind, name)
        except NotFoundError:
            return False
        return True

    async def request_reconcile(self, api_version: str, kind: str, name: str) -> str:
        """What ``flux reconcile`` and a Receiver do: a new ``reconcile.fluxcd.io/requestedAt`` token."""
        token = datetime.now(UTC).isoformat()
        await self.kube.patch(api_version, kind, name, self.namespace,
                              {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}},
                              patch_type="merge")
        return token

    # ----------------------------------------------------------------------------------- waits

    async def wait_artifact(self, kind: str, name: str, *, revision: str | None = None, other_than: str = "",
                            within: float = 120.0) -> dict[str, Any]:
        """Until source ``kind/name`` is Ready with an artifact (of ``revision`` when given, of another
        revision than ``other_than`` when given)."""

        def stored(obj: dict[str, Any]) -> bool:
            artifact = (obj.get("status") or {}).get("artifact") or {}
            return ready_status(obj) == "True" and bool(artifact) and (
                revision is None or artifact.get("revision") == revision) and (
                artifact.get("revision") != other_than)

        return await eventually(lambda: self.get(SOURCE_API, kind, name), stored, within=within, every=0.2,
                                what=f"{kind}/{self.namespace}/{name} artifact {revision or ''}")

    async def wait_applied(self, revision: str, *, name: str = "app", within: float = 120.0) -> dict[str, Any]:
        def applied(obj: dict[str, Any]) -> bool:
            status = obj.get("status") or {}
            return status.get("lastAppliedRevision") == revision and ready_status(obj) == "True"

        return await eventually(lambda: self.ks(name), applied, within=within, every=0.2,
                                what=f"Kustomization/{self.namespace}/{name} ({self.label}) applied {revision}")

    async def wait_failed(self, revision: str, *, name: str = "app", within: float = 120.0) -> dict[str, Any]:
        def failed(obj: dict[str, Any]) -> bool:
            status = obj.get("status") or {}
            return status.get("lastAttemptedRevision") == revision and ready_status(obj) == "False"

        return await eventually(lambda: self.ks(name), failed, within=within, every=0.2,
                                what=f"Kustomization/{self.namespace}/{name} ({self.label}) failed {revision}")

    # ------------------------------------------------------------------------------------- CLI

    async def cli(self, *args: str, within: float = 180.0) -> FluxResult:
        """``flux ARGS -n <namespace>``."""
        return await self.flux(*args, "-n", self.namespace, within=within)


@dataclass
class Pair:
    """Our controller's side and upstream's, driven alike."""

    ours: Side
    upstream: Side

    @property
    def sides(self) -> tuple[Side, Side]:
        return (self.ours, self.upstream)

    @property
    def names(self) -> dict[str, str]:
        return {self.ours.namespace: "<ns>", self.upstream.namespace: "<ns>"}

    async def each(self, step: Any) -> tuple[Any, Any]:
        """Run ``step(side)`` on both sides at once."""
        ours, upstream = await asyncio.gather(step(self.ours), step(self.upstream))
        return ours, upstream

    async def cli(self, *args: str, within: float = 180.0, sequential: bool = False) -> tuple[FluxResult, FluxResult]:
        """``flux ARGS`` against both sides, at once unless ``sequential`` (``build`` and ``diff`` write a
        generated kustomization.yaml into ``--path`` while they run: two at once on one checkout clash)."""
        if sequential:
            return (await self.ours.cli(*args, within=within), await self.upstream.cli(*args, within=within))
        return await self.each(lambda side: side.cli(*args, within=within))

    def compare(self, ours: FluxResult, upstream: FluxResult, **kwargs: Any) -> str:
        """``ours`` normalised; fails listing both when it differs from ``upstream`` normalised (exit code,
        stdout and stderr)."""
        mine = render(ours, self.names, **kwargs)
        theirs = render(upstream, self.names, **kwargs)
        assert mine == theirs, f"`flux {' '.join(ours.argv[1:3])}` differs from upstream's:\n" \
            f"=== ours ===\n{mine}\n=== upstream ===\n{theirs}"
        return mine

    async def same(self, *args: str, within: float = 180.0, sequential: bool = False, **kwargs: Any) -> str:
        """Run ``flux ARGS`` against both; they must print the same (normalised); returns ours."""
        ours, upstream = await self.cli(*args, within=within, sequential=sequential)
        return self.compare(ours, upstream, **kwargs)


def render(result: FluxResult, names: Mapping[str, str], *, mask: re.Pattern[str] | None = None,
           **kwargs: Any) -> str:
    """The exit code and output, normalised; what ``mask`` matches becomes ``<masked>``."""
    text = normalise(f"exit {result.exit_code}\n--- stdout ---\n{result.stdout}--- stderr ---\n{result.stderr}",
                     names, **kwargs)
    return mask.sub("<masked>", text) if mask is not None else text


def payload_view(body: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """An event payload with what differs by design masked: namespace, uid, resourceVersion, timestamp,
    durations in the message."""
    view = json.loads(normalise(json.dumps(body, sort_keys=True), names, collapse_space=False))
    involved = view.get("involvedObject") or {}
    for key in ("uid", "resourceVersion"):
        if key in involved:
            involved[key] = f"<{key}>"
    return dict(view)
