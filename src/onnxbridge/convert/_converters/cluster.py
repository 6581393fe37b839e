"""Clusterers skl2onnx does not convert: ``[N, F] -> label [N], scores [N, K]``.

- Birch: the label of the nearest subcluster centre (``subcluster_labels_[argmin]``); scores are
  ``transform``'s euclidean distances to the subcluster centres.
- BisectingKMeans: ``predict`` walks the bisecting tree, taking at every split the closer of the
  two child centres (the left one on ties). The graph decides every split at once
  (``[N, splits]``) and picks the one leaf whose path agrees with all of them through a
  ``splits x leaves`` matrix, so no row-dependent control flow is needed. Scores are
  ``transform``'s distances to ``cluster_centers_``.
- MeanShift, AffinityPropagation: the index of the nearest cluster centre,
  ``[N, F] -> label [N]`` only (scikit-learn gives them no ``transform`` to check scores with).
  An AffinityPropagation that did not converge (no centres; scikit-learn labels every row -1
  with a warning) and ``affinity="precomputed"`` are refused.
- FeatureAgglomeration (a transformer: ``[N, F] -> transformed [N, clusters]``): the mean of each
  cluster of features, ``X @ membership / cluster size``; other ``pooling_func`` are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.cluster import (
    AffinityPropagation,
    Birch,
    BisectingKMeans,
    FeatureAgglomeration,
    MeanShift,
)
from sklearn.datasets import make_blobs

from onnxbridge.convert._converters._graph import (
    Graph,
    label_output_parser,
    set_float_output,
    single_output_parser,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _set_label_and_scores(operator: Any, n_scores: int) -> None:
    from skl2onnx.common.data_types import Int64TensorType

    operator.outputs[0].type = Int64TensorType([None])
    set_float_output(operator, 1, [None, n_scores])


# -- Birch ----------------------------------------------------------------------------------


def _birch_shape(operator: Any) -> None:
    _set_label_and_scores(operator, len(operator.raw_operator.subcluster_centers_))


def _birch_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    centers = np.asarray(model.subcluster_centers_, dtype=np.float64)
    squared = g.squared_euclidean(g.input, centers)
    g.node("Sqrt", [squared], g.output(1))
    nearest = g.node("ArgMin", [squared], axis=1, keepdims=0)
    labels = g.int64(np.asarray(model.subcluster_labels_, dtype=np.int64), hint="labels")
    g.node("Gather", [labels, nearest], g.output(0), axis=0)


def _blobs(n_samples: int, centers: int, std: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training rows and fresh rows of the same blobs. Fresh rows, because a training row that
    is alone in its subcluster sits exactly on a centre, where a distance is pure round-off."""
    X, _ = make_blobs(
        n_samples=2 * n_samples, centers=centers, n_features=3, cluster_std=std, random_state=seed
    )
    return X[:n_samples], X[n_samples:]


def _birch_example() -> tuple[Any, Any]:
    X, X_new = _blobs(120, 4, 0.8, 0)
    return Birch(n_clusters=4).fit(X), X_new


# -- BisectingKMeans ------------------------------------------------------------------------


def _bisecting_shape(operator: Any) -> None:
    _set_label_and_scores(operator, len(operator.raw_operator.cluster_centers_))


