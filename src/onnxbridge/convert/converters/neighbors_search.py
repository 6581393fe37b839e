"""NearestNeighbors: ``kneighbors`` as a graph, with scikit-learn's default parameters.

skl2onnx refuses NearestNeighbors whenever both ``radius`` and ``n_neighbors`` are set, which the
defaults are (1.0 and 5). ``kneighbors(X)`` is what a fitted NearestNeighbors computes at
inference time (``radius`` only shapes ``radius_neighbors``, which has ragged output):

- ``[N, F] -> indices [N, k]`` (int64) and ``distances [N, k]`` (ascending, the input's float
  type), ``k = n_neighbors``: a TopK of the smallest float64 distances to every training row
  (``euclidean``, ``manhattan``, ``chebyshev``, ``minkowski`` with any ``p``); ties go to the
  lower training index.

The output roles are ``indices`` and ``distances`` (task ``neighbors``, see
:mod:`onnxbridge.convert.roles`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.neighbors import NearestNeighbors

from onnxbridge.convert.converters._meta import Nodes, float_tensor_type
from onnxbridge.convert.converters.neighbors_radius import distances
from onnxbridge.convert.registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _k(model: Any) -> int:
    k = int(model.n_neighbors)
    if k > model.n_samples_fit_:
        raise ConversionError(
            f"NearestNeighbors(n_neighbors={k}) exceeds the {model.n_samples_fit_} training rows; "
            "use n_neighbors <= the number of training rows"
        )
    return k


def _shape(operator: Any) -> None:
    from skl2onnx.common.data_types import Int64TensorType

    k = int(operator.raw_operator.n_neighbors)
    operator.outputs[0].type = Int64TensorType([None, k])
    operator.outputs[1].type = float_tensor_type(operator)([None, k])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    k = _k(model)
    dist = distances(g, model, operator.inputs[0].full_name)
    nearest = g.name("nearest")
    container.add_node(
        "TopK",
        [dist, g.const(np.array([k]))],
        [nearest, operator.outputs[0].full_name],
        name=scope.get_unique_operator_name("TopK"),
        axis=1,
        largest=0,
        sorted=1,
    )
    g.op("Cast", [nearest], output=operator.outputs[1].full_name, to=g.onnx_float)


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
