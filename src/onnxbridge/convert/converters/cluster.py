"""Clusterers skl2onnx does not convert: ``[N, F] -> label [N], scores [N, K]``.

- Birch: the label of the nearest subcluster centre (``subcluster_labels_[argmin]``); scores are
  ``transform``'s euclidean distances to the subcluster centres.
- BisectingKMeans: ``predict`` walks the bisecting tree, taking at every split the closer of the
  two child centres (the left one on ties). The graph decides every split at once
  (``[N, splits]``) and picks the one leaf whose path agrees with all of them through a
  ``splits x leaves`` matrix, so no row-dependent control flow is needed. Scores are
  ``transform``'s distances to ``cluster_centers_``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.cluster import Birch, BisectingKMeans
from sklearn.datasets import make_blobs

from onnxbridge.convert.converters._graph import Graph, set_float_output
from onnxbridge.convert.registry import ConverterSpec, register_converter


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


for _spec in (
    ConverterSpec(Birch, _birch_shape, _birch_convert, _birch_example),
    ConverterSpec(BisectingKMeans, _bisecting_shape, _bisecting_convert, _bisecting_example),
):
    register_converter(_spec)
