"""The pending plan of a Kustomization as ``diff`` and ``approve`` compute it, for the plan page.

``Planner.plan`` runs ``reconcile.preview.preview_kustomization`` — fetch, build, decrypt, substitute, the
apply engine's dry-run and prune's selection, writing nothing — with the options ``approve`` uses
(``as_applied``: planned as the apply plans, so the id is the one the controller computes) and the controller
flags the ``ui`` command was given. At most ``concurrency`` previews run at once (each may run the builder),
and each is bounded by ``time_limit`` seconds. Secret values in the diffs are masked by the preview itself
(``apply/preview.render_diff``); a created object shows no content at all.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kustomize_controller.api.changes import APPROVED_CONDITION
from kustomize_controller.api.kustomization import API_VERSION, KIND
from kustomize_controller.apply.preview import RECREATED, PreviewChange
from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kustomize.pipeline import BuildPipeline
from kustomize_controller.reconcile.gate.plan import Plan, plan_id_in
from kustomize_controller.reconcile.preview import Preview, PreviewError, PreviewOptions, preview_kustomization
from kustomize_controller.runtime.clock import Clock
from kustomize_controller.ui.model import DiffRow, condition, side_by_side

PLAN_TIME_LIMIT = 300.0
_ORDER = {"created": 0, "configured": 1, RECREATED: 2, "deleted": 3}


@dataclass(frozen=True)
class PlanEntry:
    change: PreviewChange
    rows: list[DiffRow]


@dataclass(frozen=True)
class PlanView:
    preview: Preview
    plan: Plan
    entries: list[PlanEntry]  # what would be written, created first, deleted last
    pending_id: str  # the plan the controller holds (its Approved condition), "" when none

    @property
    def outdated(self) -> bool:
        """The controller holds another plan than this one: the cluster or the source moved since it planned."""
        return bool(self.pending_id) and self.pending_id != self.plan.id


class Planner:
    def __init__(self, *, client: KubeClient, pipeline: BuildPipeline, clock: Clock, options: PreviewOptions,
                 concurrency: int = 2, time_limit: float = PLAN_TIME_LIMIT) -> None:
        self._client = client
        self._pipeline = pipeline
        self._clock = clock
        self._options = options
        self._gate = asyncio.Semaphore(concurrency)
        self._time_limit = time_limit

    async def plan(self, *, namespace: str, name: str) -> PlanView:
        """The plan a reconcile would write now; ``PreviewError`` when it cannot be computed."""
        async with self._gate:
            try:
                async with asyncio.timeout(self._time_limit):
                    preview = await preview_kustomization(client=self._client, pipeline=self._pipeline,
                                                          clock=self._clock, namespace=namespace, name=name,
                                                          options=self._options)
            except TimeoutError:
                raise PreviewError(f"Kustomization/{namespace}/{name}: the plan took longer than "
                                   f"{self._time_limit:.0f}s") from None
        ks = await self._client.get(API_VERSION, KIND, name, namespace)
        held = condition(ks, APPROVED_CONDITION)
        pending = plan_id_in(str(held.get("message") or "")) if held is not None and held.get("status") == "False" \
            else ""
        changed = sorted((c for c in preview.changes if c.changed), key=lambda c: (_ORDER.get(c.action, 9), str(c.ref)))
        entries = [PlanEntry(change=c, rows=side_by_side(c.diff) if c.diff else []) for c in changed]
        return PlanView(preview=preview, plan=preview.plan, entries=entries, pending_id=pending)
