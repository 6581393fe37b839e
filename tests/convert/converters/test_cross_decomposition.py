"""PLSCanonical / CCA with one target predict [N] in scikit-learn and [N, 1] in the graph."""

from __future__ import annotations

import pytest
from sklearn.cross_decomposition import CCA, PLSCanonical
from sklearn.datasets import make_regression

X, Y = make_regression(n_samples=60, n_features=4, noise=1.0, random_state=2)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("estimator", [PLSCanonical, CCA])
def test_single_target(assert_converts, estimator, precision: str) -> None:
    model = estimator(n_components=1, scale=False).fit(X, Y / 100)
    assert model.predict(X).shape == (60,)
    got = assert_converts(model, X, precision)
    assert got["value"].shape == (60, 1)
