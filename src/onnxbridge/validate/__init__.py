"""Compare scikit-learn and ONNX Runtime outputs and give a verdict a CI pipeline can gate on."""

from onnxbridge.validate.compare import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    OutputComparison,
    ValidationReport,
    compare_predictions,
    validate_bundle,
)

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "OutputComparison",
    "ValidationReport",
    "compare_predictions",
    "validate_bundle",
]
