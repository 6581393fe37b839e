"""Compare a scikit-learn model with its ONNX Runtime copy and give a verdict.

Per output: label agreement; for probabilities and regression values the max and mean absolute
difference and the max relative difference. A value agrees when
``|onnx - sklearn| <= atol + rtol * |sklearn|`` (numpy's ``isclose`` rule); the defaults
(``atol = rtol = 1e-5``) allow for float32 arithmetic: absolute for values up to about 1, relative
beyond (a regression target in the hundreds is compared to about 7 float32 digits). Labels must be
identical. The verdict is EQUIVALENT when every output agrees on every row, else DIVERGENT.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.bundle import ONNX_NAME, Bundle, library_versions, now_iso
from onnxbridge.runtime import Predictor

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "OutputComparison",
    "ValidationReport",
    "compare_predictions",
    "validate_bundle",
]

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5
EQUIVALENT = "EQUIVALENT"
DIVERGENT = "DIVERGENT"


@dataclass
class OutputComparison:
    """How one output of the ONNX model compares with scikit-learn's.

    Attributes:
        name: ``label``, ``probabilities``, ``scores`` (classifiers without ``predict_proba``,
            against ``decision_function``) or ``value``.
        kind: ``"labels"`` (exact match) or ``"numeric"`` (within tolerance).
        n_rows: rows compared.
        n_mismatched: rows where the output disagrees (any column out of tolerance).
        agreement: fraction of rows that agree.
        max_abs_diff / mean_abs_diff: numeric outputs only.
        max_rel_diff: numeric outputs only, over values where scikit-learn's is non-zero.
        worst_row: index (position in the compared rows) of the largest difference.
        ok: whether the output passes.
    """

    name: str
    kind: str
    n_rows: int
    n_mismatched: int
    agreement: float
    ok: bool
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    max_rel_diff: float | None = None
    worst_row: int | None = None


@dataclass
class ValidationReport:
    """The verdict of a comparison, with its per-output detail."""

    verdict: str
    outputs: list[OutputComparison]
    atol: float
    rtol: float
    n_rows: int
    rows: str = "holdout"
    model: str | None = None
    created_at: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=library_versions)

    @property
    def equivalent(self) -> bool:
        """True when the verdict is EQUIVALENT."""
        return self.verdict == EQUIVALENT

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``reports/validation.json``)."""
        return asdict(self)


def _labels(name: str, expected: np.ndarray, actual: np.ndarray) -> OutputComparison:
    expected = np.asarray(expected).reshape(-1)
    actual = np.asarray(actual).reshape(-1)
    if expected.dtype.kind in "iub" and actual.dtype.kind in "iub":
        same = expected.astype(np.int64) == actual.astype(np.int64)
    elif expected.dtype.kind == "f" or actual.dtype.kind == "f":
        same = expected.astype(np.float64) == actual.astype(np.float64)
    else:
        same = expected.astype(str) == actual.astype(str)
    n = len(same)
    bad = int((~same).sum())
    worst = int(np.argmin(same)) if bad else None
    return OutputComparison(
        name=name,
        kind="labels",
        n_rows=n,
        n_mismatched=bad,
        agreement=float(same.mean()) if n else 1.0,
        ok=bad == 0,
        worst_row=worst,
    )


