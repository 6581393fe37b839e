"""The k nearest training rows of every query row, as scikit-learn finds them, in bounded memory.

Not a converter module (it registers nothing): :func:`kneighbors` is the search the k-neighbours
converters share (KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors).

``[N, F] -> reduced distances [N, k]`` (float64, ascending) ``and indices [N, k]`` (int64).

- **Exact distances.** scikit-learn compares *reduced* distances (``sum (x - y)^2`` for
  euclidean, ``sum |x - y|`` for manhattan, ``sum |x - y|^p`` for minkowski, ``max |x - y|`` for
  chebyshev), summed feature after feature in float64. The graph sums in the same order
  (``ReduceSumSquare`` / ``ReduceL1`` over the last axis, which ONNX Runtime sums in order, or
  one feature at a time for other exponents), so each reduced distance is the same float64
  number as scikit-learn's tree search computes: duplicate training rows give bit-identical
  distances and distinct ones stay distinct (no ``|x|^2 - 2 x.y + |y|^2`` expansion, no float32).
- **scikit-learn's heap, replayed.** scikit-learn keeps the k nearest rows in a max-heap
  (``heap_push``): a row no nearer than the root is refused, a nearer one replaces the root and
  sifts down. Which of several equally far rows stay depends on the order the rows arrive and
  on the heap's layout, so the graph replays that heap on the rows in scikit-learn's order.
  ``algorithm="brute"`` meets the training rows in their order; a KD tree or ball tree visits
  its leaves depth first, nearer child first (its own node bounds, same float64 arithmetic),
  and a leaf's rows in the tree's order. Only rows the heap could accept are replayed: for a
  tree, the first leaves visited (enough for k rows) give an upper bound U of the k-th
  distance, and after them only rows nearer than U in leaves within U; for brute force, the
  rows up to the k-th of the ``c`` nearest, then the rest of those ``c``.
- **Bounded memory.** Query rows go through a ``Scan`` in blocks of ``B`` rows (the last block
  padded), so the largest tensor is ``[B, M, F]`` for ``M`` training rows, whatever ``N``:
  ``B = clamp(BLOCK_ELEMENTS // (M F), 1, MAX_BLOCK_ROWS)``.

What is not reproduced: scikit-learn's brute search (``algorithm="brute"``, also what
``"auto"`` picks beyond 15 features) with more than 256 training rows and at most
``1024 x threads`` query rows in one call splits the training rows between its threads and
merges their heaps, so its own choice among equally far rows depends on its thread count and
on the batch; the graph gives the one-thread answer. For euclidean distances that search also
ranks rows by ``|x|^2 - 2 x.y + |y|^2`` computed with BLAS, whose rounding can order two rows
at nearly equal distances otherwise on non-integer data. Both change an answer only when the
rows concerned disagree (labels, targets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from onnxbridge.convert._converters._graph import Graph, SubgraphBody
from onnxbridge.convert._converters.neighbors_radius import metric_p
from onnxbridge.errors import ConversionError

__all__ = [
    "BLOCK_ELEMENTS",
    "MAX_BLOCK_ROWS",
    "block_rows",
    "check_k",
    "kneighbors",
    "reduced_to_distance",
]

# Elements of the [B, M, F] float64 differences of one block: 2**23 is 64 MB.
BLOCK_ELEMENTS = 2**23
MAX_BLOCK_ROWS = 1024
# Nearest rows taken as candidates (at least 4 k): more makes the heap's sequence start shorter.
CANDIDATES = 256


def block_rows(n_train: int, n_features: int) -> int:
    """Query rows per block for ``n_train`` training rows of ``n_features`` features."""
    per_row = max(1, n_train * n_features)
    return int(min(MAX_BLOCK_ROWS, max(1, BLOCK_ELEMENTS // per_row)))


def check_k(model: Any, k: int) -> int:
    """``k`` itself, after checking the training set has that many rows.

    Raises:
        ConversionError: more neighbours than training rows.
    """
    n_train = int(model.n_samples_fit_)
    if k > n_train:
        raise ConversionError(
            f"{type(model).__name__}(n_neighbors={k}) exceeds the {n_train} training rows; "
            "use n_neighbors <= the number of training rows"
        )
    return k


@dataclass(frozen=True)
class _Tree:
    """The visiting order of a fitted KDTree / BallTree, as arrays.

    Attributes:
        kind: ``"kd_tree"`` or ``"ball_tree"``.
        low: ``[n_nodes, F]`` lower bounds (KD) or centroids (ball).
        high: ``[n_nodes, F]`` upper bounds (KD), unused for a ball tree.
        radius: ``[n_nodes]`` ball radii, unused for a KD tree.
        ancestors: ``[D, L]`` the internal node at each depth above each leaf.
        left: ``[D, L]`` 1 where the path to the leaf goes to the left child.
        rows_by_leaf: ``[L, span]`` the training rows of each leaf in the tree's order, padded
            with M (no row).
        span: more than any leaf's size.
        first_leaves: how many leaves surely hold k rows.
    """

    kind: str
    low: np.ndarray
    high: np.ndarray
    radius: np.ndarray
    ancestors: np.ndarray
    left: np.ndarray
    rows_by_leaf: np.ndarray
    span: int
    first_leaves: int


def _tree(model: Any, k: int) -> _Tree | None:
    """The tree scikit-learn searches, or None for a brute-force search (training order)."""
    method = model._fit_method
    if method == "brute":
        return None
    if method not in ("kd_tree", "ball_tree"):
        raise ConversionError(
            f"{type(model).__name__} searches with {method!r}; the graph reproduces 'brute', "
            "'kd_tree' and 'ball_tree': refit with one of them"
        )
    _, idx_array, node_data, bounds = model._tree.get_arrays()
    n_nodes = len(node_data)
    n_internal = n_nodes // 2  # a complete binary tree: the leaves are the last level
    is_leaf = np.asarray(node_data["is_leaf"], dtype=bool)
    if not (is_leaf[n_internal:].all() and not is_leaf[:n_internal].any()):
        raise ConversionError(
            f"{type(model).__name__}'s {method} is not a complete binary tree; refit it with "
            "algorithm='brute'"
        )
    depth = int(np.log2(n_nodes + 1)) - 1
    leaves = np.arange(n_internal, n_nodes)
    ancestors = np.zeros((depth, len(leaves)), dtype=np.int64)
    left = np.zeros((depth, len(leaves)), dtype=np.float64)
    node = leaves.copy()
    for level in range(depth - 1, -1, -1):
        parent = (node - 1) // 2
        ancestors[level] = parent
        left[level] = (node == 2 * parent + 1).astype(np.float64)
        node = parent
    n_train = len(idx_array)
    counts = (node_data["idx_end"] - node_data["idx_start"])[leaves]
    span = int(counts.max())
    rows_by_leaf = np.full((len(leaves), span), n_train, dtype=np.int64)
    for leaf_index, node_index in enumerate(leaves):
        start, end = int(node_data["idx_start"][node_index]), int(node_data["idx_end"][node_index])
        rows_by_leaf[leaf_index, : end - start] = idx_array[start:end]
    return _Tree(
        kind=method,
        low=np.asarray(bounds[0], dtype=np.float64),
        high=np.asarray(bounds[1] if method == "kd_tree" else bounds[0], dtype=np.float64),
        radius=np.asarray(node_data["radius"], dtype=np.float64),
        ancestors=ancestors,
        left=left,
        rows_by_leaf=rows_by_leaf,
        span=span,
        first_leaves=int(np.searchsorted(np.cumsum(np.sort(counts)), k) + 1),
    )


class _Body(SubgraphBody):
    """The ``Scan`` body under construction, with the training set's size its parts read."""

    def __init__(self, prefix: str, opset: int) -> None:
        super().__init__(prefix, opset)
        self.n_train = 0
        self.n_features = 0


