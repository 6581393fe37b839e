"""SimpleImputer and KNNImputer: the add_indicator columns, features without values at fit,
numeric markers, before every scaler and inside a ColumnTransformer, in float32 and float64;
KNNImputer's weights and rows without a donor."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import KNNImputer, SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler

from onnxbridge import Predictor, convert_estimator, validate_model
from onnxbridge.errors import ConversionError

RNG = np.random.RandomState(1)
N = 400
FRAME = pd.DataFrame(
    {
        "a": RNG.normal(size=N),
        "b": RNG.normal(50, 10, N),
        "c": RNG.normal(3, 2, N),
        "e": RNG.choice(["x", "y"], N).astype(object),
    }
)
FRAME.loc[RNG.rand(N) < 0.1, "b"] = np.nan
FRAME.loc[RNG.rand(N) < 0.2, "c"] = np.nan
TARGET = FRAME.a + FRAME.b.fillna(50) / 10 + FRAME.c.fillna(0)
NUMERIC = ["a", "b", "c"]
# Rows the model never saw with a value missing in every column, "a" included (no missing value
# at fit: imputed, but it has no indicator column), and rows with nothing missing.
NEW_ROWS = pd.DataFrame(
    {
        "a": [np.nan, 0.5, np.nan, 1.0],
        "b": [np.nan, np.nan, 40.0, 55.0],
        "c": [np.nan, 1.0, np.nan, 2.0],
        "e": ["x", "y", "x", "y"],
    }
)
SCALERS = [MinMaxScaler, StandardScaler, MaxAbsScaler, RobustScaler]
IMPUTERS = [SimpleImputer, KNNImputer]
TOLERANCE = {"float": 1e-4, "double": 1e-9}


def _predict(model, frame: pd.DataFrame, precision: str) -> np.ndarray:
    result = convert_estimator(model, frame.head(60), precision=precision)
    assert result.precision == precision
    predictor = Predictor(result.model.SerializeToString())
    return predictor.predict(frame).to_frame().iloc[:, 0].to_numpy()


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("in_column_transformer", [True, False], ids=["columns", "pipeline"])
@pytest.mark.parametrize("scaler", SCALERS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("imputer", IMPUTERS, ids=lambda i: i.__name__)
def test_indicator_before_scaler(
    imputer, scaler, in_column_transformer: bool, precision: str
) -> None:
    branch = make_pipeline(imputer(add_indicator=True), scaler())
    if in_column_transformer:
        branch = ColumnTransformer([("m", branch, NUMERIC)], remainder="drop")
        frame = FRAME
    else:
        frame = FRAME[NUMERIC]
    model = make_pipeline(branch, LinearRegression()).fit(frame, TARGET)
    # Two indicator columns ("b", "c") follow the three imputed ones.
    assert model[0].transform(frame.head(3)).shape == (3, 5)
    rows = pd.concat([frame, NEW_ROWS[frame.columns]], ignore_index=True)
    got = _predict(model, rows, precision)
    tol = TOLERANCE[precision]
    np.testing.assert_allclose(got, model.predict(rows), rtol=tol, atol=tol)


def test_indicator_pipeline_validates_equivalent(tmp_path) -> None:
    branch = make_pipeline(SimpleImputer(add_indicator=True), MinMaxScaler())
    transformer = ColumnTransformer([("m", branch, ["a", "b"])], remainder="drop")
    model = make_pipeline(transformer, LinearRegression()).fit(FRAME, TARGET)
    path = convert_estimator(model, FRAME.head(60)).save(tmp_path / "model.onnx")
    report = validate_model(path, model, FRAME.tail(100), runtimes=("sklearn", "onnxruntime"))
    assert report.verdict == "EQUIVALENT"


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("keep_empty_features", [False, True])
@pytest.mark.parametrize("imputer", IMPUTERS, ids=lambda i: i.__name__)
def test_feature_without_values_at_fit(imputer, keep_empty_features: bool, precision: str) -> None:
    """scikit-learn drops a feature that had no value at fit unless keep_empty_features; its
    indicator column stays."""
    frame = FRAME[NUMERIC].assign(empty=np.nan)
    imputer = imputer(add_indicator=True, keep_empty_features=keep_empty_features)
    model = make_pipeline(imputer, StandardScaler(), LinearRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Skipping features without any observed"
        model.fit(frame, TARGET)
    rows = pd.concat([frame, NEW_ROWS[NUMERIC].assign(empty=[np.nan, 1.0, np.nan, 2.0])])
    got = _predict(model, rows, precision)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        expected = model.predict(rows)
    tol = TOLERANCE[precision]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("strategy", ["mean", "median", "most_frequent", "constant"])
def test_numeric_marker_and_strategies(assert_converts, strategy: str) -> None:
    rng = np.random.RandomState(2)
    values = rng.randint(0, 5, size=(80, 4)).astype(float)
    values[rng.rand(80, 4) < 0.15] = -1.0
    values[:, 1] = np.abs(values[:, 1])  # no marker at fit: imputed, no indicator column
    imputer = SimpleImputer(missing_values=-1.0, strategy=strategy, fill_value=7.0)
    model = imputer.set_params(add_indicator=True).fit(values)
    got = assert_converts(model, values)
    assert got["transformed"].shape == (80, 7)


def test_indicator_on_text_columns_is_refused() -> None:
    frame = pd.DataFrame({"colour": ["red", None, "blue", "red"] * 5})
    model = SimpleImputer(strategy="most_frequent", add_indicator=True).fit(frame)
    with pytest.raises(ConversionError, match=r"add_indicator=True\) on text columns"):
        convert_estimator(model, frame)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("n_neighbors", [1, 5, 200])
def test_knn_weights_and_rows_without_donor(
    assert_converts, weights: str, n_neighbors: int, precision: str
) -> None:
    """More neighbours asked than training rows have a feature, a row sharing no feature with
    any training row (the feature's mean), a row equal to a training row (distance 0)."""
    rng = np.random.RandomState(3)
    values = rng.normal(size=(120, 4))
    values[rng.rand(120, 4) < [0.1, 0.5, 0.2, 0.0]] = np.nan
    model = KNNImputer(n_neighbors=n_neighbors, weights=weights).fit(values)
    rows = np.vstack([values, [[np.nan] * 4], np.where([1, 0, 1, 1], values[3], np.nan)])
    got = assert_converts(model, rows, precision)
    assert not np.isnan(got["transformed"]).any()


def test_knn_numeric_marker(assert_converts) -> None:
    # Continuous values: no two training rows equally far (see the tie note in docs/convert.md).
    rng = np.random.RandomState(4)
    values = rng.normal(size=(80, 3))
    values[rng.rand(80, 3) < 0.2] = -1.0
    model = KNNImputer(missing_values=-1.0, n_neighbors=3, add_indicator=True).fit(values)
    got = assert_converts(model, values)
    assert got["transformed"].shape == (80, 6)


def test_knn_callable_metric_is_refused() -> None:
    values = np.random.RandomState(5).normal(size=(20, 2))
    model = KNNImputer(metric=lambda a, b, **_: float(np.nansum(np.abs(a - b)))).fit(values)
    with pytest.raises(ConversionError, match=r"KNNImputer\(metric=<function.*use metric="):
        convert_estimator(model, values)


def test_knn_float_features_far_from_zero(assert_converts) -> None:
    """float32 distances keep the neighbours' order when the features sit far from zero."""
    rng = np.random.RandomState(0)
    values = rng.normal(100.0, 1.0, size=(300, 5))
    values[rng.rand(300, 5) < 0.2] = np.nan
    model = KNNImputer(n_neighbors=5).fit(values[:200])
    assert_converts(model, values, "float")
