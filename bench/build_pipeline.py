#!/usr/bin/env python3
"""Benchmark: download + extract + generate + confine + kustomize build + parse (+ substitution).

Not a test. For builds of 1, 100 and 1,000 objects it serves a generated artifact from a local
aiohttp server and runs the real pipeline (:class:`BuildPipeline`) end to end, reporting the
median wall time of each stage over ``--repeat`` runs, plus the throughput of N concurrent
reconciles of the 100-object build (bounded by the builder semaphore).

Usage: ``python bench/build_pipeline.py [--repeat 5] [--sizes 1,100,1000] [--concurrency 8]``
(needs kubectl >= 1.27 or kustomize >= 5 on PATH, e.g. ``.venv/bin`` first).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from kustomize_controller.kustomize.build import KustomizeBuilder, detect_builder, parallel_builds
from kustomize_controller.kustomize.extract import Workspace, extract_tarball
from kustomize_controller.kustomize.fetch import ArtifactFetcher
from kustomize_controller.kustomize.parse import parse_documents
from kustomize_controller.kustomize.pipeline import BuildOptions, BuildPipeline
from kustomize_controller.runtime.clock import RealClock
from kustomize_controller.runtime.cpus import usable_cpus
from kustomize_controller.testing.artifacts import pack_files
from tests.loopback import serve, serve_blobs

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{i}
  labels: {{app: app-{i}, tier: "${{TIER}}"}}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: app-{i}}}
  template:
    metadata:
      labels: {{app: app-{i}}}
    spec:
      containers:
      - name: app
        image: ghcr.io/example/app:1.{i}
        args: ["--port=8080", "--log-level=info"]
        env:
        - {{name: REGION, value: "${{REGION:=eu-west-1}}"}}
        resources:
          requests: {{cpu: 10m, memory: 32Mi}}
"""
SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: app-{i}
spec:
  selector: {{app: app-{i}}}
  ports:
  - {{port: 80, targetPort: 8080}}
"""
CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: app-{i}
data:
  settings.yaml: |
    feature: enabled
    index: "{i}"
"""


def make_artifact(objects: int) -> bytes:
    templates = [DEPLOYMENT, SERVICE, CONFIGMAP]
    files: dict[str, str | bytes] = {}
    resources = []
    for i in range(objects):
        files[f"app/obj-{i:04d}.yaml"] = templates[i % 3].format(i=i)
        resources.append(f"- obj-{i:04d}.yaml")
    files["app/kustomization.yaml"] = "resources:\n" + "\n".join(resources) + "\n"
    return pack_files(files)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f}"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    clock = RealClock()
    cpus = usable_cpus().count  # what the builder below sizes its slots for
    command = await detect_builder(clock=clock)
    blobs = {f"/{n}.tgz": make_artifact(n) for n in sizes}
    runner, url = await serve(serve_blobs(blobs))
    options = BuildOptions(path="app", allow_remote_bases=False)
    substituted = BuildOptions.from_spec(
        {"path": "app", "postBuild": {"substitute": {"TIER": "gold"}}}, no_remote_bases=True
    )
    print(f"builder: {' '.join(command.argv)} ({command.version}, kustomize {command.kustomize_version})")
    print(f"python {sys.version.split()[0]}, {cpus} usable CPUs, median of {args.repeat} runs, times in ms\n")
    header = (
        f"{'objects':>7} {'tgz KiB':>8} {'download':>8} {'extract':>8} {'builder':>8} {'parse':>8}"
        f" {'pipeline':>8} {'+subst':>8}"
    )
    print(header)
    try:
        async with aiohttp.ClientSession() as session:
            fetcher = ArtifactFetcher(session=session, clock=clock, env={})
            with tempfile.TemporaryDirectory() as tmp:
                workspace = Workspace(Path(tmp) / "ws")
                builder = KustomizeBuilder(command=command, clock=clock, cpus=cpus)
                pipeline = BuildPipeline(builder=builder, workspace=workspace, fetcher=fetcher)
                for n in sizes:
                    blob = blobs[f"/{n}.tgz"]
                    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
                    t_dl, t_ex, t_build, t_parse, t_all, t_sub = [], [], [], [], [], []
                    for _ in range(args.repeat):
                        async with workspace.tempdir() as d:
                            t0 = time.perf_counter()
                            await fetcher.fetch(f"{url}/{n}.tgz", digest, d / "a.tgz")
                            t1 = time.perf_counter()
                            (d / "root").mkdir()
                            (d / "work").mkdir()
                            await asyncio.to_thread(extract_tarball, d / "a.tgz", d / "root")
                            t2 = time.perf_counter()
                            out = await builder.build(
                                d / "root" / "app", root=d / "root", workdir=d / "work", allow_remote=False
                            )
                            t3 = time.perf_counter()
                            docs = parse_documents(out)
                            t4 = time.perf_counter()
                            assert len(docs) == n
                        t_dl.append(t1 - t0)
                        t_ex.append(t2 - t1)
                        t_build.append(t3 - t2)
                        t_parse.append(t4 - t3)
                        t0 = time.perf_counter()
                        result = await pipeline.run(url=f"{url}/{n}.tgz", digest=digest, options=options)
                        t_all.append(time.perf_counter() - t0)
                        assert len(result.objects) == n
                        t0 = time.perf_counter()
                        await pipeline.run(url=f"{url}/{n}.tgz", digest=digest, options=substituted)
                        t_sub.append(time.perf_counter() - t0)
                    print(
                        f"{n:>7} {len(blob) / 1024:>8.1f} {ms(t_dl)} {ms(t_ex)} {ms(t_build)} {ms(t_parse)}"
                        f" {ms(t_all)} {ms(t_sub)}"
                    )

                n = 100 if 100 in sizes else sizes[0]
                blob = blobs[f"/{n}.tgz"]
                digest = "sha256:" + hashlib.sha256(blob).hexdigest()
                t0 = time.perf_counter()
                await asyncio.gather(
                    *(
                        pipeline.run(url=f"{url}/{n}.tgz", digest=digest, options=options)
                        for _ in range(args.concurrency)
                    )
                )
                elapsed = time.perf_counter() - t0
                print(
                    f"\n{args.concurrency} concurrent {n}-object pipelines: {elapsed * 1000:.0f} ms total, "
                    f"{args.concurrency / elapsed:.1f} builds/s (semaphore = {parallel_builds(cpus)} builders)"
                )
    finally:
        await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