def _tree_tables(root: Any, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(child centres [2·splits, F] as left, right pairs; path matrix [splits, leaves] with -1
    for "goes left", +1 for "goes right", 0 off the path; leaf labels)."""
    splits: list[Any] = []
    leaves: list[tuple[int, list[tuple[int, int]]]] = []

    def walk(node: Any, path: list[tuple[int, int]]) -> None:
        if node.left is None:
            leaves.append((int(node.label), path))
            return
        index = len(splits)
        splits.append(node)
        walk(node.left, [*path, (index, -1)])
        walk(node.right, [*path, (index, 1)])

    walk(root, [])
    centers = np.vstack(
        [np.vstack([s.left.center, s.right.center]) for s in splits]
    ) + shift.reshape(1, -1)
    path = np.zeros((len(splits), len(leaves)))
    for j, (_, steps) in enumerate(leaves):
        for index, side in steps:
            path[index, j] = side
    return centers, path, [label for label, _ in leaves]


def _bisecting_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    x = g.input
    g.euclidean(x, np.asarray(model.cluster_centers_, dtype=np.float64), g.output(1))
    root = model._bisecting_tree
    if root.left is None:  # one cluster: every row gets its label
        g.fill_rows(x, int(root.label), g.output(0))
        return
    shift = np.asarray(getattr(model, "_X_mean", np.zeros(model.n_features_in_)), dtype=np.float64)
    centers, path, labels = _tree_tables(root, shift)
    n_splits = path.shape[0]
    squared = g.squared_euclidean(x, centers)  # [N, 2·splits]: left, right, left, right, ...
    pairs = g.node("Reshape", [squared, g.int64([0, n_splits, 2])])
    left = g.node("Gather", [pairs, g.int64(0)], axis=2)
    right = g.node("Gather", [pairs, g.int64(1)], axis=2)
    goes_right = g.node("Cast", [g.node("Less", [right, left])], to=g.onnx_type)
    # Disagreements with each leaf's path: a right turn on a "left" step or a left turn on a
    # "right" step: goes_right @ (is_left - is_right) + (# "right" steps). Exactly one leaf has 0.
    is_left, is_right = (path < 0).astype(np.float64), (path > 0).astype(np.float64)
    turns = g.matmul_const(goes_right, (is_left - is_right).astype(g.dtype))
    mismatch = g.node("Add", [turns, g.const(is_right.sum(axis=0))])
    leaf = g.node("ArgMin", [mismatch], axis=1, keepdims=0)
    g.node("Gather", [g.int64(np.asarray(labels, dtype=np.int64)), leaf], g.output(0), axis=0)


def _bisecting_example() -> tuple[Any, Any]:
    X, X_new = _blobs(150, 5, 1.5, 1)
    return BisectingKMeans(n_clusters=5, random_state=0).fit(X), X_new


# -- MeanShift / AffinityPropagation ---------------------------------------------------------


def _label_shape(operator: Any) -> None:
    from skl2onnx.common.data_types import Int64TensorType

    operator.outputs[0].type = Int64TensorType([None])


def _nearest_center_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    name = type(model).__name__
    if getattr(model, "affinity", "euclidean") == "precomputed":
        raise ConversionError(
            f"{name}(affinity='precomputed') predicts from a precomputed affinity matrix, not "
            "from features; refit with affinity='euclidean'"
        )
    centers = np.asarray(model.cluster_centers_, dtype=np.float64)
    if centers.shape[0] == 0:
        raise ConversionError(
            f"{name} did not converge and has no cluster centres (scikit-learn labels every row "
            "-1); refit with a larger max_iter or damping"
        )
    g = Graph(scope, operator, container)
    squared = g.squared_euclidean(g.input, centers)
    g.node("ArgMin", [squared], g.output(0), axis=1, keepdims=0)


def _mean_shift_example() -> tuple[Any, Any]:
    X, X_new = _blobs(100, 3, 0.7, 2)
    return MeanShift(bandwidth=2.0).fit(X), X_new


def _affinity_example() -> tuple[Any, Any]:
    X, X_new = _blobs(60, 3, 0.7, 4)
    return AffinityPropagation(random_state=0).fit(X), X_new


# -- FeatureAgglomeration -------------------------------------------------------------------


def _agglomeration_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, int(np.max(operator.raw_operator.labels_)) + 1])


def _agglomeration_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if model.pooling_func is not np.mean:
        name = getattr(model.pooling_func, "__name__", repr(model.pooling_func))
        raise ConversionError(
            f"FeatureAgglomeration(pooling_func={name}) cannot be converted; only the default "
            "pooling_func=np.mean is supported: refit with it"
        )
    g = Graph(scope, operator, container)
    labels = np.asarray(model.labels_)
    membership = (labels[:, None] == np.arange(labels.max() + 1)[None, :]).astype(np.float64)
    # As scikit-learn: the sum over each cluster (bincount), then a division by its size.
    sums = g.matmul_const(g.input, membership.astype(g.dtype))
    g.node("Div", [sums, g.const(membership.sum(axis=0).reshape(1, -1))], g.output())


def _agglomeration_example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    base = rng.normal(size=(60, 3))
    X = np.hstack([base, base + 0.1 * rng.normal(size=(60, 3)), rng.normal(size=(60, 2))])
    return FeatureAgglomeration(n_clusters=4).fit(X), X


for _spec in (
    ConverterSpec(
        MeanShift,
        _label_shape,
        _nearest_center_convert,
        _mean_shift_example,
        parser=label_output_parser,
    ),
    ConverterSpec(
        AffinityPropagation,
        _label_shape,
        _nearest_center_convert,
        _affinity_example,
        parser=label_output_parser,
    ),
    ConverterSpec(
        FeatureAgglomeration,
        _agglomeration_shape,
        _agglomeration_convert,
        _agglomeration_example,
        parser=single_output_parser,
    ),
    ConverterSpec(Birch, _birch_shape, _birch_convert, _birch_example),
    ConverterSpec(BisectingKMeans, _bisecting_shape, _bisecting_convert, _bisecting_example),
):
    register_converter(_spec)