def _take(body: _Body, data: str, index: str) -> str:
    """``data[i, index[i, j]]`` for ``[B, W]`` data and ``[B, J]`` indices (GatherElements on
    axis 1, written as one Gather on the flattened data: onnx.reference's GatherElements fails
    beyond 64 columns)."""
    shape = body.node("Shape", [data])
    rows = body.node("Gather", [shape, body.const(0, np.int64)], axis=0)
    width = body.node("Gather", [shape, body.const(1, np.int64)], axis=0)
    start = body.node("Range", [body.const(0, np.int64), rows, body.const(1, np.int64)])
    offsets = body.node("Mul", [body.node("Unsqueeze", [start, body.const([1], np.int64)]), width])
    flat = body.node("Reshape", [data, body.const([-1], np.int64)])
    return body.node("Gather", [flat, body.node("Add", [index, offsets])], axis=0)


def _column(body: _Body, data: str, index: str) -> str:
    """``data[i, index[i, 0]]`` as ``[B, 1]``: one GatherElements (onnx.reference runs it for a
    single column whatever the width, unlike :func:`_take`'s case)."""
    return body.node("GatherElements", [data, index], axis=1)


def _reduced(body: _Body, x: str, points: np.ndarray, p: float) -> str:
    """``[B, F] -> [B, P]``: scikit-learn's reduced distance to each row of ``points``, summed
    feature by feature in scikit-learn's order (so equal rows give equal sums).

    Euclidean, manhattan and chebyshev go through one ``[B, P, F]`` difference and
    ``ReduceSumSquare`` / ``ReduceL1`` / ``ReduceMax``, which ONNX Runtime sums along the last
    axis in order (the same float64 numbers as scikit-learn's loop; a test checks it); other
    exponents add one feature at a time.
    """
    if p in (1.0, 2.0) or np.isinf(p):
        rows = body.node("Unsqueeze", [x, body.const([1], np.int64)])  # [B, 1, F]
        diff = body.node("Sub", [rows, body.const(points[np.newaxis])])  # [B, P, F]
        axis = body.const([2], np.int64)
        if p == 2.0:
            return body.node("ReduceSumSquare", [diff, axis], keepdims=0)
        if p == 1.0:
            return body.node("ReduceL1", [diff, axis], keepdims=0)
        return body.node("ReduceMax", [body.node("Abs", [diff]), axis], keepdims=0)
    total = ""
    for feature in range(points.shape[1]):
        column = body.node(
            "Slice",
            [
                x,
                body.const([feature], np.int64),
                body.const([feature + 1], np.int64),
                body.const([1], np.int64),
            ],
        )
        diff = body.node("Sub", [column, body.const(points[:, feature].reshape(1, -1))])
        if p == 2.0:
            term = body.node("Mul", [diff, diff])
        elif p == 1.0 or np.isinf(p):
            term = body.node("Abs", [diff])
        else:
            term = body.node("Pow", [body.node("Abs", [diff]), body.const(p)])
        if not total:
            total = term  # 0.0 + term is term exactly
        elif np.isinf(p):
            total = body.node("Max", [total, term])
        else:
            total = body.node("Add", [total, term])
    return total


