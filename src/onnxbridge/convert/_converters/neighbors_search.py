"""NearestNeighbors: ``kneighbors`` as a graph, with scikit-learn's default parameters.

skl2onnx refuses NearestNeighbors whenever both ``radius`` and ``n_neighbors`` are set, which the
defaults are (1.0 and 5). ``kneighbors(X)`` is what a fitted NearestNeighbors computes at
inference time (``radius`` only shapes ``radius_neighbors``, which has ragged output):

- ``[N, F] -> indices [N, k]`` (int64) and ``distances [N, k]`` (ascending, the input's float
  type), ``k = n_neighbors``: the search of :mod:`onnxbridge.convert._converters._kneighbors`
  (float64 distances summed as scikit-learn sums them, query rows in blocks, scikit-learn's
  neighbour heap replayed, so equally far rows are kept as it keeps them; ``euclidean``,
  ``manhattan``, ``chebyshev``, ``minkowski`` with any ``p``). Neighbours at equal distances
  come in the heap's order, where scikit-learn's own (unstable) sort leaves it unspecified.

The output roles are ``indices`` and ``distances`` (task ``neighbors``, see
:mod:`onnxbridge.convert._roles`).
"""

from __future__ import annotations

from typing import Any

from sklearn.datasets import make_blobs
from sklearn.neighbors import NearestNeighbors

from onnxbridge.convert._converters._graph import Graph, float_tensor_type
from onnxbridge.convert._converters._kneighbors import kneighbors, reduced_to_distance
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _shape(operator: Any) -> None:
    from skl2onnx.common.data_types import Int64TensorType

    k = int(operator.raw_operator.n_neighbors)
    operator.outputs[0].type = Int64TensorType([None, k])
    operator.outputs[1].type = float_tensor_type(operator)([None, k])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    rdist, indices = kneighbors(g, model, g.input, int(model.n_neighbors))
    g.node("Identity", [indices], g.output(0))
    g.node("Cast", [reduced_to_distance(g, rdist, model)], g.output(1), to=g.onnx_type)


def _example() -> tuple[Any, Any]:
    X, _ = make_blobs(n_samples=150, n_features=4, centers=3, random_state=0)
    return NearestNeighbors().fit(X), X + 0.01


register_converter(
    ConverterSpec(
        NearestNeighbors,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses NearestNeighbors with both radius and n_neighbors set, "
        "which scikit-learn's defaults are",
    )
)
