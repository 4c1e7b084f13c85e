"""Metrics of the kube client: ``rest_client_requests_total{code,method,host}`` (controller-runtime),
``rest_client_request_retries_total{code,verb,host}`` (client-go: a 429/5xx with ``Retry-After`` sent
again), and two of ours: ``kustomize_controller_kube_requests_total{verb,resource,subresource,dry_run}``
(what the requests were for: ``resource`` is ``plural.group``, ``""`` for discovery and other
non-resource paths) and ``kustomize_controller_kube_client_throttling{host,mode}`` (1 for the mode the
start-up probe chose: ``priority-and-fairness``, ``client-side`` or ``none``; see ``flowcontrol``).

The counter is registered in the registry the caller gives (the manager owns the process registry);
with no registry the counter is kept private and unexported. ``code`` is the HTTP status as a string,
or ``<error>`` when no answer arrived (client-go's value); ``method`` is the HTTP verb; ``host`` is
``host:port`` of the API server.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class RestClientMetrics:
    def __init__(self, *, registry: CollectorRegistry | None = None) -> None:
        target = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.requests_total = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=target,
        )
        self.retries_total = Counter(
            "rest_client_request_retries_total",
            "Number of request retries, partitioned by status code, verb, and host.",
            ["code", "verb", "host"],  # client-go's label names (its verb is the HTTP method)
            registry=target,
        )
        self.by_resource_total = Counter(
            "kustomize_controller_kube_requests_total",
            "Number of requests sent to the Kubernetes API, partitioned by verb, resource, subresource "
            "and dry-run.",
            ["verb", "resource", "subresource", "dry_run"],
            registry=target,
        )
        self.throttling = Gauge(
            "kustomize_controller_kube_client_throttling",
            "1 for the client-side throttling mode chosen for an API server (priority-and-fairness: none).",
            ["host", "mode"],
            registry=target,
        )

    def observe(self, *, code: int | None, method: str, host: str) -> None:
        self.requests_total.labels(
            code=str(code) if code is not None else "<error>", method=method.upper(), host=host
        ).inc()

    def collectors(self) -> tuple[Counter | Gauge, ...]:
        """Every family, for a registry that exports a client built before it."""
        return (self.requests_total, self.retries_total, self.by_resource_total, self.throttling)

    def observe_retry(self, *, code: int, method: str, host: str) -> None:
        self.retries_total.labels(code=str(code), verb=method.upper(), host=host).inc()

    def observe_request(self, *, verb: str, resource: str, subresource: str, dry_run: bool) -> None:
        self.by_resource_total.labels(
            verb=verb, resource=resource, subresource=subresource, dry_run="true" if dry_run else "false"
        ).inc()

    def set_throttling(self, *, host: str, mode: str) -> None:
        for other in ("priority-and-fairness", "client-side", "none"):
            self.throttling.labels(host=host, mode=other).set(1 if other == mode else 0)
