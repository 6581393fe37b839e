"""Timing harness and ``bench`` (engines × batch sizes, sweeps, plots). ``tune``, which decides
from such timings, is :mod:`onnxbridge.tune`."""

from typing import Any

from onnxbridge.bench.plot import bench_figure, sweep_figure
from onnxbridge.bench.run import BenchReport, EngineTiming, ModelFacts, bench_model
from onnxbridge.bench.timing import (
    SPIN_COOLDOWN,
    SpeedComparison,
    Timing,
    compare_speed,
    measure,
    measure_many,
    spin_cooldowns,
    spins_between_runs,
)

__all__ = [
    "SPIN_COOLDOWN",
    "BenchReport",
    "EngineTiming",
    "ModelFacts",
    "SpeedComparison",
    "Timing",
    "bench_figure",
    "bench_model",
    "compare_speed",
    "measure",
    "measure_many",
    "spin_cooldowns",
    "spins_between_runs",
    "sweep_figure",
]

# Importable from here too for code written before onnxbridge.tune existed; loaded on first use
# only, so importing bench never imports tune.
_MOVED_TO_TUNE = ("TuneReport", "read_tuning", "tune_model")


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_TUNE:
        import onnxbridge.tune

        return getattr(onnxbridge.tune, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
