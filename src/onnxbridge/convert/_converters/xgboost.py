"""XGBClassifier and XGBRegressor (registered when xgboost is installed).

Read from the booster's JSON model (no onnxmltools): ``[N, F] -> label [N], probabilities [N, C]``
(``binary:logistic``: logistic, ``multi:softprob`` / ``multi:softmax``: softmax) / ``value [N, 1]``
(identity, or exp for the poisson / gamma / tweedie objectives, logistic for ``reg:logistic``).
XGBoost compares ``float32(x) < t`` with float32 thresholds and sends NaN where each node learned
(``default_left``); both graphs keep that exactly.

Native categorical splits (``enable_categorical=True``) convert exactly: a pandas ``category``
column arrives as text and is coded by the categories the model stored (XGBoost re-codes a
DataFrame by them too); a node sends the categories it lists right and every other one left, a
missing value where it learned. A category the model never saw, which XGBoost refuses, goes
where a missing value goes. A numeric column declared categorical (``feature_types``) is its own
code (a fractional value cut to its integer part): negative codes and codes above every listed
one go left, as in XGBoost.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from xgboost import XGBClassifier, XGBRegressor

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
from onnxbridge.convert._tree_ensemble import from_xgboost
from onnxbridge.errors import ConversionError

_IDENTITY = (
    "reg:squarederror",
    "reg:squaredlogerror",
    "reg:absoluteerror",
    "reg:pseudohubererror",
    "reg:quantileerror",
)
_EXP = ("count:poisson", "reg:gamma", "reg:tweedie")


def _check_missing(model: Any) -> None:
    missing = getattr(model, "missing", np.nan)
    if missing is not None and not (isinstance(missing, float) and np.isnan(missing)):
        raise ConversionError(
            f"{type(model).__name__}(missing={missing!r}) cannot be converted: ONNX trees only "
            "route NaN as missing; fit with missing=np.nan (the default)"
        )


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check_missing(model)
    spec, objective = from_xgboost(model, string_features=text_features(operator))
    if objective == "binary:logistic":
        transform = "logistic"
    elif objective in ("multi:softprob", "multi:softmax"):
        transform = "softmax"
    else:
        raise ConversionError(
            f"XGBClassifier(objective={objective!r}) cannot be converted; use binary:logistic "
            "or multi:softprob"
        )
    write_classifier(scope, operator, container, spec, transform=transform)


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check_missing(model)
    spec, objective = from_xgboost(model, string_features=text_features(operator))
    link = regression_link(
        "XGBRegressor", objective, identity=_IDENTITY, exp=_EXP, logistic="reg:logistic"
    )
    write_regressor(scope, operator, container, spec, link=link)


def _data(classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 5))
    X[rng.rand(*X.shape) < 0.1] = np.nan
    score = np.nan_to_num(X[:, 0]) - 0.7 * np.nan_to_num(X[:, 1]) + np.isnan(X[:, 3])
    return X, example_target(score, classes, rng)


def _classifier_example() -> tuple[Any, Any]:
    X, y = _data(3)
    model = XGBClassifier(n_estimators=10, max_depth=3, random_state=0, n_jobs=1)
    return model.fit(X, y), X


def _regressor_example() -> tuple[Any, Any]:
    X, y = _data(None)
    model = XGBRegressor(n_estimators=10, max_depth=3, random_state=0, n_jobs=1)
    return model.fit(X, y), X


register_converter(
    ConverterSpec(
        XGBClassifier,
        classifier_shape,
        _classifier_convert,
        _classifier_example,
        options=CLASSIFIER_OPTIONS,
        family=__name__,
    )
)


def _regressor_shape(operator: Any) -> None:
    """Value ``[N, K]``, ``K`` the booster's targets (XGBRegressor has no ``n_outputs_``)."""
    regressor_shape(operator)
    config = json.loads(operator.raw_operator.get_booster().save_config())
    targets = int(config["learner"]["learner_model_param"].get("num_target", 1))
    if targets > 1:
        operator.outputs[0].type = type(operator.outputs[0].type)([None, targets])


register_converter(
    ConverterSpec(
        XGBRegressor, _regressor_shape, _regressor_convert, _regressor_example, family=__name__
    )
)
