"""``tune_model``: check the options, plan each regime, search, measure the boundary, store.

For each regime, ``latency`` (``latency_rows`` rows per call, 1 by default) and ``throughput``
(``throughput_rows``, 10 000 by default), the search (:mod:`onnxbridge.tune._search`) times
candidate settings in two steps:

1. intra-op threads 1 … cores without spinning, then 2 … cores spinning within runs only, then
   spinning between runs too (sequential, all graph optimisations), plus ONNX Runtime's own
   defaults;
2. on the winner of step 1: parallel execution mode, and graph optimisation levels ``extended``,
   ``basic``, ``disabled``; for the throughput regime also its rows split across the cores,
   its trees in blocks (a large tree ensemble) and its linear operators as dot products.

With both regimes tuned and different winners, the boundary between them is measured
(:mod:`onnxbridge.tune._boundary`). The result, a :class:`~onnxbridge.runtime._settings.TuningSpec`,
is stored in the model and the bundle's card (:mod:`onnxbridge.tune._store`). With
``engines="all"``, compiled engines are tried too (:mod:`onnxbridge.tune._engines`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Literal, get_args

from onnxbridge._onnxfile import read_model_bytes
from onnxbridge.bench._run import ProgressFn, machine_info
from onnxbridge.bench._source import BenchSource, open_source, tile_rows
from onnxbridge.bundle import now_iso
from onnxbridge.errors import DataError
from onnxbridge.runtime import Predictor
from onnxbridge.runtime._rewrites import blocked_model, linear_model
from onnxbridge.runtime._rewrites.tree_blocks import ONE_THREAD_TREE_BLOCK_NODES
from onnxbridge.runtime._settings import SessionSettings, TuningSpec, available_cores
from onnxbridge.tune._boundary import (
    BOUNDARY_REPEAT_FACTOR,
    BOUNDARY_SIZES,
    DEFAULT_LATENCY_MAX_ROWS,
    measure_boundary,
)
from onnxbridge.tune._candidates import MID_ROWS, RegimePlan, Variants, large_rows_for
from onnxbridge.tune._engines import EngineResult, tune_engines
from onnxbridge.tune._report import RegimeResult, TuneReport
from onnxbridge.tune._search import Measure, tune_regime
from onnxbridge.tune._store import read_tuning, store_tuning

__all__ = ["ENGINES", "REGIMES", "Engines", "Regime", "tune_model"]

Regime = Literal["latency", "throughput", "both"]
Engines = Literal["onnxruntime", "all"]
REGIMES: tuple[str, ...] = get_args(Regime)
ENGINES: tuple[str, ...] = get_args(Engines)


def tune_model(
    target: str | Path,
    *,
    regime: Regime = "both",
    engines: Engines = "onnxruntime",
    data: str | Path | None = None,
    latency_rows: int = 1,
    throughput_rows: int = 10_000,
    repeat: int = 7,
    min_time: float = 0.05,
    margin: float = 0.02,
    write: bool = True,
    progress: ProgressFn | None = None,
    trusted: Sequence[str] = (),
) -> TuneReport:
    """Tune a bundle's (or a ``.onnx`` file's) session settings and store them in the model.

    Args:
        target: a bundle folder or a ``.onnx`` file.
        regime: ``"latency"``, ``"throughput"`` or ``"both"``. Tuning one regime keeps the
            other's stored settings (or ``Predictor``'s defaults when there are none).
        engines: ``"onnxruntime"``, or ``"all"`` to also try installed accelerators (bundles
            with ``model.skops`` only).
        data: rows to use instead of the holdout.
        latency_rows: rows per call in the latency regime.
        throughput_rows: rows per call in the throughput regime.
        repeat: interleaved repeats per candidate.
        min_time: seconds one repeat lasts at least.
        margin: a candidate must be this much faster (relative) to beat a cheaper one.
        write: store the result (model metadata, card, ``reports/tune.json``).
        progress: called as ``progress(done, total, label)``.
        trusted: extra names to trust in the bundle's ``model.skops`` for this run (see
            :func:`onnxbridge.bundle.load_estimator`); never stored.

    Raises:
        DataError: bad regime, engines, row counts, repeat or margin.
        BundleError, OnnxModelError: a bad bundle or model.
    """
    _check_options(regime, engines, latency_rows, throughput_rows, repeat, margin, min_time)
    source = open_source(target, data=data, trusted=trusted)
    estimator = _estimator(source, engines, target)
    previous = read_tuning(source.onnx_path)
    cores = available_cores()
    feeds_for = _feeds_maker(source)
    whole = read_model_bytes(source.onnx_path)
    model = whole if whole is not None else str(source.onnx_path)
    plans = _plans(whole, regime, latency_rows, throughput_rows, feeds_for)
    ticks = _Ticks(progress, _total(plans, regime, engines, cores, repeat))
    measure = Measure(model, latency_rows, repeat, min_time, margin, ticks.step(""))
    results: dict[str, RegimeResult] = {p.regime: _search(p, measure, ticks, cores) for p in plans}
    spec, boundary = _regimes_spec(
        results,
        previous,
        regime,
        throughput_rows,
        replace(measure, progress=ticks.step("boundary")),
        feeds_for,
    )
    found = EngineResult(previous.accelerator if previous else None, [], [])
    if engines == "all":
        step = replace(measure, progress=ticks.step("accelerators"))
        found = tune_engines(source, estimator, spec, throughput_rows, step, write=write)
    spec = replace(
        spec,
        accelerator=found.record,
        measured=_measured(cores, results, latency_rows, throughput_rows),
    )
    report = TuneReport(
        model=str(source.onnx_path),
        spec=spec,
        regimes=list(results.values()),
        boundary=boundary,
        accelerators=found.checks,
        accelerators_skipped=found.skipped,
        machine=machine_info(),
    )
    if write:
        store_tuning(source, spec, report.to_dict())
    return report


def _estimator(source: BenchSource, engines: str, target: str | Path) -> Any:
    """The source model ``engines="all"`` compiles, loaded (and so trust-checked) before any
    timing: a refused model wastes no minutes. None for ``engines="onnxruntime"``."""
    if engines != "all":
        return None
    if not source.has_estimator:
        raise DataError(
            "engines='all' builds accelerators from the source model, so it needs a bundle "
            f"with model.skops; {str(target)!r} has none (use engines='onnxruntime')",
            arguments=("engines",),
        )
    return source.load_estimator()


def _search(plan: RegimePlan, measure: Measure, ticks: _Ticks, cores: int) -> RegimeResult:
    """One regime's search, its progress labelled with the regime."""
    end = ticks.done + plan.steps(cores, repeat=measure.repeat)
    step = ticks.step(f"{plan.regime}: {plan.rows} rows")
    result = tune_regime(plan, replace(measure, progress=step), cores)
    ticks.done = end  # the steps counted for candidates step two did not time again
    return result


