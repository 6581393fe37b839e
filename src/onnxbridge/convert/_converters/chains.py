"""RegressorChain: one regressor per target, each fed the features and the previous predictions.

skl2onnx has no converter for it. As scikit-learn's ``predict``: for ``k`` in chain order,
``p_k = estimators_[k].predict([X, p_0, ..., p_{k-1}])``; the output ``[N, T]`` puts the
columns back in target order (``order_``). Every regressor is converted by its own converter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_regression
from sklearn.linear_model import Ridge
from sklearn.multioutput import RegressorChain

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _shape(operator: Any) -> None:
    operator.outputs[0].type = float_tensor_type(operator)(
        [None, len(operator.raw_operator.estimators_)]
    )


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    x = g.cast_float(operator.inputs[0].full_name)
    n_features = int(model.n_features_in_)
    features = x
    chain: list[str] = []
    for k, estimator in enumerate(model.estimators_):
        if chain:
            features = g.op("Concat", [x, *chain], axis=1)
        variable = (features, g.float_type([None, n_features + k]))
        predicted = g.regressor_output(estimator, [variable], hint=f"link{k}")
        chain.append(g.op("Reshape", [predicted, g.const(np.array([-1, 1]))]))
    # chain[k] predicts target order_[k]: put the columns back in target order.
    inverse = np.empty(len(model.order_), dtype=np.int64)
    inverse[np.asarray(model.order_)] = np.arange(len(model.order_))
    stacked = chain[0] if len(chain) == 1 else g.op("Concat", chain, axis=1)
    g.op("Gather", [stacked, g.const(inverse)], output=operator.outputs[0].full_name, axis=1)


def _example() -> tuple[Any, Any]:
    X, Y = make_regression(n_samples=120, n_features=5, n_targets=3, random_state=0)
    return RegressorChain(Ridge(), order=[2, 0, 1]).fit(X, Y), X


register_converter(ConverterSpec(RegressorChain, _shape, _convert, _example))
