"""SplineTransformer: every extrapolation, degrees 0-4, quantile knots, no bias, missing values."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.preprocessing import SplineTransformer

RNG = np.random.RandomState(5)
X = RNG.normal(size=(70, 2)) * [2.0, 0.5]
X_WIDE = np.vstack([X, X.min(axis=0) - 3.0, X.max(axis=0) + 3.0, [[0.0, 100.0]]])


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("extrapolation", ["constant", "linear", "continue", "periodic"])
@pytest.mark.parametrize("degree", [0, 1, 2, 3, 4])
def test_extrapolations_and_degrees(
    assert_converts, extrapolation: str, degree: int, precision: str
) -> None:
    model = SplineTransformer(degree=degree, n_knots=5, extrapolation=extrapolation).fit(X)
    # scikit-learn itself fails on out-of-range rows with degree 0 and constant extrapolation.
    data = X if (degree, extrapolation) == (0, "constant") else X_WIDE
    assert_converts(model, data, precision)


def test_quantile_knots_without_bias(assert_converts) -> None:
    model = SplineTransformer(n_knots=6, knots="quantile", include_bias=False).fit(X)
    got = assert_converts(model, X_WIDE)
    assert got["transformed"].shape == (len(X_WIDE), 2 * (6 + 3 - 1 - 1))


def test_missing_values_give_zeros(assert_converts) -> None:
    model = SplineTransformer(handle_missing="zeros", sparse_output=True).fit(X)
    data = np.vstack([X, [[np.nan, 0.1]]])
    got = assert_converts(model, data)
    n_splines = 5 + 3 - 1
    np.testing.assert_array_equal(got["transformed"][-1, :n_splines], 0.0)


def test_error_extrapolation_inside_range(assert_converts) -> None:
    model = SplineTransformer(extrapolation="error").fit(X)
    assert_converts(model, X)
