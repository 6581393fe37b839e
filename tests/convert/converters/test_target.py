"""TransformedTargetRegressor: every supported target transformer, multi-target, pipelines as the
regressor, and the transformers that are refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.compose import TransformedTargetRegressor
from sklearn.datasets import make_regression
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    MaxAbsScaler,
    MinMaxScaler,
    PowerTransformer,
    QuantileTransformer,
    RobustScaler,
    StandardScaler,
)

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, Y = make_regression(n_samples=150, n_features=4, noise=3.0, random_state=2)
POSITIVE = Y - Y.min() + 1.0

TRANSFORMERS = {
    "standard": StandardScaler(),
    "minmax": MinMaxScaler(feature_range=(-1, 2)),
    "maxabs": MaxAbsScaler(),
    "robust": RobustScaler(),
    "yeo-johnson": PowerTransformer(),
    "box-cox": PowerTransformer(method="box-cox", standardize=False),
}


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("name", list(TRANSFORMERS))
def test_target_transformers(assert_converts, name: str, precision: str) -> None:
    model = TransformedTargetRegressor(
        regressor=make_pipeline(StandardScaler(), Ridge()), transformer=TRANSFORMERS[name]
    ).fit(X, POSITIVE)
    got = assert_converts(model, X, precision)
    assert got["value"].shape[0] == len(X)


@pytest.mark.parametrize(
    ("func", "inverse"),
    [(np.log, np.exp), (np.sqrt, np.square), (None, None), (np.negative, np.negative)],
)
def test_functions(assert_converts, func, inverse) -> None:
    model = TransformedTargetRegressor(
        regressor=LinearRegression(), func=func, inverse_func=inverse, check_inverse=False
    ).fit(X, POSITIVE)
    assert_converts(model, X, "double")


@pytest.mark.parametrize("transformer", [None, MaxAbsScaler()], ids=["identity", "maxabs"])
def test_two_targets_with_a_linear_model(assert_converts, transformer) -> None:
    targets = np.column_stack([POSITIVE, 3 * POSITIVE - 1])
    model = TransformedTargetRegressor(regressor=Ridge(), transformer=transformer)
    got = assert_converts(model.fit(X, targets), X, "double")
    assert got["value"].shape == (len(X), 2)


def test_two_targets_with_a_forest(assert_converts) -> None:
    targets = np.column_stack([POSITIVE, 2 * POSITIVE + 5])
    model = TransformedTargetRegressor(
        regressor=RandomForestRegressor(n_estimators=5, random_state=0),
        transformer=StandardScaler(),
    ).fit(X, targets)
    got = assert_converts(model, X, "float")
    assert got["value"].shape == (len(X), 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transformer": QuantileTransformer(n_quantiles=50)}, "transformer=QuantileTransformer"),
        ({"transformer": MinMaxScaler(clip=True)}, r"MinMaxScaler\(clip=True\)"),
        (
            {"func": np.log, "inverse_func": np.exp2, "check_inverse": False},
            "inverse_func='exp2'",
        ),
    ],
)
def test_unsupported_transformers_are_refused(kwargs, message: str) -> None:
    model = TransformedTargetRegressor(regressor=LinearRegression(), **kwargs).fit(X, POSITIVE)
    with pytest.raises(ConversionError, match=message) as info:
        convert_estimator(model, X[:5])
    assert "use inverse_func in (None, np.exp" in str(info.value)