def _expanded_euclidean(model: Any) -> bool:
    """Whether scikit-learn's brute search ranks rows by ``|x|² - 2x·y + |y|²`` (its euclidean
    ``ArgKmin``: the euclidean metric, or minkowski with p=2, on dense rows)."""
    return getattr(model, "effective_metric_", None) in ("euclidean", "sqeuclidean") or (
        getattr(model, "effective_metric_", None) == "minkowski"
        and float((getattr(model, "effective_metric_params_", None) or {}).get("p", 2)) == 2.0
    )


def _row_norms(points: np.ndarray) -> np.ndarray:
    """``|y|²`` of each training row, computed by scikit-learn's own routine where it has one
    (so the numbers are the ones its search adds), else row by row."""
    try:
        from sklearn.metrics._pairwise_distances_reduction._dispatcher import (
            sqeuclidean_row_norms,
        )
    except ImportError:
        return np.einsum("ij,ij->i", points, points)
    return np.asarray(sqeuclidean_row_norms(points, num_threads=1), dtype=np.float64)


def _expanded(body: _Body, x: str, points: np.ndarray) -> str:
    """``[B, F] -> [B, P]``: the squared euclidean distance as scikit-learn's brute search
    computes it, ``max((|x|² + (-2 x·yᵀ)) + |y|², 0)``: the middle term one matrix product (each
    entry summed over the features in order, as BLAS's kernels sum it), so rows that tie for
    scikit-learn tie here and rounding breaks near-ties the same way."""
    middle = body.node(
        "Mul", [body.node("MatMul", [x, body.const(points.T.copy())]), body.const(-2.0)]
    )
    norms = body.node("ReduceSumSquare", [x, body.const([1], np.int64)], keepdims=1)
    total = body.node(
        "Add",
        [body.node("Add", [norms, middle]), body.const(_row_norms(points).reshape(1, -1))],
    )
    return body.node("Max", [total, body.const(0.0)])


