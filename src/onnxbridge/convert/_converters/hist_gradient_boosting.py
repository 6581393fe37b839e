"""HistGradientBoostingClassifier and HistGradientBoostingRegressor.

Replaces skl2onnx's converter, which writes a Python ``bool`` into an integer-list attribute
(protobuf 7 refuses it) and rounds thresholds to float32 although the model compares in float64.
Each node keeps its learned missing-value direction (``missing_go_to_left``). ``[N, F] -> label
[N], probabilities [N, C]`` (binary: logistic, multiclass: softmax) / ``value [N, 1]`` (identity
or, for the poisson and gamma losses, exp). Native categorical splits (pandas ``category``
columns with ``categorical_features="from_dtype"``, or masks / indices) are converted exactly:
see :func:`onnxbridge.convert._tree_ensemble.from_hist_gradient_boosting`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from onnxbridge.convert._converters._tree_heads import (
    CLASSIFIER_OPTIONS,
    classifier_shape,
    regressor_shape,
    write_classifier,
    write_regressor,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.convert._tree_ensemble import from_hist_gradient_boosting
from onnxbridge.errors import ConversionError

REPLACES = (
    "skl2onnx writes a bool into an int-list attribute (protobuf 7 refuses the graph) and "
    "rounds HistGradientBoosting's float64 thresholds to float32"
)


def _link(model: Any) -> str:
    link = type(model._loss.link).__name__
    if link == "IdentityLink":
        return "identity"
    if link == "LogLink":
        return "exp"
    raise ConversionError(
        f"{type(model).__name__}(loss={model.loss!r}) uses the {link} link, which onnxbridge "
        "cannot convert; use one of squared_error, absolute_error, quantile, poisson, gamma"
    )


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    spec = from_hist_gradient_boosting(model)
    transform = "logistic" if spec.n_outputs == 1 else "softmax"
    write_classifier(scope, operator, container, spec, transform=transform)


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    link = _link(model)
    write_regressor(scope, operator, container, from_hist_gradient_boosting(model), link=link)


def _data(n_classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    # float32-representable values: float precision is then exact too (see tree_ensemble.py).
    X = rng.normal(size=(300, 5)).astype(np.float32).astype(np.float64)
    X[rng.rand(*X.shape) < 0.1] = np.nan  # learned missing-value routing
    score = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) - np.isnan(X[:, 2])
    if n_classes is None:
        return X, 3 * score + rng.normal(scale=0.1, size=len(X))
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.digitize(score, edges)


def _classifier_example() -> tuple[Any, Any]:
    X, y = _data(3)
    return HistGradientBoostingClassifier(max_iter=15, random_state=0).fit(X, y), X


def _regressor_example() -> tuple[Any, Any]:
    X, y = _data(None)
    return HistGradientBoostingRegressor(max_iter=15, random_state=0).fit(X, y), X


register_converter(
    ConverterSpec(
        HistGradientBoostingClassifier,
        classifier_shape,
        _classifier_convert,
        _classifier_example,
        replaces=REPLACES,
        options=CLASSIFIER_OPTIONS,
        family=__name__,
    )
)
register_converter(
    ConverterSpec(
        HistGradientBoostingRegressor,
        regressor_shape,
        _regressor_convert,
        _regressor_example,
        replaces=REPLACES,
        family=__name__,
    )
)
