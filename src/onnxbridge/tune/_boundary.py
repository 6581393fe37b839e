"""The boundary between the regimes: up to how many rows a call runs on the latency settings.

When both regimes are tuned and their winners differ, the two are timed against each other at
batch sizes between the two regimes' sizes (10, 100, 1 000 rows), each through the router a
model stored with that boundary runs, and the boundary is the split that comes closest to the
faster of the two at every size (:func:`boundary_limit`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from onnxbridge.runtime._router import Router
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from onnxbridge.tune._candidates import Feeds
from onnxbridge.tune._search import Measure

__all__ = ["BOUNDARY_SIZES", "DEFAULT_LATENCY_MAX_ROWS", "boundary_limit", "measure_boundary"]

# The boundary used when it was not measured (one regime tuned alone).
DEFAULT_LATENCY_MAX_ROWS = 100
BOUNDARY_SIZES = (10, 100, 1_000)
# The boundary's calls are small and cheap to repeat, and their noise picks the regime of every
# call up to 1 000 rows: they take this many times the candidates' repeats.
BOUNDARY_REPEAT_FACTOR = 3


def boundary_sizes(low: int, high: int) -> list[int]:
    """The sizes timed between the latency size ``low`` and the throughput size ``high``."""
    return [s for s in BOUNDARY_SIZES if low < s < high]


def measure_boundary(
    measure: Measure,
    latency: SessionSettings,
    throughput: SessionSettings,
    high: int,
    feeds_for: Callable[[int], Feeds],
) -> tuple[int, list[dict[str, Any]]]:
    """``latency_max_rows`` and the timings it was chosen from (``[{"rows", "latency",
    "throughput"}]``), for calls between ``measure.latency_rows`` and ``high`` rows."""
    low = measure.latency_rows
    sizes = boundary_sizes(low, high)
    if not sizes:
        return low, []
    # One router runs every size on the latency settings, one every size on the throughput's.
    below = TuningSpec(latency=latency, throughput=throughput, latency_max_rows=max(sizes))
    routers = [
        Router(measure.model, spec, settings=latency)
        for spec in (below, replace(below, latency_max_rows=low))
    ]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        lat, thr = measure.time(routers, feeds_for(size), repeat_factor=BOUNDARY_REPEAT_FACTOR)
        rows.append({"rows": size, "latency": lat.median, "throughput": thr.median})
    return boundary_limit(low, rows), rows


def boundary_limit(low: int, rows: list[dict[str, Any]]) -> int:
    """``latency_max_rows`` from the boundary's timings (``[{"rows", "latency", "throughput"}]``
    by size): of the limits ``low`` and each measured size, the one whose split — latency
    settings up to it, throughput settings above — comes closest to the faster regime at every
    size: the smallest worst ratio, then the smallest sum of ratios, then the smallest limit.

    So one noisy size does not cut the latency regime short: a limit that loses a little at
    one size and wins at the others beats stopping at the first loss.
    """
    best: tuple[float, float] | None = None
    limit = low
    for candidate in [low, *(r["rows"] for r in rows)]:
        # Each size timed on the regime a model stored with this limit runs it on.
        split = TuningSpec(SessionSettings(), SessionSettings(), latency_max_rows=candidate)
        ratios = [r[split.regime_for(r["rows"])] / min(r["latency"], r["throughput"]) for r in rows]
        key = (max(ratios, default=1.0), sum(ratios))
        if best is None or key < best:
            best, limit = key, candidate
    return limit
