"""Isomap: new points embedded through their nearest training neighbours.

skl2onnx has no converter. As scikit-learn's ``transform``: the euclidean distances to the
training rows, the ``n_neighbors`` nearest (TopK), the geodesic distance to every training row
``G = min_j (d_j + dist_matrix_[j])`` over those neighbours (an ``[N, n_neighbors, M]`` tensor, M
training rows), then the kernel ``-G² / 2`` centred as at fit and projected on the scaled
eigenvectors of the fitted KernelPCA. ``[N, F] -> transformed [N, n_components]``.

Only the k-nearest-neighbour graph with the euclidean metric (the defaults) converts; the radius
graph and other metrics are refused. In float32 a query equal to a training row gets a distance
of round-off size instead of 0 (the distance expansion ``|x|² - 2x·y + |y|²`` scikit-learn also
uses for brute-force search), which moves its embedding by about 1e-3 of the data's scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_swiss_roll
from sklearn.manifold import Isomap

from onnxbridge.convert.converters._graph import Graph, set_float_output
from onnxbridge.convert.registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.embedding_.shape[1]])


def _check(model: Any) -> None:
    if model.n_neighbors is None:
        raise ConversionError(
            f"Isomap(radius={model.radius}) embeds through a radius graph, whose neighbour count "
            "varies by row; refit with n_neighbors (the default, 5)"
        )
    euclidean = model.metric in ("euclidean", "l2") or (
        model.metric == "minkowski" and model.p == 2 and not model.metric_params
    )
    if not euclidean:
        raise ConversionError(
            f"Isomap(metric={model.metric!r}, p={model.p}) cannot be converted; only the "
            "euclidean metric (metric='minkowski', p=2, the default) is: refit with it"
        )


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check(model)
    g = Graph(scope, operator, container)
    train = np.asarray(model.nbrs_._fit_X, dtype=np.float64)
    distances = g.euclidean(g.input, train)  # [N, M]
    k = int(model.n_neighbors)
    nearest, index = (g.name("knn_d"), g.name("knn_i"))
    g.container.add_node(
        "TopK",
        [distances, g.int64([k])],
        [nearest, index],
        name=g.scope.get_unique_operator_name("TopK"),
        axis=1,
        largest=0,
        sorted=1,
    )
    paths = g.node("Gather", [g.const(model.dist_matrix_), index], axis=0)  # [N, k, M]
    through = g.node("Add", [paths, g.node("Unsqueeze", [nearest, g.int64([2])])])
    geodesic = g.node("ReduceMin", [through, g.int64([1])], keepdims=0)  # [N, M]
    kernel = g.node("Mul", [g.node("Mul", [geodesic, geodesic]), g.const(-0.5)])
    kpca = model.kernel_pca_
    centerer = kpca._centerer
    n_fit = centerer.K_fit_rows_.shape[0]
    row_means = g.node(
        "Div", [g.node("ReduceSum", [kernel, g.int64([1])], keepdims=1), g.const(float(n_fit))]
    )
    centred = g.node("Sub", [kernel, g.const(centerer.K_fit_rows_.reshape(1, -1))])
    centred = g.node(
        "Add", [g.node("Sub", [centred, row_means]), g.const(float(centerer.K_fit_all_))]
    )
    eigenvalues = np.asarray(kpca.eigenvalues_, dtype=np.float64)
    alphas = np.zeros_like(np.asarray(kpca.eigenvectors_, dtype=np.float64))
    nonzero = np.flatnonzero(eigenvalues)
    alphas[:, nonzero] = kpca.eigenvectors_[:, nonzero] / np.sqrt(eigenvalues[nonzero])
    g.matmul_const(centred, alphas.astype(g.dtype), g.output())


def _example() -> tuple[Any, Any]:
    X, _ = make_swiss_roll(n_samples=200, noise=0.1, random_state=0)
    # Fresh rows of the same roll (a training row's own distance is pure round-off in float32).
    return Isomap(n_components=2).fit(X[:120]), X[120:]


register_converter(ConverterSpec(Isomap, _shape, _convert, _example))
