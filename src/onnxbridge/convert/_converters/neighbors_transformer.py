"""RadiusNeighborsTransformer: the radius-neighbours graph of each row, as a dense matrix.

skl2onnx has no converter for it. scikit-learn's ``transform`` gives a sparse ``[N, M]`` matrix
(``M`` training points): entry ``(i, j)`` is the distance from row ``i`` to training point ``j``
(``mode="distance"``) or 1 (``mode="connectivity"``) when ``d <= radius``, and nothing otherwise.
The graph writes the same matrix dense: distances in float64 (as :mod:`neighbors_radius`
computes them), masked by the radius, zeros elsewhere. A neighbour at distance 0 is a stored
zero in scikit-learn's matrix, a zero here too: the dense values agree.

``[N, F] -> [N, M]``; the metrics of :mod:`neighbors_radius`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.neighbors import RadiusNeighborsTransformer

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._converters.neighbors_radius import distances
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _shape(operator: Any) -> None:
    width = int(operator.raw_operator.n_samples_fit_)
    operator.outputs[0].type = float_tensor_type(operator)([None, width])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    dist = distances(g, model, operator.inputs[0].full_name)
    inside = g.op("LessOrEqual", [dist, g.const(np.array(float(model.radius)), dtype=np.float64)])
    value = dist if model.mode == "distance" else g.const(np.array(1.0), dtype=np.float64)
    dense = g.op("Where", [inside, value, g.const(np.array(0.0), dtype=np.float64)])
    g.op("Cast", [dense], output=operator.outputs[0].full_name, to=g.onnx_float)


def _example() -> tuple[Any, Any]:
    X, _ = make_classification(n_samples=80, n_features=4, n_redundant=0, random_state=0)
    return RadiusNeighborsTransformer(radius=1.5).fit(X[:60]), X[60:]


register_converter(ConverterSpec(RadiusNeighborsTransformer, _shape, _convert, _example))
