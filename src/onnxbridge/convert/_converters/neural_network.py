"""BernoulliRBM: the hidden units' mean activation, ``sigmoid(X @ components_.T + b)``.

skl2onnx has no converter. ``[N, F] -> transformed [N, n_components]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.neural_network import BernoulliRBM

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.components_.shape[0]])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    weights: np.ndarray = np.asarray(model.components_, dtype=np.float64).T.astype(g.dtype)
    activation = g.affine(g.input, weights, np.asarray(model.intercept_hidden_).reshape(1, -1))
    g.node("Sigmoid", [activation], g.output())


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = (rng.rand(80, 12) < 0.3).astype(float)
    return BernoulliRBM(n_components=5, n_iter=20, random_state=0).fit(X), X


register_converter(ConverterSpec(BernoulliRBM, _shape, _convert, _example))
