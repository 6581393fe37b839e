"""Timing harness: per-call medians over repeats, with the spread."""

from onnxbridge.bench.timing import SpeedComparison, Timing, compare_speed, measure, measure_many

__all__ = ["SpeedComparison", "Timing", "compare_speed", "measure", "measure_many"]
