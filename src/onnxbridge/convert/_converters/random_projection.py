"""SparseRandomProjection: ``X @ components_.T``, ``[N, F] -> transformed [N, K]``.

skl2onnx converts GaussianRandomProjection only. The sparse random matrix is stored densely in
the graph (ONNX Runtime's MatMul has no sparse weights); for dense input scikit-learn's result is
dense as well, whatever ``dense_output`` says.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_regression
from sklearn.random_projection import SparseRandomProjection

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.components_.shape[0]])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    components = model.components_
    dense = components.toarray() if hasattr(components, "toarray") else np.asarray(components)
    g.matmul_const(g.input, dense.T.astype(g.dtype), g.output())


def _example() -> tuple[Any, Any]:
    X, _ = make_regression(n_samples=60, n_features=40, random_state=0)
    return SparseRandomProjection(n_components=10, random_state=0).fit(X), X


register_converter(ConverterSpec(SparseRandomProjection, _shape, _convert, _example))
