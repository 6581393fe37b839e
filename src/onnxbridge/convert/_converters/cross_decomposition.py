"""Cross decomposition: PLSCanonical, CCA (regressors) and PLSSVD (a transformer).

skl2onnx converts PLSRegression only. All three are affine maps of the input:

- PLSCanonical / CCA ``predict``: ``(X - _x_mean) @ coef_.T + intercept_``,
  ``[N, F] -> value [N, T]``. Their ``transform`` (the x scores) is not the graph's output: a
  regressor converts its ``predict``.
- PLSSVD ``transform``: ``((X - _x_mean) / _x_std) @ x_weights_``, ``[N, F] -> transformed [N, K]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.cross_decomposition import CCA, PLSSVD, PLSCanonical
from sklearn.datasets import make_regression

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _predict_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.coef_.shape[0]])


def _predict_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    centred = g.sub_const(g.input, np.asarray(model._x_mean).reshape(1, -1))
    coef: np.ndarray = np.asarray(model.coef_, dtype=np.float64).T.astype(g.dtype)
    intercept = np.asarray(model.intercept_, dtype=np.float64).reshape(1, -1)
    g.affine(centred, coef, intercept, g.output())


def _svd_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.x_weights_.shape[1]])


def _svd_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    centred = g.sub_const(g.input, np.asarray(model._x_mean).reshape(1, -1))
    scaled = g.node("Div", [centred, g.const(np.asarray(model._x_std).reshape(1, -1))])
    g.matmul_const(
        scaled, np.asarray(model.x_weights_, dtype=np.float64).astype(g.dtype), g.output()
    )


def _data() -> tuple[np.ndarray, np.ndarray]:
    X, Y = make_regression(
        n_samples=80, n_features=6, n_targets=3, n_informative=4, noise=2.0, random_state=0
    )
    return X, Y / 30.0


def _canonical_example() -> tuple[Any, Any]:
    X, Y = _data()
    return PLSCanonical(n_components=2).fit(X, Y), X


def _cca_example() -> tuple[Any, Any]:
    X, Y = _data()
    return CCA(n_components=2).fit(X, Y), X


def _svd_example() -> tuple[Any, Any]:
    X, Y = _data()
    return PLSSVD(n_components=2).fit(X, Y), X


for _spec in (
    ConverterSpec(PLSCanonical, _predict_shape, _predict_convert, _canonical_example),
    ConverterSpec(CCA, _predict_shape, _predict_convert, _cca_example),
    ConverterSpec(PLSSVD, _svd_shape, _svd_convert, _svd_example),
):
    register_converter(_spec)
