"""RegressorChain: random and given orders, pipelines and forests as links."""

from __future__ import annotations

import pytest
from sklearn.datasets import make_regression
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from sklearn.multioutput import RegressorChain
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

X, Y = make_regression(n_samples=120, n_features=4, n_targets=4, noise=2.0, random_state=8)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_random_order_with_pipelines(assert_converts, precision: str) -> None:
    model = RegressorChain(make_pipeline(StandardScaler(), Ridge()), order="random")
    model.set_params(random_state=3).fit(X, Y)
    got = assert_converts(model, X, precision)
    assert got["value"].shape == (len(X), 4)


def test_forest_links(assert_converts) -> None:
    model = RegressorChain(RandomForestRegressor(n_estimators=5, random_state=0)).fit(X, Y)
    assert_converts(model, X, "float")
