"""Metrics of the kube client: ``rest_client_requests_total{code,method,host}`` (controller-runtime).

The counter is registered in the registry the caller gives (the manager owns the process registry);
with no registry the counter is kept private and unexported. ``code`` is the HTTP status as a string,
or ``<error>`` when no answer arrived (client-go's value); ``method`` is the HTTP verb; ``host`` is
``host:port`` of the API server.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class RestClientMetrics:
    def __init__(self, *, registry: CollectorRegistry | None = None) -> None:
        self.requests_total = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=registry if registry is not None else CollectorRegistry(auto_describe=True),
        )

    def observe(self, *, code: int | None, method: str, host: str) -> None:
        self.requests_total.labels(
            code=str(code) if code is not None else "<error>", method=method.upper(), host=host
        ).inc()
