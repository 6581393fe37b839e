"""Timing harness, ``bench`` (engines × batch sizes, sweeps, plots) and ``tune`` (session settings
per regime, accelerators)."""

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
from onnxbridge.bench.tune import TuneReport, read_tuning, tune_model

__all__ = [
    "SPIN_COOLDOWN",
    "BenchReport",
    "EngineTiming",
    "ModelFacts",
    "SpeedComparison",
    "Timing",
    "TuneReport",
    "bench_figure",
    "bench_model",
    "compare_speed",
    "measure",
    "measure_many",
    "read_tuning",
    "spin_cooldowns",
    "spins_between_runs",
    "sweep_figure",
    "tune_model",
]
