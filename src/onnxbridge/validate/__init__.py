"""Validate an ONNX model against its source: probe sets, three runtimes, diagnosis, reports.

:func:`validate_bundle` and :func:`validate_model` give a verdict a CI pipeline can gate on
(EQUIVALENT / DIVERGENT); :func:`write_golden` and :func:`check_golden` pin the ONNX outputs on
the probe rows so a library upgrade cannot change them silently.
"""

from onnxbridge.validate._compare import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    DEFAULT_TOLERANCES,
    OutputComparison,
    Tolerance,
)
from onnxbridge.validate._core import (
    compare_predictions,
    validate_bundle,
    validate_model,
    write_reports,
)
from onnxbridge.validate._golden import GoldenReport, check_golden, write_golden
from onnxbridge.validate._probes import PROBE_NAMES, ProbeSet, ProbeSpec, build_probe_sets
from onnxbridge.validate._report import (
    Diagnosis,
    PairComparison,
    ProbeSetResult,
    ValidationReport,
)

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "DEFAULT_TOLERANCES",
    "PROBE_NAMES",
    "Diagnosis",
    "GoldenReport",
    "OutputComparison",
    "PairComparison",
    "ProbeSet",
    "ProbeSetResult",
    "ProbeSpec",
    "Tolerance",
    "ValidationReport",
    "build_probe_sets",
    "check_golden",
    "compare_predictions",
    "validate_bundle",
    "validate_model",
    "write_golden",
    "write_reports",
]
