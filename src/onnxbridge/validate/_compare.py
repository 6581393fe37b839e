"""Compare two runtimes' outputs, output by output: agreement, differences, a status bucket.

The comparison rule itself (tolerances, label and numeric comparison, status buckets) is
:mod:`onnxbridge.convert._agreement`, shared with the check ``convert`` runs before writing a
model; this module adds the verdict names and is what validate imports.
"""

from __future__ import annotations

from onnxbridge.convert._agreement import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    DEFAULT_TOLERANCES,
    STATUS_BUCKETS,
    OutputComparison,
    Tolerance,
    _labels,  # noqa: F401  (the comparison's pieces, as tests read them)
    _numeric,  # noqa: F401
    compare_output,
    role_tolerance,
    status_bucket,
)

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "DEFAULT_TOLERANCES",
    "DIVERGENT",
    "EQUIVALENT",
    "STATUS_BUCKETS",
    "OutputComparison",
    "Tolerance",
    "compare_output",
    "role_tolerance",
    "status_bucket",
]

EQUIVALENT = "EQUIVALENT"
DIVERGENT = "DIVERGENT"
