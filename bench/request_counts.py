"""Issue 13: requests per Kustomization per phase, with the controller's default flags.

``request_counts(cfg, n, flow_control_headers=...)`` runs, on a fresh API server (or ``BENCH_KUBECONFIG``):
cold start of ``n`` Kustomizations × 4 objects to all Ready, a new revision that changes only the
ConfigMap of every app, and one periodic no-op round (``requestedAt``). The controller runs with
``--concurrent=20`` and *no* ``--kube-api-qps``/``--kube-api-burst`` flags, so it throttles the way a
user's does: not at all when the server has API Priority and Fairness (the embedded server's default,
and every real kube-apiserver), the 50 qps / 300 burst bucket when ``flow_control_headers=False``
(the embedded server started with ``--no-flow-control-headers``; not possible on a real cluster).

Metrics (prefix ``apf`` or ``noapf``): ``<phase>.seconds``, ``<phase>.requests_per_ks`` and
``<phase>.req.<what>`` per Kustomization, where ``<what>`` is the verb, dry-run and resource from the
controller's ``kustomize_controller_kube_requests_total`` (so the counts are the controller's own, on any
cluster), and ``mode.<throttling mode>`` = 1 for the mode the controller chose; ``cold.cpu_s``,
``cold.kustomize_cpu_s`` and ``cold.apiserver_cpu_s``: the CPU seconds of the controller (start-up
included), of its kustomize builds and of the embedded API server until all were Ready.
"""

from __future__ import annotations

import time

from bench.procs import metric_sum, requests_by_kind, throttling_mode
from bench.scenarios import Config, Metrics, _settled, api_cpu, cluster, controller
from bench.workload import EXTERNAL_KUBECONFIG, Tracker, bounded, publish, request_reconcile, setup

FLAGS = ["--concurrent=20"]
PHASES = (("cold", "cold start → all Ready"), ("revision", "new revision (ConfigMap changed) → all applied"),
          ("noop", "periodic no-op round"))
TARGETS = {"cold": 12.0, "revision": 10.0, "noop": 6.0}


# The conversion webhook's start-up requests (its serving certificate's Secret, the CRD's conversion
# settings). The workload's reconciles read no Secret and no CRD (no SOPS, no CRDs in the apps), so in
# this scenario these are the start-up's alone.
_WEBHOOK_SETUP = frozenset({
    "get secrets", "create secrets", "update secrets", "patch secrets",
    "get customresourcedefinitions", "patch customresourcedefinitions", "update customresourcedefinitions",
})


def _per_ks(after: dict[tuple[str, str], float], before: dict[tuple[str, str], float], n: int,
            m: Metrics, key: str) -> None:
    total = metric_sum(after, "rest_client_requests_total") - metric_sum(before, "rest_client_requests_total")
    m[f"{key}.requests_per_ks"] = total / n
    a, b = requests_by_kind(after), requests_by_kind(before)
    startup = 0.0
    for what, count in a.items():
        delta = count - b.get(what, 0.0)
        if delta:
            m[f"{key}.req.{what}"] = delta / n
            if what.startswith(("list ", "watch ", "get (discovery)")) or what in _WEBHOOK_SETUP:
                startup += delta
    # what the reconciles cost, without the informers' lists and watches, the discovery reads and the
    # conversion webhook's set-up of the process (paid once per start, not per Kustomization)
    m[f"{key}.reconcile_requests_per_ks"] = (total - startup) / n
    retries = metric_sum(after, "rest_client_request_retries_total") - metric_sum(
        before, "rest_client_request_retries_total")
    if retries:
        m[f"{key}.retries_per_ks"] = retries / n