def _rdist_to_dist(body: _Body, rdist: str, p: float) -> str:
    if p == 2.0:
        return body.node("Sqrt", [rdist])
    if p == 1.0 or np.isinf(p):
        return rdist
    return body.node("Pow", [rdist, body.const(1.0 / p)])


def _dist_to_rdist(body: _Body, dist: str, p: float) -> str:
    if p == 2.0:
        return body.node("Mul", [dist, dist])
    if p == 1.0 or np.isinf(p):
        return dist
    return body.node("Pow", [dist, body.const(p)])


def _node_bounds(body: _Body, x: str, tree: _Tree, p: float) -> str:
    """``[B, F] -> [B, n_nodes]``: scikit-learn's ``min_rdist`` from each query row to each
    node (the tree's own formula, feature by feature)."""
    if tree.kind == "ball_tree":
        dist = _rdist_to_dist(body, _reduced(body, x, tree.low, p), p)
        gap = body.node("Sub", [dist, body.const(tree.radius.reshape(1, -1))])
        return _dist_to_rdist(body, body.node("Max", [gap, body.const(0.0)]), p)
    half = body.const(0.5)
    total = ""
    for feature in range(tree.low.shape[1]):
        column = body.node(
            "Slice",
            [
                x,
                body.const([feature], np.int64),
                body.const([feature + 1], np.int64),
                body.const([1], np.int64),
            ],
        )
        d_lo = body.node("Sub", [body.const(tree.low[:, feature].reshape(1, -1)), column])
        d_hi = body.node("Sub", [column, body.const(tree.high[:, feature].reshape(1, -1))])
        d = body.node(
            "Add",
            [
                body.node("Add", [d_lo, body.node("Abs", [d_lo])]),
                body.node("Add", [d_hi, body.node("Abs", [d_hi])]),
            ],
        )
        gap = body.node("Mul", [half, d])
        if np.isinf(p):
            total = body.node("Max", [total, gap]) if total else gap
            continue
        term = body.node("Pow", [gap, body.const(p)])
        total = body.node("Add", [total, term]) if total else term
    return total


def _visit_order(body: _Body, x: str, tree: _Tree, p: float) -> tuple[str, str | None]:
    """``[B, F] -> [B, L]``: the rank at which the tree's depth-first query visits each leaf
    (nearer child first, ``<=`` going left, as scikit-learn), and the node bounds
    ``[B, n_nodes]`` (None for a tree of one leaf)."""
    depth, n_leaves = tree.ancestors.shape
    if depth == 0:
        zero = body.node("Mul", [body.node("Slice", [x, *_span(body, 0, 1)]), body.const(0.0)])
        return zero, None
    bounds = _node_bounds(body, x, tree, p)
    n_internal = n_leaves - 1
    children = np.arange(n_internal)
    left_first = body.node(
        "Cast",
        [
            body.node(
                "LessOrEqual",
                [
                    body.node("Gather", [bounds, body.const(2 * children + 1, np.int64)], axis=1),
                    body.node("Gather", [bounds, body.const(2 * children + 2, np.int64)], axis=1),
                ],
            )
        ],
        to=TensorProto.DOUBLE,
    )
    on_path = body.node(
        "Gather", [left_first, body.const(tree.ancestors.ravel(), np.int64)], axis=1
    )
    # The child on the path is visited second when it is not the one visited first.
    second = body.node("Abs", [body.node("Sub", [on_path, body.const(tree.left.reshape(1, -1))])])
    weights = (2.0 ** np.arange(depth - 1, -1, -1)).reshape(-1, 1) * np.ones((1, n_leaves))
    ranked = body.node("Mul", [second, body.const(weights.reshape(1, -1))])
    shaped = body.node("Reshape", [ranked, body.const([0, depth, n_leaves], np.int64)])
    return body.node("ReduceSum", [shaped, body.const([1], np.int64)], keepdims=0), bounds


def _span(body: _Body, start: int, end: int) -> list[str]:
    """Slice inputs for columns ``start:end``."""
    return [body.const([start], np.int64), body.const([end], np.int64), body.const([1], np.int64)]


