"""LGBMClassifier and LGBMRegressor (registered when lightgbm is installed).

Read from ``booster_.model_to_string()`` (no onnxmltools): ``[N, F] -> label [N], probabilities
[N, C]`` (binary: logistic with LightGBM's ``sigmoid`` scale, multiclass: softmax, multiclassova:
a logistic per class) / ``value [N, 1]`` (identity; exp for poisson / gamma / tweedie; logistic
for cross_entropy). LightGBM compares ``x <= t`` in float64. onnxmltools' converter rounds the
thresholds to nearest float32, which flips decisions on large-magnitude features; here float
graphs round them down (exact on float32 data) and double graphs keep them as they are. NaN goes
where each node learned (``default_left``), or where 0 goes when the model saw no missing values.

Native categorical splits convert exactly: a pandas ``category`` column arrives as text and is
coded by the categories the model stored (``pandas_categorical``); a category the model never
saw, and a missing value, go right, as in LightGBM. An integer column fitted as
``categorical_feature`` is its own code, a fractional value cut toward zero as LightGBM does
(negative codes, codes the model never split on and NaN go right).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from lightgbm import LGBMClassifier, LGBMRegressor

from onnxbridge.convert._converters._tree_heads import (
    CLASSIFIER_OPTIONS,
    classifier_shape,
    example_target,
    regression_link,
    regressor_shape,
    text_features,
    write_classifier,
    write_regressor,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.convert._tree_ensemble import TreeEnsembleSpec, from_lightgbm
from onnxbridge.errors import ConversionError

_IDENTITY = ("regression", "regression_l1", "huber", "fair", "quantile", "mape")
_EXP = ("poisson", "gamma", "tweedie")


def _objective(header: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The objective's name and its ``key:value`` parameters (``"binary sigmoid:1"``)."""
    words = str(header.get("objective", "")).split()
    if not words:
        raise ConversionError(
            "the LightGBM model has no objective (a custom objective function?); onnxbridge "
            "converts models fitted with a built-in objective"
        )
    params = dict(w.split(":", 1) for w in words[1:] if ":" in w)
    return words[0], params


def _spec(operator: Any) -> tuple[TreeEnsembleSpec, dict[str, Any]]:
    """The model's spec, its pandas category columns read from the inputs that are text."""
    return from_lightgbm(operator.raw_operator, string_features=text_features(operator))


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    spec, header = _spec(operator)
    objective, params = _objective(header)
    scale = float(params.get("sigmoid", 1.0))
    if objective in ("binary", "cross_entropy"):
        write_classifier(scope, operator, container, spec, transform="logistic", scale=scale)
    elif objective == "multiclass":
        write_classifier(scope, operator, container, spec, transform="softmax")
    elif objective == "multiclassova":
        write_classifier(scope, operator, container, spec, transform="ova", scale=scale)
    else:
        raise ConversionError(
            f"LGBMClassifier(objective={objective!r}) cannot be converted; use binary, "
            "multiclass or multiclassova"
        )


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    spec, header = _spec(operator)
    objective, _ = _objective(header)
    link = regression_link(
        "LGBMRegressor", objective, identity=_IDENTITY, exp=_EXP, logistic="cross_entropy"
    )
    write_regressor(scope, operator, container, spec, link=link)


def _data(classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    # float32-representable values: float precision is then exact too.
    X = rng.normal(size=(300, 5)).astype(np.float32).astype(np.float64)
    X[rng.rand(*X.shape) < 0.1] = np.nan
    score = np.nan_to_num(X[:, 0]) + 0.6 * np.nan_to_num(X[:, 2]) - np.isnan(X[:, 1])
    return X, example_target(score, classes, rng)


_PARAMS: dict[str, Any] = {
    "n_estimators": 15,
    "num_leaves": 8,
    "min_child_samples": 5,
    "random_state": 0,
}


def _classifier_example() -> tuple[Any, Any]:
    X, y = _data(3)
    return LGBMClassifier(**_PARAMS, n_jobs=1, verbose=-1).fit(X, y), X


def _regressor_example() -> tuple[Any, Any]:
    X, y = _data(None)
    return LGBMRegressor(**_PARAMS, n_jobs=1, verbose=-1).fit(X, y), X


register_converter(
    ConverterSpec(
        LGBMClassifier,
        classifier_shape,
        _classifier_convert,
        _classifier_example,
        options=CLASSIFIER_OPTIONS,
        family=__name__,
    )
)
register_converter(
    ConverterSpec(
        LGBMRegressor, regressor_shape, _regressor_convert, _regressor_example, family=__name__
    )
)
