"""Timing harness and ``bench`` (engines × batch sizes, sweeps, plots). ``tune``, which decides
from such timings, is :mod:`onnxbridge.tune`."""

from onnxbridge.bench._plot import bench_figure, sweep_figure
from onnxbridge.bench._run import BenchReport, EngineTiming, ModelFacts, bench_model
from onnxbridge.bench._timing import (
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
