"""Which estimators convert faithfully: train, convert, run and compare every estimator.

``onnxbridge coverage`` (and :func:`run_coverage`) takes every estimator of scikit-learn's
``all_estimators()`` plus the outlier detectors and the boosters that are installed, trains each on
small data that suits it, converts it with onnxbridge's defaults, runs it in ONNX Runtime and
compares with scikit-learn. ``docs/coverage.md`` is generated from it.
"""

from onnxbridge.coverage._cases import GROUPS, CoverageCase, all_cases, core_estimator_names
from onnxbridge.coverage._datasets import DATA_KINDS, CoverageData, make_data
from onnxbridge.coverage._harness import DEFAULT_TIMEOUT, run_case, run_coverage, select_cases
from onnxbridge.coverage._report import (
    DIVERGENT,
    EQUIVALENT,
    FAILED,
    MARKDOWN_INTRO,
    STAGES,
    CoverageReport,
    CoverageResult,
    RoleComparison,
    parse_markdown_verdicts,
)

__all__ = [
    "DATA_KINDS",
    "DEFAULT_TIMEOUT",
    "DIVERGENT",
    "EQUIVALENT",
    "FAILED",
    "GROUPS",
    "MARKDOWN_INTRO",
    "STAGES",
    "CoverageCase",
    "CoverageData",
    "CoverageReport",
    "CoverageResult",
    "RoleComparison",
    "all_cases",
    "core_estimator_names",
    "make_data",
    "parse_markdown_verdicts",
    "run_case",
    "run_coverage",
    "select_cases",
]
