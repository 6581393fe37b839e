"""Compare two runtimes' outputs, output by output: agreement, differences, a status bucket.

Per output: label agreement; for probabilities, scores, values and transformed columns the max
and mean absolute difference and the max relative difference. A value agrees when
``|b - a| <= atol + rtol * |a|`` (numpy's ``isclose`` rule, with ``a`` the reference side:
scikit-learn when it is one of the two); labels must be identical. The defaults
(``atol = rtol = 1e-5`` for every numeric role) allow for float32 arithmetic: absolute for values
up to about 1, relative beyond (a regression target in the hundreds is compared to about 7
float32 digits). Each role's tolerance can be set on its own (:class:`Tolerance`).

Status buckets (mlprodict's): ``OK`` when the output passes, else the smallest of ``e<1e-4``,
``e<1e-3``, ``e<1e-2``, ``e<0.1`` that holds the max absolute difference, else ``big-diff``
(also for any differing label).

The rule lives here, below both ``convert`` (which checks a conversion before writing it,
:mod:`onnxbridge.convert._check`) and ``validate`` (which re-exports it from
:mod:`onnxbridge.validate._compare`), so both compare the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnxbridge._meta import role_parts
from onnxbridge.convert._roles import same_labels
from onnxbridge.errors import DataError

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "DEFAULT_TOLERANCES",
    "STATUS_BUCKETS",
    "OutputComparison",
    "Tolerance",
    "compare_output",
    "role_tolerance",
    "status_bucket",
]

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5
STATUS_BUCKETS = ("OK", "e<1e-4", "e<1e-3", "e<1e-2", "e<0.1", "big-diff")
_BUCKET_LIMITS = ((1e-4, "e<1e-4"), (1e-3, "e<1e-3"), (1e-2, "e<1e-2"), (0.1, "e<0.1"))


@dataclass(frozen=True)
class Tolerance:
    """How close a numeric output must be: ``|b - a| <= atol + rtol * |a|``.

    Raises:
        DataError: a negative, infinite or NaN tolerance.
    """

    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL

    def __post_init__(self) -> None:
        # Name only the values at fault: the other one may be a default nobody typed.
        bad = [
            name
            for name, value in (("atol", self.atol), ("rtol", self.rtol))
            if not (math.isfinite(value) and value >= 0)
        ]
        if bad:
            got = ", ".join(f"{name}={getattr(self, name)}" for name in bad)
            example = " and ".join(f"{name}=1e-5" for name in bad)
            raise DataError(
                f"tolerances must be finite numbers >= 0, got {got}; e.g. {example}",
                arguments=tuple(bad),
            )


# Labels are always compared exactly; these are the numeric roles' defaults.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "probabilities": Tolerance(1e-5, 1e-5),
    "scores": Tolerance(1e-5, 1e-5),
    "value": Tolerance(1e-5, 1e-5),
    "transformed": Tolerance(1e-5, 1e-5),
}


@dataclass
class OutputComparison:
    """How one output compares between two runtimes on one probe set.

    Attributes:
        name: the output role: ``label``, ``probabilities``, ``scores``, ``value`` or
            ``transformed``.
        kind: ``"labels"`` (exact match), ``"numeric"`` (within tolerance) or ``"exact"`` (text
            in a numeric role, e.g. an imputer's string output: exact match).
        n_rows: rows compared.
        n_mismatched: rows where the output disagrees (any column out of tolerance).
        agreement: fraction of rows that agree.
        ok: whether the output passes.
        max_abs_diff / mean_abs_diff: numeric outputs only.
        max_rel_diff: numeric outputs only, over values where the reference's is non-zero.
        worst_row: position (in the probe set) of the largest difference or first differing label.
        status: the bucket (:data:`STATUS_BUCKETS`).
        worst_rows: up to a few mismatched rows, worst first:
            ``{"row", "inputs": {column: value}, "a", "b", "abs_diff"}``.
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
    status: str = "OK"
    worst_rows: list[dict[str, Any]] = field(default_factory=list)


def status_bucket(ok: bool, kind: str, max_abs_diff: float | None) -> str:
    """The status bucket of an output (see the module docstring)."""
    if ok:
        return "OK"
    if kind == "labels" or max_abs_diff is None or not math.isfinite(max_abs_diff):
        return "big-diff"
    for limit, name in _BUCKET_LIMITS:
        if max_abs_diff < limit:
            return name
    return "big-diff"


def _labels(
    name: str, expected: np.ndarray, actual: np.ndarray
) -> tuple[OutputComparison, np.ndarray]:
    expected = np.asarray(expected).reshape(-1)
    actual = np.asarray(actual).reshape(-1)
    if expected.shape != actual.shape:
        n = len(expected)
        return (
            OutputComparison(name, "labels", n, n, 0.0, False, status="big-diff"),
            np.ones(n),
        )
    same = same_labels(expected, actual)
    n = len(same)
    bad = int((~same).sum())
    worst = int(np.argmin(same)) if bad else None
    comparison = OutputComparison(
        name=name,
        kind="labels",
        n_rows=n,
        n_mismatched=bad,
        agreement=float(same.mean()) if n else 1.0,
        ok=bad == 0,
        worst_row=worst,
        status=status_bucket(bad == 0, "labels", None),
    )
    return comparison, (~same).astype(np.float64)


def _numeric(
    name: str, expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float
) -> tuple[OutputComparison, np.ndarray]:
    expected = np.asarray(expected, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if expected.ndim == 1:
        expected = expected.reshape(-1, 1)
    if actual.ndim == 1:
        actual = actual.reshape(-1, 1)
    if expected.shape != actual.shape:
        n = expected.shape[0]
        return (
            OutputComparison(name, "numeric", n, n, 0.0, False, status="big-diff"),
            np.full(n, np.inf),
        )
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(actual - expected)
    # NaN in both places counts as agreement; NaN in one only as a mismatch. Equal infinities
    # agree too (inf - inf is NaN).
    same = (np.isnan(actual) & np.isnan(expected)) | (actual == expected)
    diff = np.where(same, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    magnitude = np.abs(np.nan_to_num(expected, posinf=0.0, neginf=0.0))
    close = diff <= atol + rtol * magnitude
    row_ok = close.all(axis=1)
    n = len(row_ok)
    # Relative differences only where the reference value is non-zero (else undefined).
    rel = np.divide(diff, magnitude, out=np.zeros_like(diff), where=magnitude > 0)
    bad = int((~row_ok).sum())
    max_abs = float(diff.max()) if diff.size else 0.0
    comparison = OutputComparison(
        name=name,
        kind="numeric",
        n_rows=n,
        n_mismatched=bad,
        agreement=float(row_ok.mean()) if n else 1.0,
        ok=bad == 0,
        max_abs_diff=max_abs,
        mean_abs_diff=float(np.mean(np.where(np.isinf(diff), np.nan, diff)))
        if diff.size and np.isfinite(diff).any()
        else (float("inf") if diff.size else 0.0),
        max_rel_diff=float(rel.max()) if rel.size else 0.0,
        worst_row=int(np.unravel_index(np.argmax(diff), diff.shape)[0]) if diff.size else None,
        status=status_bucket(bad == 0, "numeric", max_abs),
    )
    row_score = np.where(row_ok, 0.0, diff.max(axis=1) if diff.size else 0.0)
    return comparison, row_score


def _is_numeric(values: Any) -> bool:
    return np.asarray(values).dtype.kind in "iufb"


def _exact_rows(
    role: str, expected: np.ndarray, actual: np.ndarray
) -> tuple[OutputComparison, np.ndarray]:
    """Row by row, every value identical (by :func:`same_labels`' rule)."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.ndim < 2 or actual.ndim < 2:
        comparison, score = _labels(role, expected, actual)
        comparison.kind = "exact"
        return comparison, score
    n = expected.shape[0]
    if expected.shape != actual.shape:
        return (
            OutputComparison(role, "exact", n, n, 0.0, False, status="big-diff"),
            np.ones(n),
        )
    row_ok = np.asarray(same_labels(expected, actual).reshape(n, -1).all(axis=1))
    bad = int((~row_ok).sum())
    comparison = OutputComparison(
        name=role,
        kind="exact",
        n_rows=n,
        n_mismatched=bad,
        agreement=float(row_ok.mean()) if n else 1.0,
        ok=bad == 0,
        worst_row=int(np.argmin(row_ok)) if bad else None,
        status=status_bucket(bad == 0, "labels", None),
    )
    return comparison, (~row_ok).astype(np.float64)


def role_tolerance(tolerances: Mapping[str, Tolerance] | None, role: str) -> Tolerance | None:
    """The tolerance of an output role from a role → tolerance table: a multi-output
    classifier's ``probabilities_<t>`` takes the ``probabilities`` entry."""
    if not tolerances:
        return None
    return tolerances.get(role) or tolerances.get(role_parts(role)[0])


def compare_output(
    role: str, a: np.ndarray, b: np.ndarray, tolerance: Tolerance | None = None
) -> tuple[OutputComparison, np.ndarray]:
    """Compare one output role of runtime ``a`` (the reference) with runtime ``b``.

    Args:
        role: the output role (``label`` is compared exactly).
        a: ``[N]`` or ``[N, C]`` the reference side's values.
        b: the other side's, same layout.
        tolerance: for numeric roles; the role's default when None.

    Returns:
        The comparison, and ``[N]`` per-row badness (0 for rows that agree; larger is worse).
    """
    base, _ = role_parts(role)  # label_<t>: one target of a multi-output classifier
    if base == "label":
        return _labels(role, a, b)
    if not (_is_numeric(a) and _is_numeric(b)):
        # Text in a numeric role (an imputer or encoder's string output): compared exactly.
        return _exact_rows(role, a, b)
    tolerance = tolerance or DEFAULT_TOLERANCES.get(base, Tolerance())
    return _numeric(role, a, b, tolerance.atol, tolerance.rtol)