def _numeric(
    name: str, expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float
) -> OutputComparison:
    expected = np.asarray(expected, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if expected.ndim == 1:
        expected = expected.reshape(-1, 1)
    if actual.ndim == 1:
        actual = actual.reshape(-1, 1)
    if expected.shape != actual.shape:
        n = expected.shape[0]
        return OutputComparison(
            name=name, kind="numeric", n_rows=n, n_mismatched=n, agreement=0.0, ok=False
        )
    diff = np.abs(actual - expected)
    # NaN in both places counts as agreement; NaN in one only as a mismatch.
    both_nan = np.isnan(actual) & np.isnan(expected)
    diff = np.where(both_nan, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    close = diff <= atol + rtol * np.abs(np.nan_to_num(expected))
    row_ok = close.all(axis=1)
    n = len(row_ok)
    # Relative differences only where scikit-learn's value is non-zero (else it is undefined).
    magnitude = np.abs(np.nan_to_num(expected))
    rel = np.divide(diff, magnitude, out=np.zeros_like(diff), where=magnitude > 0)
    bad = int((~row_ok).sum())
    return OutputComparison(
        name=name,
        kind="numeric",
        n_rows=n,
        n_mismatched=bad,
        agreement=float(row_ok.mean()) if n else 1.0,
        ok=bad == 0,
        max_abs_diff=float(diff.max()) if diff.size else 0.0,
        mean_abs_diff=float(diff.mean()) if diff.size else 0.0,
        max_rel_diff=float(rel.max()) if rel.size else 0.0,
        worst_row=int(np.unravel_index(np.argmax(diff), diff.shape)[0]) if diff.size else None,
    )


def _expected_scores(decision: np.ndarray, n_columns: int) -> np.ndarray:
    """scikit-learn's ``decision_function`` laid out as the ONNX score columns.

    A binary model's ``decision_function`` is ``[N]`` (the positive class's score); converters
    write it as ``[N, 1]`` or as ``[N, 2] = [-d, d]``.
    """
    decision = np.asarray(decision, dtype=np.float64)
    if decision.ndim == 1:
        decision = decision.reshape(-1, 1)
        if n_columns == 2:
            decision = np.hstack([-decision, decision])
    return decision


def compare_predictions(
    estimator: Any,
    predictor: Predictor,
    X: pd.DataFrame,
    *,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    rows: str = "holdout",
) -> ValidationReport:
    """Run ``estimator`` (scikit-learn) and ``predictor`` (ONNX Runtime) on ``X`` and compare.

    Args:
        estimator: the fitted source model.
        predictor: the ONNX model.
        X: ``[N, F]`` rows to compare on, as the source model takes them.
        atol: absolute tolerance for probabilities and values.
        rtol: relative tolerance for probabilities and values.
        rows: a name for the rows compared (shown in the report).
    """
    result = predictor.predict(X)
    comparisons: list[OutputComparison] = []
    if result.labels is not None:
        comparisons.append(_labels("label", estimator.predict(X), result.labels))
        if result.probabilities is not None and hasattr(estimator, "predict_proba"):
            comparisons.append(
                _numeric(
                    "probabilities", estimator.predict_proba(X), result.probabilities, atol, rtol
                )
            )
        elif result.scores is not None and hasattr(estimator, "decision_function"):
            expected = _expected_scores(estimator.decision_function(X), result.scores.shape[1])
            comparisons.append(_numeric("scores", expected, result.scores, atol, rtol))
    else:
        comparisons.append(_numeric("value", estimator.predict(X), result.values, atol, rtol))
    verdict = EQUIVALENT if all(c.ok for c in comparisons) else DIVERGENT
    return ValidationReport(
        verdict=verdict,
        outputs=comparisons,
        atol=atol,
        rtol=rtol,
        n_rows=len(X),
        rows=rows,
        model=str(predictor.path) if predictor.path else None,
    )


def validate_bundle(
    bundle: str | Path | Bundle,
    *,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
    write_report: bool = True,
) -> ValidationReport:
    """Compare a bundle's ``model.skops`` with its ``model.onnx`` on the held-out rows.

    Writes ``reports/validation.json`` and records the verdict in ``card.json``.

    Raises:
        BundleError: missing ``model.onnx`` (run convert first) or damaged files.
        DataError: negative tolerances.
    """
    from onnxbridge.errors import DataError

    if not (math.isfinite(atol) and math.isfinite(rtol) and atol >= 0 and rtol >= 0):
        raise DataError(
            f"tolerances must be finite numbers >= 0, got atol={atol}, rtol={rtol}; "
            "e.g. --atol 1e-5 --rtol 1e-5"
        )
    if not isinstance(bundle, Bundle):
        bundle = Bundle.open(bundle)
    bundle.check_file(ONNX_NAME)
    estimator = bundle.load_estimator()
    X, _ = bundle.load_holdout()
    predictor = Predictor(bundle.onnx_path)
    report = compare_predictions(estimator, predictor, X, atol=atol, rtol=rtol)
    if write_report:
        bundle.write_report("validation.json", report.to_dict())
        bundle.card["validation"] = {
            "verdict": report.verdict,
            "atol": atol,
            "rtol": rtol,
            "rows": report.n_rows,
            "report": "reports/validation.json",
            "validated_at": report.created_at,
        }
        bundle.save_card()
    return report