def _sequence(body: _Body, rdist: str, k: int) -> tuple[str, str]:
    """``[B, W]`` reduced distances and training indices of every row that scikit-learn's
    brute-force heap can accept, in training order.

    A row is accepted only while fewer than k rows before it are as near. So with ``S`` the
    ``c`` nearest rows, a row outside ``S`` can only be accepted before the k-th row of ``S``:
    the sequence is every row up to that point, then the rest of ``S`` (in training order).
    """
    n_train = int(body.n_train)
    c = int(min(n_train, max(4 * k, CANDIDATES)))
    inf = body.const(np.inf)
    near_rdist, near = body.node(
        "TopK", [rdist, body.const([c], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    kth_rows, _ = body.node(
        "TopK", [near, body.const([k], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    latest = body.node(
        "ReduceMax", [body.node("Slice", [kth_rows, *_span(body, k - 1, k)])], keepdims=0
    )
    end = body.node(
        "Reshape", [body.node("Add", [latest, body.const(1, np.int64)]), body.const([1], np.int64)]
    )  # [1]: past the latest k-th row of S in the block
    first_ids = body.node(
        "Slice",
        [
            body.const(np.arange(n_train).reshape(1, -1), np.int64),
            body.const([0], np.int64),
            end,
            body.const([1], np.int64),
        ],
    )  # [1, P]
    first = body.node("Slice", [rdist, body.const([0], np.int64), end, body.const([1], np.int64)])
    first_ids = body.node("Expand", [first_ids, body.node("Shape", [first])])
    seen = body.node("Less", [near, end])
    later_rows = body.node("Where", [seen, body.const(np.iinfo(np.int64).max, np.int64), near])
    later_ids, later = body.node(
        "TopK", [later_rows, body.const([c], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    later_rdist = body.node(
        "Where",
        [
            _take(body, seen, later),
            inf,
            _take(body, near_rdist, later),
        ],
    )
    later_ids = _take(body, near, later)
    return (
        body.node("Concat", [first, later_rdist], axis=1),
        body.node("Concat", [first_ids, later_ids], axis=1),
    )


def _gathered_reduced(body: _Body, x: str, train: str, ids: str, p: float) -> str:
    """``[B, F], [M + 1, F], [B, W] -> [B, W]``: reduced distances to the training rows ``ids``
    (row M is the padding row, at +inf)."""
    points = body.node("Gather", [train, ids], axis=0)  # [B, W, F]
    diff = body.node("Sub", [body.node("Unsqueeze", [x, body.const([1], np.int64)]), points])
    axis = body.const([2], np.int64)
    if p == 2.0:
        return body.node("ReduceSumSquare", [diff, axis], keepdims=0)
    if p == 1.0:
        return body.node("ReduceL1", [diff, axis], keepdims=0)
    if np.isinf(p):
        return body.node("ReduceMax", [body.node("Abs", [diff]), axis], keepdims=0)
    total = ""
    for feature in range(int(body.n_features)):
        column = body.node(
            "Squeeze",
            [
                body.node(
                    "Slice",
                    [
                        diff,
                        body.const([feature], np.int64),
                        body.const([feature + 1], np.int64),
                        body.const([2], np.int64),
                    ],
                ),
                axis,
            ],
        )
        term = body.node("Pow", [body.node("Abs", [column]), body.const(p)])
        total = body.node("Add", [total, term]) if total else term
    return total


def _tree_sequence(
    body: _Body, x: str, train: str, tree: _Tree, k: int, p: float
) -> tuple[str, str]:
    """``[B, W]`` reduced distances and training indices of every row a tree query can accept,
    in the order it visits them: the rows of the leaves it cannot prune.

    The first leaves visited (enough to hold k rows) give an upper bound U of the k-th distance;
    a leaf whose bounding box (ball) is farther than U holds no neighbour and is visited, if at
    all, once k rows at most U away are in the heap, so none of its rows is accepted.
    """
    leaf_rank, bounds = _visit_order(body, x, tree, p)
    n_leaves = tree.rows_by_leaf.shape[0]
    zeros = body.node(
        "Cast", [body.node("Mul", [leaf_rank, body.const(0.0)])], to=TensorProto.INT64
    )
    order = body.node(
        "ScatterElements",
        [
            zeros,
            body.node("Cast", [leaf_rank], to=TensorProto.INT64),
            body.node("Add", [zeros, body.const(np.arange(n_leaves).reshape(1, -1), np.int64)]),
        ],
        axis=1,
    )  # [B, L]: the leaves in visiting order
    table = body.const(tree.rows_by_leaf, np.int64)
    first_leaves = body.node("Slice", [order, *_span(body, 0, tree.first_leaves)])
    first_ids = body.node(
        "Reshape",
        [body.node("Gather", [table, first_leaves], axis=0), body.const([0, -1], np.int64)],
    )
    first = _gathered_reduced(body, x, train, first_ids, p)
    nearest, _ = body.node(
        "TopK", [first, body.const([k], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    upper = body.node("Slice", [nearest, *_span(body, k - 1, k)])  # [B, 1]
    if bounds is None:
        return first, first_ids
    n_internal = n_leaves - 1
    leaf_bounds = body.node("Slice", [bounds, *_span(body, n_internal, n_internal + n_leaves)])
    first_ones = body.node("Less", [leaf_rank, body.const(float(tree.first_leaves))])
    keep = body.node("Or", [body.node("LessOrEqual", [leaf_bounds, upper]), first_ones])
    count = _row_max_count(body, keep)
    key = body.node("Where", [keep, leaf_rank, body.const(np.inf)])
    _, kept = body.node("TopK", [key, count], n_out=2, axis=1, largest=0, sorted=1)
    # Past the first leaves the heap holds k rows at most U away: only nearer rows can enter.
    later_leaves = body.node(
        "Slice",
        [kept, body.const([tree.first_leaves], np.int64), count, body.const([1], np.int64)],
    )
    later_ids = body.node(
        "Reshape",
        [body.node("Gather", [table, later_leaves], axis=0), body.const([0, -1], np.int64)],
    )
    later = _gathered_reduced(body, x, train, later_ids, p)
    nearer = body.node("Less", [later, upper])
    columns = body.node(
        "Cast",
        [
            body.node(
                "CumSum",
                [
                    body.node("Cast", [body.node("Equal", [later, later])], to=TensorProto.INT64),
                    body.const(1, np.int64),
                ],
            )
        ],
        to=TensorProto.DOUBLE,
    )  # 1, 2, ... along each row: the visiting order of the later rows
    _, picked = body.node(
        "TopK",
        [body.node("Where", [nearer, columns, body.const(np.inf)]), _row_max_count(body, nearer)],
        n_out=2,
        axis=1,
        largest=0,
        sorted=1,
    )
    picked_rdist = body.node(
        "Where",
        [
            _take(body, nearer, picked),
            _take(body, later, picked),
            body.const(np.inf),
        ],
    )
    return (
        body.node("Concat", [first, picked_rdist], axis=1),
        body.node("Concat", [first_ids, _take(body, later_ids, picked)], axis=1),
    )


def _row_max_count(body: _Body, flags: str) -> str:
    """``[B, W]`` booleans -> ``[1]``: the most True any row has."""
    per_row = body.node(
        "ReduceSum",
        [body.node("Cast", [flags], to=TensorProto.INT64), body.const([1], np.int64)],
        keepdims=0,
    )
    return body.node(
        "Reshape", [body.node("ReduceMax", [per_row], keepdims=0), body.const([1], np.int64)]
    )


def _heap(body: _Body, values: str, ids: str, k: int) -> tuple[str, str]:
    """scikit-learn's ``heap_push`` of each column of ``values`` / ``ids`` ``[B, W]``, in
    order, into a max-heap of size k per row; returns the heap ``([B, k], [B, k])``.

    A column no nearer than the heap's root leaves the heap as it is, so each step jumps, in
    every row, to the next column nearer than its root; the loop ends when no row has one.
    """
    loop = _Body(body.name("heap"), body.opset)
    step, cond = loop.name("step"), loop.name("cond")
    heap_in, ids_in, seen_in = loop.name("heap"), loop.name("ids"), loop.name("seen")
    columns = body.node(
        "Unsqueeze",
        [
            body.node(
                "Range",
                [
                    body.const(0, np.int64),
                    body.node(
                        "Gather", [body.node("Shape", [values]), body.const(1, np.int64)], axis=0
                    ),
                    body.const(1, np.int64),
                ],
            ),
            body.const([0], np.int64),
        ],
    )  # [1, W]
    root = loop.node("Slice", [heap_in, *_span(loop, 0, 1)])
    ahead = loop.node(
        "And", [loop.node("Greater", [columns, seen_in]), loop.node("Less", [values, root])]
    )
    flags = loop.node("Cast", [ahead], to=TensorProto.FLOAT)
    accept = loop.node(
        "Equal",
        [
            loop.node("ReduceMax", [flags, loop.const([1], np.int64)], keepdims=1),
            loop.const(1.0, np.float32),
        ],
    )
    at = loop.node("ArgMax", [flags], axis=1, keepdims=1, select_last_index=0)  # [B, 1]
    val = _column(loop, values, at)
    idx = _column(loop, ids, at)
    seen_out = loop.node(
        "Where", [accept, at, loop.node("Add", [seen_in, loop.const(0, np.int64)])]
    )
    cond_out = loop.node("Cast", [loop.node("ReduceMax", [flags], keepdims=0)], to=TensorProto.BOOL)
    cur = loop.node("Sub", [idx, idx])  # the root, for every row
    active = accept
    heap, where = heap_in, ids_in
    level = 0
    while 2 ** (level + 1) - 1 < k:  # some node of this level has a child
        left = loop.node(
            "Add", [loop.node("Mul", [cur, loop.const(2, np.int64)]), loop.const(1, np.int64)]
        )
        right = loop.node("Add", [left, loop.const(1, np.int64)])
        last = loop.const(k - 1, np.int64)
        v_left = _column(loop, heap, loop.node("Min", [left, last]))
        v_right = _column(loop, heap, loop.node("Min", [right, last]))
        has_left = loop.node("Less", [left, loop.const(k, np.int64)])
        has_right = loop.node("Less", [right, loop.const(k, np.int64)])
        left_ge = loop.node("GreaterOrEqual", [v_left, v_right])
        only_left = loop.node("And", [has_left, loop.node("Not", [has_right])])
        go_left = loop.node(
            "Or",
            [
                loop.node("And", [only_left, loop.node("Greater", [v_left, val])]),
                loop.node(
                    "And",
                    [loop.node("And", [has_right, left_ge]), loop.node("Less", [val, v_left])],
                ),
            ],
        )
        go_right = loop.node(
            "And",
            [
                loop.node("And", [has_right, loop.node("Not", [left_ge])]),
                loop.node("Less", [val, v_right]),
            ],
        )
        move = loop.node("And", [active, loop.node("Or", [go_left, go_right])])
        child = loop.node("Where", [go_left, left, loop.node("Min", [right, last])])
        child = loop.node("Where", [move, child, cur])
        heap = loop.node(
            "ScatterElements",
            [heap, cur, _column(loop, heap, child)],
            axis=1,
        )
        where = loop.node(
            "ScatterElements",
            [where, cur, _column(loop, where, child)],
            axis=1,
        )
        cur, active = child, move
        level += 1
    kept = loop.node("Where", [accept, val, _column(loop, heap, cur)])
    kept_id = loop.node("Where", [accept, idx, _column(loop, where, cur)])
    heap_out = loop.node("ScatterElements", [heap, cur, kept], axis=1)
    ids_out = loop.node("ScatterElements", [where, cur, kept_id], axis=1)
    graph = helper.make_graph(
        loop.nodes,
        loop.prefix,
        [
            helper.make_tensor_value_info(step, TensorProto.INT64, []),
            helper.make_tensor_value_info(cond, TensorProto.BOOL, []),
            helper.make_tensor_value_info(heap_in, TensorProto.DOUBLE, None),
            helper.make_tensor_value_info(ids_in, TensorProto.INT64, None),
            helper.make_tensor_value_info(seen_in, TensorProto.INT64, None),
        ],
        [
            helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_value_info(heap_out, TensorProto.DOUBLE, None),
            helper.make_tensor_value_info(ids_out, TensorProto.INT64, None),
            helper.make_tensor_value_info(seen_out, TensorProto.INT64, None),
        ],
    )
    first = body.node("Slice", [values, *_span(body, 0, k)])
    # An empty heap: +inf everywhere (not values * 0 + inf: a padding +inf would give NaN).
    start_heap = body.node("Expand", [body.const([[np.inf]]), body.node("Shape", [first])])
    start_ids = body.node(
        "Sub",
        [
            body.node("Slice", [ids, *_span(body, 0, k)]),
            body.node("Slice", [ids, *_span(body, 0, k)]),
        ],
    )
    start_seen = body.node(
        "Sub", [body.node("Slice", [start_ids, *_span(body, 0, 1)]), body.const(1, np.int64)]
    )
    final_heap, final_ids, _ = body.node(
        "Loop", ["", body.const(True, bool), start_heap, start_ids, start_seen], n_out=3, body=graph
    )
    # Sorted as scikit-learn returns them: ascending distances.
    ordered, position = body.node(
        "TopK", [final_heap, body.const([k], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    return ordered, _take(body, final_ids, position)


def reduced_to_distance(g: Graph, rdist: str, model: Any) -> str:
    """``[N, k]`` reduced distances -> distances (scikit-learn's ``_rdist_to_dist``)."""
    p = metric_p(model)
    if p == 2.0:
        return g.node("Sqrt", [rdist])
    if p == 1.0 or np.isinf(p):
        return rdist
    return g.node("Pow", [rdist, g.const(1.0 / p, dtype=np.float64)])


def kneighbors(g: Graph, model: Any, x: str, k: int) -> tuple[str, str]:
    """Add the search to the graph: ``[N, F] -> (reduced distances [N, k] float64 ascending,
    indices [N, k] int64)``.

    Raises:
        ConversionError: a metric or search the graph does not reproduce, or ``k`` larger than
            the training set.
    """
    check_k(model, k)
    p = metric_p(model)
    train = np.asarray(model._fit_X, dtype=np.float64)
    tree = _tree(model, k)
    n_train, n_features = train.shape
    rows = block_rows(n_train, n_features)

    prefix = g.name("knn_block")
    body = _Body(prefix, g.opset)
    block = body.name("rows")
    body.n_train, body.n_features = n_train, n_features
    if tree is None and _expanded_euclidean(model):
        sequence, sequence_ids = _sequence(body, _expanded(body, block, train), k)
    elif tree is None:
        sequence, sequence_ids = _sequence(body, _reduced(body, block, train, p), k)
    else:
        # Row M (no training row) pads the leaves: at +inf it is never accepted.
        leaf_pad = np.vstack([train, np.full((1, n_features), np.inf)])
        sequence, sequence_ids = _tree_sequence(body, block, body.const(leaf_pad), tree, k, p)
    values, indices = _heap(body, sequence, sequence_ids, k)
    out_values = body.node("Identity", [values])
    out_indices = body.node("Identity", [indices])
    graph = helper.make_graph(
        body.nodes,
        prefix,
        [helper.make_tensor_value_info(block, TensorProto.DOUBLE, [rows, n_features])],
        [
            helper.make_tensor_value_info(out_values, TensorProto.DOUBLE, [rows, k]),
            helper.make_tensor_value_info(out_indices, TensorProto.INT64, [rows, k]),
        ],
    )

    x64 = g.node("Cast", [x], to=TensorProto.DOUBLE)
    n = g.node("Shape", [x64], start=0, end=1)
    block_size = g.int64([rows])
    # Rows to pad so that N becomes a multiple of the block: (B - N mod B) mod B.
    missing = g.node(
        "Mod", [g.node("Sub", [block_size, g.node("Mod", [n, block_size])]), block_size]
    )
    pads = g.node("Concat", [g.int64([0, 0]), missing, g.int64([0])], axis=0)
    padded = g.node("Pad", [x64, pads])
    blocks = g.node("Reshape", [padded, g.int64([-1, rows, n_features])])
    scanned_values, scanned_indices = g.name("knn_rdist"), g.name("knn_index")
    g.container.add_node(
        "Scan",
        [blocks],
        [scanned_values, scanned_indices],
        name=g.scope.get_unique_operator_name("Scan"),
        body=graph,
        num_scan_inputs=1,
    )
    start, axis = g.int64([0]), g.int64([0])
    flat_values = g.node("Reshape", [scanned_values, g.int64([-1, k])])
    flat_indices = g.node("Reshape", [scanned_indices, g.int64([-1, k])])
    return (
        g.node("Slice", [flat_values, start, n, axis]),
        g.node("Slice", [flat_indices, start, n, axis]),
    )
