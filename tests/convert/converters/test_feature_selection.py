"""SequentialFeatureSelector, alone and as a pipeline step."""

from __future__ import annotations

import pytest
from sklearn.datasets import make_regression
from sklearn.feature_selection import SequentialFeatureSelector
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

X, Y = make_regression(n_samples=100, n_features=7, n_informative=3, random_state=5)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_backward_selection_inside_a_pipeline(assert_converts, precision: str) -> None:
    selector = SequentialFeatureSelector(
        LinearRegression(), direction="backward", n_features_to_select=4
    )
    model = make_pipeline(StandardScaler(), selector, LinearRegression()).fit(X, Y)
    assert_converts(model, X, precision)


def test_selected_columns_come_out_in_order(assert_converts) -> None:
    model = SequentialFeatureSelector(LinearRegression(), n_features_to_select="auto", tol=1.0).fit(
        X, Y
    )
    got = assert_converts(model, X, "double")
    assert got["transformed"].shape == (len(X), int(model.support_.sum()))
