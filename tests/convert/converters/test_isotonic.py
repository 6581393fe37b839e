"""IsotonicRegression: clipping, decreasing fits, a single threshold, and the refused 'raise'."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

RNG = np.random.RandomState(3)
X = RNG.uniform(0, 10, size=(50, 1))
Y = -np.log1p(X[:, 0]) + RNG.normal(scale=0.1, size=50)
X_EVAL = np.vstack([X, [[-1.0], [11.0]]])


@pytest.mark.parametrize("precision", ["float", "double"])
def test_clip_and_decreasing(assert_converts, precision: str) -> None:
    model = IsotonicRegression(out_of_bounds="clip", increasing="auto").fit(X, Y)
    assert not model.increasing_
    got = assert_converts(model, X_EVAL, precision)
    assert np.isfinite(got["value"]).all()


def test_outside_range_gives_nan(assert_converts) -> None:
    got = assert_converts(IsotonicRegression().fit(X, Y), X_EVAL)
    assert np.isnan(got["value"][-2:]).all()
    assert np.isfinite(got["value"][:-2]).all()


def test_single_threshold_is_constant(assert_converts) -> None:
    model = IsotonicRegression().fit(X, np.full(50, 2.5))
    got = assert_converts(model, X)
    np.testing.assert_array_equal(got["value"], np.full((50, 1), 2.5))


def test_raise_is_refused() -> None:
    model = IsotonicRegression(out_of_bounds="raise").fit(X, Y)
    with pytest.raises(ConversionError, match=r"out_of_bounds='raise'.*'nan' or 'clip'"):
        convert_estimator(model, X[:5])
