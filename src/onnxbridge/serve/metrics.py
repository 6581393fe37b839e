"""Prometheus metrics at ``/metrics``: requests, errors and latency per model and endpoint.

Each app has its own registry (tests start several). With ``--workers N`` every worker process
counts its own requests; a scrape reaches one of them (see docs/serve.md).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

__all__ = ["CONTENT_TYPE", "ServeMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Latency buckets from 100 µs (one ONNX Runtime row) to 10 s (a large batch).
_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    10.0,
)


class ServeMetrics:
    """The server's counters and histograms.

    Label ``model`` is the name of a model the server knows, or ``""`` for a request to an
    unknown one (client-chosen names never become label values: they would grow without bound).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "onnxbridge_requests",
            "Requests answered, by model and endpoint.",
            ["model", "endpoint"],
            registry=self.registry,
        )
        self.errors = Counter(
            "onnxbridge_request_errors",
            "Requests answered with an error, by status.",
            ["model", "endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "onnxbridge_request_duration_seconds",
            "Time to answer a request, in seconds.",
            ["model", "endpoint"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rows = Counter(
            "onnxbridge_inference_rows",
            "Rows (first dimension of the first input) inferred.",
            ["model"],
            registry=self.registry,
        )
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}

    def observe(
        self, model: str, endpoint: str, seconds: float, status: int, rows: int = 0
    ) -> None:
        """Record one answered request."""
        key = (model, endpoint)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(model, endpoint), self.latency.labels(model, endpoint))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if status >= 400:
            self.errors.labels(model, endpoint, str(status)).inc()
        if rows:
            self.rows.labels(model).inc(rows)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
