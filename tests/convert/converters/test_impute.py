"""MissingIndicator: all features, a numeric marker, sparse output; text markers are refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.impute import MissingIndicator

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

RNG = np.random.RandomState(1)
X = RNG.randint(0, 4, size=(40, 4)).astype(float)
X_NAN = np.where(RNG.rand(40, 4) < 0.2, np.nan, X)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_all_features_sparse(assert_converts, precision: str) -> None:
    model = MissingIndicator(features="all", sparse=True).fit(X_NAN)
    got = assert_converts(model, X_NAN, precision)
    assert got["transformed"].shape == (40, 4)
    assert set(np.unique(got["transformed"])) == {0.0, 1.0}


def test_only_features_missing_at_fit(assert_converts) -> None:
    data = X_NAN.copy()
    data[:, 2] = 1.0
    model = MissingIndicator(error_on_new=False).fit(data)
    got = assert_converts(model, X_NAN)
    assert got["transformed"].shape == (40, 3)


def test_numeric_marker(assert_converts) -> None:
    model = MissingIndicator(missing_values=0.0).fit(X)
    got = assert_converts(model, X)
    np.testing.assert_array_equal(got["transformed"], model.transform(X).astype(float))


def test_text_marker_is_refused() -> None:
    model = MissingIndicator(features="all").fit(X_NAN)
    model.set_params(missing_values="")
    with pytest.raises(ConversionError, match=r"missing_values=''.*use missing_values=np.nan"):
        convert_estimator(model, X_NAN[:5])
