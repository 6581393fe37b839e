"""Time calls the way benchmarks here must: repeat, take the median, report the spread.

Each repeat runs the call ``number`` times (chosen so one repeat lasts at least ``min_time``
seconds) and the per-call time is the repeat's total divided by ``number``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "SPIN_COOLDOWN",
    "SpeedComparison",
    "Timing",
    "compare_speed",
    "measure",
    "measure_many",
    "spin_cooldowns",
    "spins_between_runs",
]

# Seconds after which ONNX Runtime's spinning threads have gone to sleep: they spin up to about
# 2^20 pause instructions (tens of ms here) after their last work. Measured in
# benchmarks/spin_neighbours.py.
SPIN_COOLDOWN = 0.1


def spins_between_runs(settings: Any) -> bool:
    """Whether a session with these :class:`~onnxbridge.runtime.SessionSettings` leaves threads
    spinning after a run returns (several intra-op threads, or ONNX Runtime's choice, spinning
    without ``spin_in_runs_only``): the sessions ``measure_many`` should cool down after."""
    pools = settings.intra_op_num_threads != 1 or (
        settings.execution_mode == "parallel" and settings.inter_op_num_threads != 1
    )
    return settings.allow_spinning and not settings.spin_in_runs_only and pools


def spin_cooldowns(settings: Mapping[str, Any]) -> dict[str, float]:
    """``measure_many``'s ``cooldown`` for calls named by their session settings: a pause of
    :data:`SPIN_COOLDOWN` after each one whose threads spin on after a run."""
    return {name: SPIN_COOLDOWN for name, s in settings.items() if spins_between_runs(s)}


@dataclass(frozen=True)
class Timing:
    """Per-call seconds over ``repeat`` repeats of ``number`` calls each."""

    median: float
    q1: float
    q3: float
    minimum: float
    maximum: float
    repeat: int
    number: int

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median (0.05: the middle half spans 5 %)."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _calibrate(fn: Callable[[], Any], min_time: float) -> int:
    fn()  # warm-up: first calls pay for lazy initialisation
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time or number >= 1 << 20:
            return number
        number *= 2 if elapsed == 0 else max(2, int(min_time / elapsed) + 1)


def _summarise(samples: list[float], number: int) -> Timing:
    arr = np.asarray(samples)
    return Timing(
        median=float(np.median(arr)),
        q1=float(np.percentile(arr, 25)),
        q3=float(np.percentile(arr, 75)),
        minimum=float(arr.min()),
        maximum=float(arr.max()),
        repeat=len(samples),
        number=number,
    )


def _one_repeat(fn: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def measure_many(
    fns: dict[str, Callable[[], Any]],
    *,
    repeat: int = 7,
    min_time: float = 0.05,
    progress: Callable[[], None] | None = None,
    cooldown: Mapping[str, float] | None = None,
) -> dict[str, Timing]:
    """Time several calls with their repeats interleaved, so machine noise hits them alike.

    Each call is warmed up and calibrated first; then every round runs one repeat of each call,
    in turn, each round starting one call further along (round-robin), so that every call is
    timed equally often in every place of the order. The place matters: the second of two
    *identical* session calls timed back to back measures slower over whole runs, which a fixed
    order would charge to one call. ``progress`` (if given) is called after each calibration and
    each repeat, that is ``len(fns) * (repeat + 1)`` times.

    ``cooldown`` maps a call's name to seconds to pause after each of its repeats (and its
    calibration) before the next call is timed. ONNX Runtime sessions that allow spinning keep
    their idle threads spinning for tens of milliseconds after their last work; on a 2-core
    machine that made the *next* session timed much slower, so whoever came after a spinning
    session lost. :data:`SPIN_COOLDOWN` lets them go quiet.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    pauses = dict(cooldown or {})
    numbers = {}
    for name, fn in fns.items():
        numbers[name] = _calibrate(fn, min_time)
        if name in pauses:
            time.sleep(pauses[name])
        if progress is not None:
            progress()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for round_ in range(repeat):
        start = round_ % len(names)
        for name in names[start:] + names[:start]:
            samples[name].append(_one_repeat(fns[name], numbers[name]))
            if name in pauses:
                time.sleep(pauses[name])
            if progress is not None:
                progress()
    return {name: _summarise(samples[name], numbers[name]) for name in fns}


def measure(
    fn: Callable[[], Any], *, repeat: int = 7, number: int | None = None, min_time: float = 0.05
) -> Timing:
    """Time ``fn()``: per-call median and quartiles over ``repeat`` repeats."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if number is None:
        number = _calibrate(fn, min_time)
    else:
        fn()
    return _summarise([_one_repeat(fn, number) for _ in range(repeat)], number)


@dataclass(frozen=True)
class SpeedComparison:
    """scikit-learn ``predict`` against an ONNX Runtime session on the same rows."""

    rows: int
    sklearn: Timing
    onnxruntime: Timing

    @property
    def speedup(self) -> float:
        """How many times faster ONNX Runtime is (median over median)."""
        return self.sklearn.median / self.onnxruntime.median

    def _repr_html_(self) -> str:
        """Both medians and the speed-up, as an HTML table (how a notebook shows it)."""
        from onnxbridge.bench._html import speed_html

        return speed_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "rows": self.rows,
            "sklearn": self.sklearn.to_dict(),
            "onnxruntime": self.onnxruntime.to_dict(),
            "speedup": self.speedup,
        }


def compare_speed(
    estimator: Any, predictor: Any, X: Any, *, repeat: int = 7, min_time: float = 0.05
) -> SpeedComparison:
    """Time ``estimator.predict(X)`` against the ONNX session on the same float32 rows.

    The ONNX side is timed on prepared feeds (the session call alone), the scikit-learn side on
    the same array, so both measure inference, not data conversion.
    """
    # Both sides get the same float32 values, as a deployed ONNX model would.
    X = X.astype(np.float32) if hasattr(X, "columns") else np.asarray(X, dtype=np.float32)
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None and not hasattr(X, "columns"):
        import pandas as pd

        # Same rows, with the names the estimator was fitted on (avoids sklearn's warning).
        X = pd.DataFrame(X, columns=list(names))
    feeds = predictor.prepare(X)
    # A tuned model runs large batches on its throughput session (runtime/settings.py).
    session = predictor.session_for(len(X))
    timings = measure_many(
        {"sklearn": lambda: estimator.predict(X), "onnxruntime": lambda: session.run(None, feeds)},
        repeat=repeat,
        min_time=min_time,
    )
    return SpeedComparison(
        rows=len(X), sklearn=timings["sklearn"], onnxruntime=timings["onnxruntime"]
    )