def _check_options(
    regime: str,
    engines: str,
    latency_rows: Any,
    throughput_rows: Any,
    repeat: int,
    margin: float,
    min_time: float,
) -> None:
    """Refuse a bad option with a message that names it."""
    for name, value, allowed in (("regime", regime, REGIMES), ("engines", engines, ENGINES)):
        if value not in allowed:
            raise DataError(
                f"{name}={value!r} is not one of {', '.join(allowed)}", arguments=(name,)
            )
    for name, value in (("latency_rows", latency_rows), ("throughput_rows", throughput_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DataError(
                f"{name}={value!r} is not allowed: it must be a whole number >= 1",
                arguments=(name,),
            )
    if latency_rows >= throughput_rows:
        raise DataError(
            f"latency_rows={latency_rows} must be smaller than throughput_rows={throughput_rows}",
            arguments=("latency_rows", "throughput_rows"),
        )
    if repeat < 1:
        raise DataError(
            f"repeat={repeat} is not allowed: it must be at least 1", arguments=("repeat",)
        )
    if not (math.isfinite(margin) and 0 <= margin < 1):
        raise DataError(
            f"margin={margin} is not allowed: it must be between 0 and 1", arguments=("margin",)
        )
    if not (math.isfinite(min_time) and min_time > 0):
        raise DataError(
            f"min_time={min_time} is not allowed: it must be a number of seconds > 0",
            arguments=("min_time",),
        )


def _feeds_maker(source: BenchSource) -> Callable[[int], dict[str, Any]]:
    """Prepared feeds of ``rows`` rows of the source's rows (tiled as needed)."""
    predictor = Predictor(source.onnx_path)
    return lambda rows: predictor.prepare(tile_rows(source.rows, rows), allow_missing=True)


def _plans(
    # One message with its external data read in; None over 2 GiB: then the routers open the
    # path, and the graph rewrites, which need the whole message, are not tried.
    model: bytes | None,
    regime: Regime,
    latency_rows: int,
    throughput_rows: int,
    feeds_for: Callable[[int], dict[str, Any]],
) -> list[RegimePlan]:
    """The regimes to search, latency first. One row gains nothing from the rewrites or a row
    split: they are tried on the throughput regime only, which is also timed on 100-row calls
    (when between the two sizes) and its close candidates on larger calls."""
    plans = []
    if regime in ("latency", "both"):
        plans.append(RegimePlan("latency", feeds_for(latency_rows)))
    if regime in ("throughput", "both"):
        feeds = feeds_for(throughput_rows)
        row_bytes = sum(a.nbytes for a in feeds.values()) / throughput_rows
        large = large_rows_for(throughput_rows, row_bytes)
        mid = latency_rows < MID_ROWS < throughput_rows
        plans.append(
            RegimePlan(
                "throughput",
                feeds,
                _throughput_variants(model),
                feeds_for(MID_ROWS) if mid else None,
                feeds_for(large) if large else None,
            )
        )
    return plans


def _throughput_variants(model: bytes | None) -> Variants:
    variants = Variants.ROW_SPLIT
    if model is None:  # over 2 GiB: no rewrite can hold it
        return variants
    if blocked_model(model, ONE_THREAD_TREE_BLOCK_NODES) is not None:
        variants |= Variants.TREE_BLOCKS
    if linear_model(model) is not None:
        variants |= Variants.DOT_PRODUCT
    return variants


def _total(plans: list[RegimePlan], regime: str, engines: str, cores: int, repeat: int) -> int:
    """Progress steps of the whole run, at most."""
    total = sum(plan.steps(cores, repeat) for plan in plans)
    if regime == "both":
        total += len(BOUNDARY_SIZES) * 2 * (repeat * BOUNDARY_REPEAT_FACTOR + 1)
    if engines == "all":
        total += 2 * cores * 2 * (repeat + 1)
    return total


class _Ticks:
    """Counts progress steps and reports them as ``progress(done, total, label)``."""

    def __init__(self, progress: ProgressFn | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def step(self, label: str) -> Callable[[], None]:
        def tick() -> None:
            self.done += 1
            if self.progress is not None:
                self.progress(min(self.done, self.total), self.total, label)

        return tick


def _regimes_spec(
    results: dict[str, RegimeResult],
    previous: TuningSpec | None,
    regime: str,
    throughput_rows: int,
    measure: Measure,
    feeds_for: Callable[[int], dict[str, Any]],
) -> tuple[TuningSpec, list[dict[str, Any]]]:
    """Both regimes' settings (the previous ones, or the defaults, for a regime not tuned) and
    the boundary between them, with its timings when measured."""
    fallback = SessionSettings.onnxbridge_default()
    latency, throughput = (
        results[name].winner
        if name in results
        else (getattr(previous, name) if previous else fallback)
        for name in ("latency", "throughput")
    )
    boundary: list[dict[str, Any]] = []
    if regime == "both" and latency != throughput:
        limit, boundary = measure_boundary(measure, latency, throughput, throughput_rows, feeds_for)
    elif regime == "both":
        limit = throughput_rows  # the same settings: the boundary does not matter
    else:
        limit = previous.latency_max_rows if previous else DEFAULT_LATENCY_MAX_ROWS
    return TuningSpec(latency, throughput, limit), boundary


def _measured(
    cores: int, results: dict[str, RegimeResult], latency_rows: int, throughput_rows: int
) -> dict[str, Any]:
    """Where and when the spec was measured."""
    return {
        "cores": cores,
        "onnxruntime": _version("onnxruntime"),
        "regimes": list(results),
        "latency_rows": latency_rows,
        "throughput_rows": throughput_rows,
        "tuned_at": now_iso(),
    }


def _version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None
