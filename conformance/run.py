"""The differential run: every case under upstream's controller and under ours, then the comparison."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kustomize_controller.kube.client import KubeClient
from kustomize_controller.kube.config import load_kubeconfig
from kustomize_controller.testing.artifacts import ArtifactServer
from tests.controlplane import ControlPlane, missing_assets
from tests.flux import assets as flux_assets

from . import compare, metrics
from .harness import (
    PROFILES,
    RUN_LABEL,
    SIDES,
    UPSTREAM,
    Case,
    Controller,
    Side,
    SideRecord,
    finish_case_side,
    parse_samples,
    run_case_side,
    start_controller,
)

KUBECONFIG_ENV = "CONFORMANCE_KUBECONFIG"


def why_skipped() -> str:
    """One line saying what is missing, ``""`` when the run can go."""
    lacking = flux_assets.missing([flux_assets.KUSTOMIZE_CONTROLLER], crds=True)
    if lacking:
        return f"no upstream kustomize-controller: {lacking}"
    if os.environ.get(KUBECONFIG_ENV):
        return ""
    no_plane = missing_assets(os.environ.get("KUBE_ASSETS"))
    if no_plane:
        return f"no cluster: {KUBECONFIG_ENV} is not set and {no_plane}"
    return ""


@contextlib.contextmanager
def cluster(logs: Path) -> Iterator[tuple[str, ControlPlane | None]]:
    """``CONFORMANCE_KUBECONFIG``, else a control plane of our own from ``KUBE_ASSETS``."""
    given = os.environ.get(KUBECONFIG_ENV)
    if given:
        yield given, None
        return
    plane = ControlPlane(assets=Path(os.environ["KUBE_ASSETS"]), audit=False)
    started = time.monotonic()
    plane.start()
    print(f"control plane up in {time.monotonic() - started:.1f}s at {plane.url}", file=sys.stderr, flush=True)
    try:
        yield str(plane.admin_kubeconfig), plane
    finally:
        plane.stop()


async def apply_crd(kube: KubeClient, path: Path, *, manager: str) -> None:
    """Server-side apply of the CRD in ``path`` (forced, as Flux applies its own), until Established."""
    import yaml

    crd = yaml.safe_load(await asyncio.to_thread(path.read_text))
    await kube.apply(crd, field_manager=manager, force=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        live = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
        if any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (live.get("status") or {}).get("conditions") or []):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"CustomResourceDefinition/{crd['metadata']['name']} not Established within 60s")


async def install_upstream_crds(kubeconfig: str) -> None:
    """Upstream's Kustomization CRD (v1 only) and the source CRDs, as a Flux install has them."""
    kube = KubeClient(config=await load_kubeconfig(kubeconfig))
    try:
        for path in flux_assets.crd_files("kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io"):
            await apply_crd(kube, path, manager="flux")
    finally:
        await kube.close()


@dataclass
class CaseResult:
    case: Case
    records: dict[str, SideRecord]
    cells: dict[str, compare.Cell] = field(default_factory=dict)

    @property
    def unexplained(self) -> list[str]:
        bad = [a for a, c in self.cells.items() if c.state == "unexplained"]
        if any(r.error for r in self.records.values()):
            bad.append("error")
        return bad


@dataclass
class RunResult:
    run_id: str
    cases: list[CaseResult]
    controller_metrics: dict[str, compare.Cell]
    seconds: float
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    profiles: dict[str, float] = field(default_factory=dict)

    @property
    def unexplained(self) -> int:
        return sum(len(c.unexplained) for c in self.cases) + sum(
            1 for c in self.controller_metrics.values() if c.state == "unexplained")