async def request_counts(cfg: Config, n: int, *, flow_control_headers: bool = True,
                         into: Metrics | None = None) -> Metrics:
    m: Metrics = into if into is not None else {}
    prefix = "apf" if flow_control_headers else "noapf"
    if EXTERNAL_KUBECONFIG and not flow_control_headers:
        raise RuntimeError("a real cluster's flow-control headers cannot be turned off; run with headers only")
    label = f"requests-{prefix}-{n}"
    api_args = () if flow_control_headers else ("--no-flow-control-headers",)
    async with cluster(cfg, label, api_args=api_args) as (api, client, artifacts), Tracker(client) as tracker:
        expected = await setup(client, artifacts, n, wait=cfg.wait)
        names = list(expected)
        api0 = api_cpu(api)
        started = time.perf_counter()
        ctrl = controller(cfg, api, name=label, flags=FLAGS)
        async with ctrl:
            ready = await tracker.wait_ready(expected, within=max(300.0, n * 1.0))
            m[f"{prefix}.cold.seconds"] = ready - started
            # where the cold start's CPU went (start-up included): the floor its wall time has on this machine
            stats = ctrl.stats()
            m[f"{prefix}.cold.cpu_s"] = stats.cpu_s
            m[f"{prefix}.cold.kustomize_cpu_s"] = stats.children_cpu_s
            if api.pid:
                m[f"{prefix}.cold.apiserver_cpu_s"] = api_cpu(api) - api0
            cold = await _settled(ctrl)
            m[f"{prefix}.mode.{throttling_mode(cold)}"] = 1.0
            _per_ks(cold, {}, n, m, f"{prefix}.cold")

            started = time.perf_counter()
            revisions = await bounded(publish(client, artifacts, i, rev=2, image_rev=1) for i in range(n))
            ready = await tracker.wait_ready(dict(zip(names, revisions, strict=True)), within=max(300.0, n * 1.0))
            m[f"{prefix}.revision.seconds"] = ready - started
            revised = await _settled(ctrl)
            _per_ks(revised, cold, n, m, f"{prefix}.revision")

            token = f"bench-requests-{time.time_ns()}"
            started = time.perf_counter()
            await request_reconcile(client, names, token)
            handled = await tracker.wait_handled(names, token, within=max(120.0, n * 0.5))
            m[f"{prefix}.noop.seconds"] = handled - started
            after = await _settled(ctrl)
            _per_ks(after, revised, n, m, f"{prefix}.noop")
    return m


def summary_rows(table: dict[str, list[float]]) -> list[str]:
    """Rows for docs/benchmarks.md: requests per Kustomization per phase, against the issue's targets."""
    import statistics

    def med(key: str) -> float | None:
        values = table.get(key)
        return statistics.median(values) if values else None

    rows: list[str] = []
    for prefix, label in (("apf", "flow-control headers on (default)"), ("noapf", "headers off: 50 qps / 300 burst")):
        modes = [k.split(".", 2)[2] for k in table if k.startswith(f"{prefix}.mode.")]
        for phase, what in PHASES:
            total = med(f"{prefix}.{phase}.requests_per_ks")
            per_reconcile = med(f"{prefix}.{phase}.reconcile_requests_per_ks")
            seconds = med(f"{prefix}.{phase}.seconds")
            if total is None or per_reconcile is None:
                continue
            parts = sorted(((k.split(".req.", 1)[1], v) for k in table if k.startswith(f"{prefix}.{phase}.req.")
                            for v in [med(k) or 0.0]), key=lambda kv: -kv[1])
            detail = ", ".join(f"{what_} {value:.2f}" for what_, value in parts if value >= 0.005)
            target = TARGETS[phase]
            verdict = "met" if per_reconcile <= target else "**not met**"
            rows.append(f"| {label} ({'/'.join(modes) or '?'}) | {what} | {seconds or 0:.2f} s | {total:.2f} | "
                        f"{per_reconcile:.2f} | ≤ {target:g}: {verdict} | {detail} |")
    return rows


def render(table: dict[str, list[float]], n: int) -> list[str]:
    rows = summary_rows(table)
    if not rows:
        return []
    return [
        f"### Requests per Kustomization, {n} × 4 objects, default flags (issue 13)",
        "",
        "Counted by the controller itself (`kustomize_controller_kube_requests_total`, so the same on a real "
        "cluster). All requests of the phase divided by the Kustomizations; then the same without the "
        "process's start-up requests (informers' lists and watches, discovery, the conversion webhook's "
        "certificate Secret and CRD settings), which are paid once per start, "
        "not per Kustomization: that is what one reconcile costs, and what the target is about. The cold "
        "start includes the reconcile that adds the finalizer.",
        "",
        "| API server | phase | time | requests / Kustomization | of which reconciles | target | "
        "by verb and resource (per Kustomization) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]

