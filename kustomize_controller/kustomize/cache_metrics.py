"""Prometheus series of the artifact and build caches and of the builder processes (our own
``kustomize_controller_`` prefix).

Both caches and the builder take an optional :class:`CacheMetrics`; without one they count nothing. The series are
registered on the registry the controller owns (no process-global registry), and every label value
is pre-set so that a dashboard sees zeros rather than missing series.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

ARTIFACT_RESULTS = ("hit", "miss")
BUILD_RESULTS = ("hit", "miss", "bypass")
PROCESS_KINDS = ("one", "several", "part")
SPLIT_RESULTS = ("split", "whole")
PART_RESULTS = ("built", "reused")


class CacheMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.artifact_requests = Counter(
            "kustomize_controller_artifact_cache_requests",
            "Artifact checkouts by result: hit (tree already extracted or being extracted) or miss "
            "(downloaded and extracted).",
            ["result"],
            registry=registry,
        )
        self.artifact_bytes = Gauge(
            "kustomize_controller_artifact_cache_bytes",
            "Bytes of extracted artifact trees held on disk by the artifact cache.",
            registry=registry,
        )
        self.build_requests = Counter(
            "kustomize_controller_build_cache_requests",
            "Builds by result: hit (rendered objects reused), miss (kustomize ran) or bypass "
            "(not cacheable: remote bases, unreadable variables, unidentified builder or keys).",
            ["result"],
            registry=registry,
        )
        self.build_bytes = Gauge(
            "kustomize_controller_build_cache_bytes",
            "Bytes of rendered objects (serialised) held in memory by the build cache.",
            registry=registry,
        )
        self.builder_processes = Counter(
            "kustomize_controller_builder_processes",
            "kustomize (or kubectl kustomize) processes run, by the builds they were given: one, several "
            "queued builds sharing one process, or a part of a large build split in parts.",
            ["builds"],
            registry=registry,
        )
        self.shared_builds = Counter(
            "kustomize_controller_builds_shared",
            "Builds whose output came from a process shared with other builds (the others ran alone).",
            registry=registry,
        )
        self.split_builds = Counter(
            "kustomize_controller_split_builds",
            "Large builds tried in parts, by result: split (the joined parts were proven to be the whole "
            "build's output) or whole (not proven, or a part failed: the whole root was built).",
            ["result"],
            registry=registry,
        )
        for result in SPLIT_RESULTS:
            self.split_builds.labels(result)
        self.split_parts = Counter(
            "kustomize_controller_split_parts",
            "Parts of large builds split in parts, by result: built (a kustomize process ran) or reused (the "
            "output of a part built before with the same inputs).",
            ["result"],
            registry=registry,
        )
        for result in PART_RESULTS:
            self.split_parts.labels(result)
        for kind in PROCESS_KINDS:
            self.builder_processes.labels(kind)
        for result in ARTIFACT_RESULTS:
            self.artifact_requests.labels(result)
        for result in BUILD_RESULTS:
            self.build_requests.labels(result)

    def artifact(self, result: str) -> None:
        self.artifact_requests.labels(result).inc()

    def set_artifact_bytes(self, size: int) -> None:
        self.artifact_bytes.set(size)

    def build(self, result: str) -> None:
        self.build_requests.labels(result).inc()

    def set_build_bytes(self, size: int) -> None:
        self.build_bytes.set(size)

    def builder_process(self, builds: str, *, shared: int = 0) -> None:
        """Count one builder process (``builds``: one of :data:`PROCESS_KINDS`) and the builds it served
        for a shared one."""
        self.builder_processes.labels(builds).inc()
        if shared:
            self.shared_builds.inc(shared)

    def split_build(self, result: str) -> None:
        """Count a build tried in parts (``result``: one of :data:`SPLIT_RESULTS`)."""
        self.split_builds.labels(result).inc()

    def split_part(self, result: str) -> None:
        """Count a part of a build in parts (``result``: one of :data:`PART_RESULTS`)."""
        self.split_parts.labels(result).inc()