async def run_profile(profile_name: str, cases: Sequence[Case], *, kubeconfig: str, kube: KubeClient,
                      artifacts: ArtifactServer, run_id: str, logs: Path) -> tuple[list[CaseResult],
                                                                                   dict[str, list[Any]]]:
    profile = PROFILES[profile_name]
    binary = flux_assets.binary(flux_assets.KUSTOMIZE_CONTROLLER)
    controllers: dict[str, Controller] = {}
    runtime_ns = {}
    for side in SIDES:
        runtime_ns[side] = f"conformance-{profile_name}-{side[0]}{run_id}"
        await kube.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": runtime_ns[side], "labels": {RUN_LABEL: run_id}}})
    started = await asyncio.gather(*(start_controller(side, profile, kubeconfig=kubeconfig, upstream_binary=binary,
                                                      runtime_namespace=runtime_ns[side], logs=logs)
                                     for side in SIDES), return_exceptions=True)
    try:
        for side, ctl in zip(SIDES, started, strict=True):
            if isinstance(ctl, BaseException):
                raise ctl
            controllers[side] = ctl
        sides = [[Side(case=case, side=side, run_id=run_id, kube=kube, artifacts=artifacts,
                       controller=controllers[side]) for side in SIDES] for case in cases]
        # timing cases last, on controllers with nothing else to do: their clocks are then punctual
        for timing in (False, True):
            await asyncio.gather(*(run_case_side(s) for pair in sides for s in pair if s.case.timing is timing))
        await asyncio.sleep(3.0)  # events sent at the end of the last reconciles
        await asyncio.gather(*(finish_case_side(s) for pair in sides for s in pair))
        pages = {}
        for side, ctl in controllers.items():
            pages[side] = parse_samples(await metrics.scrape(ctl.metrics_url))
        return [CaseResult(case, {s.side: s.record for s in pair}) for case, pair in zip(cases, sides, strict=True)], \
            pages
    finally:
        for side, ctl in controllers.items():
            code = await ctl.stop()
            if code not in (0, None):
                print(f"{side} controller ({profile_name}) exited with {code}", file=sys.stderr)


async def run_corpus(cases: Sequence[Case], *, kubeconfig: str, logs: Path) -> RunResult:
    from .known import KNOWN

    run_id = secrets.token_hex(2)
    started = time.monotonic()
    kube = KubeClient(config=await load_kubeconfig(kubeconfig))
    results: list[CaseResult] = []
    pages: dict[str, dict[str, list[Any]]] = {}
    profile_seconds = {}
    try:
        async with ArtifactServer() as artifacts:
            for profile_name in PROFILES:
                selected = [c for c in cases if c.profile == profile_name]
                if not selected:
                    continue
                t0 = time.monotonic()
                print(f"profile {profile_name}: {len(selected)} cases", file=sys.stderr, flush=True)
                done, pages[profile_name] = await run_profile(profile_name, selected, kubeconfig=kubeconfig,
                                                              kube=kube, artifacts=artifacts, run_id=run_id,
                                                              logs=logs)
                profile_seconds[profile_name] = time.monotonic() - t0
                results.extend(done)
    finally:
        await kube.close()
    for result in results:
        result.cells = compare.compare_case(result.case.name, result.records[UPSTREAM], result.records["ours"], KNOWN)
    controller_metrics = metrics.compare_pages(pages, KNOWN)
    families = {p: {side: metrics.families(samples) for side, samples in sides.items()} for p, sides in pages.items()}
    return RunResult(run_id, results, controller_metrics, time.monotonic() - started, pages=families,
                     profiles=profile_seconds)


def write_json(result: RunResult, path: Path) -> None:
    def record(r: SideRecord) -> dict[str, Any]:
        return {"error": r.error, "waits": r.waits, "seconds": round(r.seconds, 1),
                "checkpoints": {k: vars(v) for k, v in r.checkpoints.items()}, "events": r.events,
                "notifications": r.notifications, "requeue": r.requeue, "requeue_seconds": r.requeue_seconds,
                "metrics": r.metrics}

    data = {
        "run": result.run_id, "seconds": round(result.seconds, 1), "unexplained": result.unexplained,
        "controller_metrics": {a: vars(c) for a, c in result.controller_metrics.items()},
        "metric_families": result.pages,
        "cases": {c.case.name: {"title": c.case.title, "profile": c.case.profile,
                                "cells": {a: vars(cell) for a, cell in c.cells.items()},
                                "records": {s: record(r) for s, r in c.records.items()}} for c in result.cases},
    }
    path.write_text(json.dumps(data, indent=1, default=str))


async def run_swap(*, kubeconfig: str, logs: Path) -> Any:
    from .swap import Swap

    kube = KubeClient(config=await load_kubeconfig(kubeconfig))
    try:
        async with ArtifactServer() as artifacts:
            swap = Swap(kube=kube, kubeconfig=kubeconfig, artifacts=artifacts, run_id=secrets.token_hex(2),
                        logs=logs)
            return await swap.run()
    finally:
        await kube.close()
