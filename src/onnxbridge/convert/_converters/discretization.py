"""KBinsDiscretizer with any ``encode``, its default ``"onehot"`` included.

skl2onnx refuses ``encode="onehot"`` (scikit-learn's default) because the output is a sparse
matrix. ONNX has no sparse tensors, so onnxbridge writes the same values dense:

- ``bin[N, F]`` = how many inner edges of feature ``j`` are ``<= x`` (``np.searchsorted(...,
  side="right")``), compared in float64 whatever the input precision, as scikit-learn does;
- ``ordinal``: ``bin`` as floats; ``onehot`` / ``onehot-dense``: one indicator column per bin of
  every feature, ``[N, sum(n_bins_)]`` (``onehot`` is the dense form of scikit-learn's sparse
  matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_regression
from sklearn.preprocessing import KBinsDiscretizer

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _width(model: Any) -> int:
    return int(np.sum(model.n_bins_)) if "onehot" in model.encode else len(model.n_bins_)


def _shape(operator: Any) -> None:
    operator.outputs[0].type = float_tensor_type(operator)([None, _width(operator.raw_operator)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    inner = [np.asarray(edges, dtype=np.float64)[1:-1] for edges in model.bin_edges_]
    longest = max(1, max(len(e) for e in inner))
    # [1, F, K] edges padded with +inf, which no value reaches.
    padded = np.full((1, len(inner), longest), np.inf)
    for j, edges in enumerate(inner):
        padded[0, j, : len(edges)] = edges
    x = g.op("Cast", [operator.inputs[0].full_name], to=TensorProto.DOUBLE)
    x3 = g.op("Unsqueeze", [x, g.const(np.array([2]))])
    reached = g.op("GreaterOrEqual", [x3, g.const(padded, dtype=np.float64)])
    bins = g.op(
        "ReduceSum",
        [g.op("Cast", [reached], to=TensorProto.INT64), g.const(np.array([2]))],
        keepdims=0,
    )
    out = operator.outputs[0].full_name
    if model.encode == "ordinal":
        g.op("Cast", [bins], output=out, to=g.onnx_float)
        return
    feature = np.concatenate([np.full(n, j) for j, n in enumerate(model.n_bins_)])
    level = np.concatenate([np.arange(n) for n in model.n_bins_]).reshape(1, -1)
    spread = g.columns(bins, feature)
    g.op("Cast", [g.op("Equal", [spread, g.const(level)])], output=out, to=g.onnx_float)


def _example() -> tuple[Any, Any]:
    # Defaults (5 quantile bins, one-hot). 150 rows put every quantile between two rows: a
    # row lying exactly on an edge would change bins once rounded to float32 input.
    X, _ = make_regression(n_samples=150, n_features=4, random_state=0)
    return KBinsDiscretizer(quantile_method="averaged_inverted_cdf").fit(X), X


register_converter(
    ConverterSpec(
        KBinsDiscretizer,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses encode='onehot', scikit-learn's default (its output is "
        "sparse); the dense equivalent is what ONNX can hold",
    )
)
