"""Timing harness, ``bench`` (engines × batch sizes, sweeps, plots) and ``tune`` (session settings
per regime, accelerators)."""

from onnxbridge.bench.run import BenchReport, EngineTiming, ModelFacts, bench_model
from onnxbridge.bench.timing import SpeedComparison, Timing, compare_speed, measure, measure_many
from onnxbridge.bench.tune import TuneReport, read_tuning, tune_model

__all__ = [
    "BenchReport",
    "EngineTiming",
    "ModelFacts",
    "SpeedComparison",
    "Timing",
    "TuneReport",
    "bench_model",
    "compare_speed",
    "measure",
    "measure_many",
    "read_tuning",
    "tune_model",
]
