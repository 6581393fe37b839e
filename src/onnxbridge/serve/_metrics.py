"""Prometheus metrics at ``/metrics``: requests, errors and latency per model and endpoint.

The hot path only bumps plain counters (a couple of microseconds); they become Prometheus
families when ``/metrics`` is scraped, through a custom collector. Each app has its own
registry (tests start several). With ``--workers N`` every worker process counts its own
requests and a scrape reaches one of them (docs/serve.md).

Families: ``onnxbridge_requests_total{model,endpoint}``,
``onnxbridge_request_errors_total{model,endpoint,status}``,
``onnxbridge_request_duration_seconds{model,endpoint}`` (histogram) and
``onnxbridge_inference_rows_total{model}``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

__all__ = ["BUCKETS", "CONTENT_TYPE", "ServeMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Latency buckets from 100 µs (a single-row call) to 10 s (a large batch).
BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0,
)  # fmt: skip


class _Series:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)  # the last one: above every bound (+Inf)


class ServeMetrics:
    """The server's counters and latency histograms.

    Label ``model`` is the name of a model the server knows, or ``""`` for a request to an
    unknown one (client-chosen names never become label values: they would grow without bound).
    Called from the event loop only.
    """

    def __init__(self) -> None:
        self._series: dict[tuple[str, str], _Series] = {}
        self._errors: dict[tuple[str, str, str], int] = {}
        self._rows: dict[str, int] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # a collector: has collect()

    def observe(
        self, model: str, endpoint: str, seconds: float, status: int, rows: int = 0
    ) -> None:
        """Record one answered request."""
        series = self._series.get((model, endpoint))
        if series is None:
            series = self._series[(model, endpoint)] = _Series()
        series.count += 1
        series.total += seconds
        series.buckets[bisect_left(BUCKETS, seconds)] += 1
        if status >= 400:
            key = (model, endpoint, str(status))
            self._errors[key] = self._errors.get(key, 0) + 1
        if rows:
            self._rows[model] = self._rows.get(model, 0) + rows

    def collect(self) -> Iterator[Any]:
        """The Prometheus families (called by the registry at scrape time)."""
        requests = CounterMetricFamily(
            "onnxbridge_requests", "Requests answered, by model and endpoint.",
            labels=["model", "endpoint"],
        )  # fmt: skip
        latency = HistogramMetricFamily(
            "onnxbridge_request_duration_seconds", "Time to answer a request, in seconds.",
            labels=["model", "endpoint"],
        )  # fmt: skip
        for (model, endpoint), series in sorted(self._series.items()):
            requests.add_metric([model, endpoint], series.count)
            cumulative, buckets = 0, []
            for bound, count in zip((*map(str, BUCKETS), "+Inf"), series.buckets, strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            latency.add_metric([model, endpoint], buckets, series.total)
        errors = CounterMetricFamily(
            "onnxbridge_request_errors", "Requests answered with an error, by status.",
            labels=["model", "endpoint", "status"],
        )  # fmt: skip
        for labels, count in sorted(self._errors.items()):
            errors.add_metric(list(labels), count)
        rows = CounterMetricFamily(
            "onnxbridge_inference_rows",
            "Rows (first dimension of the first input) inferred.",
            labels=["model"],
        )
        for model, count in sorted(self._rows.items()):
            rows.add_metric([model], count)
        yield from (requests, errors, latency, rows)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
