"""Manifold learners that embed new points: Isomap and LocallyLinearEmbedding.

skl2onnx converts neither. Isomap, as scikit-learn's ``transform``: the euclidean distances to the
training rows, the ``n_neighbors`` nearest (TopK), the geodesic distance to every training row
``G = min_j (d_j + dist_matrix_[j])`` over those neighbours (an ``[N, n_neighbors, M]`` tensor, M
training rows), then the kernel ``-G² / 2`` centred as at fit and projected on the scaled
eigenvectors of the fitted KernelPCA. ``[N, F] -> transformed [N, n_components]``.

Only the k-nearest-neighbour graph with the euclidean metric (the defaults) converts; the radius
graph and other metrics are refused. In float32 a query equal to a training row gets a distance
of round-off size instead of 0 (the distance expansion ``|x|² - 2x·y + |y|²`` scikit-learn also
uses for brute-force search), which moves its embedding by about 1e-3 of the data's scale.

LocallyLinearEmbedding, as its ``transform``: the ``n_neighbors`` nearest training rows, the
barycentre weights that rebuild the point from them (the regularised local Gram system
``(G + reg·trace(G)·I) w = 1``, solved for all rows at once by Gauss-Jordan elimination unrolled
over the ``n_neighbors`` pivots: the matrix is symmetric positive definite, so no pivoting is
needed), normalised to sum 1, applied to the neighbours' embeddings. This runs in float64
whatever the input precision (the output is cast back): the local systems are ill-conditioned
enough that float32 would lose digits scikit-learn keeps.
``[N, F] -> transformed [N, n_components]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_swiss_roll
from sklearn.manifold import Isomap, LocallyLinearEmbedding

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
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


def _lle_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    output_type = g.onnx_type
    x = g.node("Cast", [g.input], to=TensorProto.DOUBLE)
    # From here on every constant and operation is float64.
    g.dtype, g.onnx_type = np.float64, TensorProto.DOUBLE
    train = np.asarray(model.nbrs_._fit_X, dtype=np.float64)
    k = int(model.n_neighbors)
    nearest, index = g.name("knn_d"), g.name("knn_i")
    g.container.add_node(
        "TopK",
        [g.squared_euclidean(x, train), g.int64([k])],
        [nearest, index],
        name=g.scope.get_unique_operator_name("TopK"),
        axis=1,
        largest=0,
        sorted=1,
    )
    neighbours = g.node("Gather", [g.const(train), index], axis=0)  # [N, k, F]
    local = g.node("Sub", [neighbours, g.node("Unsqueeze", [x, g.int64([1])])])
    gram = g.node("MatMul", [local, g.node("Transpose", [local], perm=[0, 2, 1])])  # [N, k, k]
    eye = np.eye(k)[None]
    trace = g.node("ReduceSum", [g.node("Mul", [gram, g.const(eye)]), g.int64([1, 2])], keepdims=1)
    positive = g.node("Greater", [trace, g.const(0.0)])
    ridge = g.node(
        "Where",
        [positive, g.node("Mul", [trace, g.const(model.reg)]), g.const(float(model.reg))],
    )
    system = g.node("Add", [gram, g.node("Mul", [ridge, g.const(eye)])])
    # The right-hand side: a column of ones per row, [N, k, 1].
    ones = g.node(
        "Add",
        [
            g.node(
                "Mul",
                [g.node("Slice", [system, g.int64([0]), g.int64([1]), g.int64([2])]), g.const(0.0)],
            ),
            g.const(1.0),
        ],
    )
    weights = g.solve_spd(system, ones, k)  # [N, k, 1]
    total = g.node("ReduceSum", [weights, g.int64([1])], keepdims=1)
    barycentric = g.node("Div", [weights, total])
    embedded = g.node("Gather", [g.const(model.embedding_), index], axis=0)  # [N, k, C]
    combined = g.node(
        "ReduceSum", [g.node("Mul", [embedded, barycentric]), g.int64([1])], keepdims=0
    )
    g.node("Cast", [combined], g.output(), to=output_type)


def _lle_example() -> tuple[Any, Any]:
    X, _ = make_swiss_roll(n_samples=200, noise=0.1, random_state=1)
    return LocallyLinearEmbedding(n_components=2, random_state=0).fit(X[:120]), X[120:]


for _spec in (
    ConverterSpec(Isomap, _shape, _convert, _example),
    ConverterSpec(LocallyLinearEmbedding, _shape, _lle_convert, _lle_example),
):
    register_converter(_spec)
