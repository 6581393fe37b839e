"""RadiusNeighbors*: rows without a neighbour (outlier_label, NaN), distance weights at distance
0, Minkowski metrics, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.neighbors import RadiusNeighborsClassifier, RadiusNeighborsRegressor

from onnxbridge import Predictor, convert_estimator
from onnxbridge.errors import ConversionError

X, Y = make_classification(
    n_samples=120, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=7
)
FAR = X[:15] + 6.0  # no training point within the radius
ROWS = np.vstack([X, FAR])


def _onnx(model, rows, precision="double"):
    result = convert_estimator(model, rows[:20], precision=precision)
    predictor = Predictor(result.model.SerializeToString())
    return predictor.run(predictor.prepare(rows))


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("outlier_label", ["most_frequent", 2])
def test_outlier_label_in_classes(assert_converts, outlier_label, precision: str) -> None:
    model = RadiusNeighborsClassifier(radius=1.2, outlier_label=outlier_label).fit(X, Y)
    got = assert_converts(model, ROWS, precision)
    assert (got["label"][-15:] == model.outlier_label_[0]).all()


def test_outlier_label_not_a_class(assert_converts) -> None:
    labels = np.array(["ant", "bee", "cat"])[Y]
    model = RadiusNeighborsClassifier(radius=1.2, outlier_label="dog").fit(X, labels)
    with pytest.warns(UserWarning, match="Outlier label dog is not in training classes"):
        got = assert_converts(model, ROWS, "double")
    assert (got["label"][-15:] == "dog").all()
    assert (got["probabilities"][-15:] == 0).all()


def test_default_outlier_label_gives_nan_where_scikit_learn_raises() -> None:
    model = RadiusNeighborsClassifier(radius=1.2).fit(X, Y)
    with pytest.raises(ValueError, match="No neighbors found for test samples"):
        model.predict_proba(FAR)
    label, proba = _onnx(model, ROWS)
    assert np.isnan(proba[-15:]).all()
    np.testing.assert_allclose(proba[:-15], model.predict_proba(X), atol=1e-12)
    np.testing.assert_array_equal(label[:-15], model.predict(X))


@pytest.mark.parametrize(
    ("metric", "p"), [("minkowski", 2), ("minkowski", 3), ("manhattan", 2), ("chebyshev", 2)]
)
def test_distance_weights_and_metrics(assert_converts, metric: str, p: int) -> None:
    model = RadiusNeighborsClassifier(
        radius=1.5, weights="distance", metric=metric, p=p, outlier_label="most_frequent"
    ).fit(X, Y)
    # Training rows sit at distance 0 from themselves: those points get all the weight.
    assert_converts(model, ROWS, "double")


def test_regressor_without_neighbours_predicts_nan() -> None:
    Xr, yr = make_regression(n_samples=100, n_features=3, random_state=0)
    rows = np.vstack([Xr, Xr[:5] + 10.0])
    model = RadiusNeighborsRegressor(radius=1.0).fit(Xr, yr)
    with pytest.warns(UserWarning, match="predicting NaN"):
        expected = model.predict(rows)
    (value,) = _onnx(model, rows)
    assert np.isnan(value[-5:]).all()
    np.testing.assert_allclose(value.ravel(), expected, atol=1e-9, equal_nan=True)


def test_unsupported_settings_are_refused() -> None:
    cosine = RadiusNeighborsClassifier(radius=0.5, metric="cosine").fit(X, Y)
    with pytest.raises(ConversionError, match=r"metric='cosine'.*use metric in \('euclidean'"):
        convert_estimator(cosine, X[:5])
    two = RadiusNeighborsClassifier(radius=2.0).fit(X, np.column_stack([Y, Y]))
    # Refused before any converter runs, like every multi-output classifier.
    with pytest.raises(ConversionError, match="RadiusNeighborsClassifier predicts several targets"):
        convert_estimator(two, X[:5])
