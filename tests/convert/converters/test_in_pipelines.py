"""The own converters inside pipelines and feature unions, next to skl2onnx's converters."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.decomposition import PCA
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.kernel_approximation import Nystroem, RBFSampler
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import FeatureUnion, make_pipeline, make_union
from sklearn.preprocessing import SplineTransformer, StandardScaler

X, Y = make_classification(
    n_samples=150, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=0
)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    "pipeline",
    [
        make_pipeline(
            StandardScaler(),
            Nystroem(n_components=30, random_state=0),
            LogisticRegression(max_iter=500),
        ),
        make_pipeline(
            make_union(RBFSampler(n_components=20, random_state=0), PCA(2)),
            LogisticRegression(max_iter=500),
        ),
    ],
    ids=["nystroem", "union"],
)
def test_classifier_pipelines(assert_converts, pipeline, precision: str) -> None:
    got = assert_converts(pipeline.fit(X, Y), X, precision)
    assert got["probabilities"].shape == (150, 3)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_spline_regression_pipeline(assert_converts, precision: str) -> None:
    model = make_pipeline(SplineTransformer(n_knots=4), Ridge(alpha=1.0)).fit(X, X[:, 0] ** 2)
    assert_converts(model, X, precision)


def test_imputer_with_missing_indicator_union(assert_converts) -> None:
    data = X.copy()
    data[np.random.RandomState(1).rand(*data.shape) < 0.1] = np.nan
    union = FeatureUnion([("fill", SimpleImputer()), ("mask", MissingIndicator(features="all"))])
    model = make_pipeline(union, LogisticRegression(max_iter=500)).fit(data, Y)
    # float: ONNX Runtime has no double kernel for skl2onnx's Imputer.
    got = assert_converts(model, data, "float")
    assert got["probabilities"].shape == (150, 3)
