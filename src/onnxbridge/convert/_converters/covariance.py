"""EllipticEnvelope: outliers by Mahalanobis distance to the robust (MinCovDet) fit.

skl2onnx has no converter. ``decision_function = -(x - location_)ᵀ P (x - location_) - offset_``
with ``P = get_precision()``; ``predict`` is 1 where it is ``>= 0``, else -1.
``[N, F] -> label [N] (int64, 1 inlier / -1 outlier), scores [N, 1]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.covariance import EllipticEnvelope

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _shape(operator: Any) -> None:
    from skl2onnx.common.data_types import Int64TensorType

    operator.outputs[0].type = Int64TensorType([None])
    set_float_output(operator, 1, [None, 1])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    diff = g.sub_const(g.input, np.asarray(model.location_).reshape(1, -1))
    precision = np.asarray(model.get_precision(), dtype=np.float64)
    weighted = g.matmul_const(diff, precision.astype(g.dtype))
    squared = g.node("ReduceSum", [g.node("Mul", [weighted, diff]), g.int64([1])], keepdims=1)
    scores = g.node("Sub", [g.node("Neg", [squared]), g.const(model.offset_)], g.output(1))
    inlier = g.node("GreaterOrEqual", [scores, g.const(0.0)])
    label = g.node("Where", [inlier, g.int64([[1]]), g.int64([[-1]])])
    g.node("Reshape", [label, g.int64([-1])], g.output(0))


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.multivariate_normal([0, 1, -1], [[2, 0.5, 0], [0.5, 1, 0.3], [0, 0.3, 0.5]], 150)
    X[:8] += rng.uniform(4, 6, size=(8, 3))  # a few outliers
    return EllipticEnvelope(random_state=0).fit(X), X


register_converter(ConverterSpec(EllipticEnvelope, _shape, _convert, _example))
