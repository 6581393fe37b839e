"""The k nearest training rows of every query row, as scikit-learn finds them, in bounded memory.

Not a converter module (it registers nothing): :func:`kneighbors` is the search the k-neighbours
converters share (KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors).

``[N, F] -> reduced distances [N, k]`` (float64, ascending) ``and indices [N, k]`` (int64).

- **Exact distances.** scikit-learn compares *reduced* distances (``sum (x - y)^2`` for
  euclidean, ``sum |x - y|`` for manhattan, ``sum |x - y|^p`` for minkowski, ``max |x - y|`` for
  chebyshev), summed feature after feature in float64. The graph does the same, one feature at
  a time in the same order, so every reduced distance is the same float64 number as
  scikit-learn's: duplicate training rows give bit-identical distances, distinct ones stay
  distinct (no ``|x|^2 - 2 x.y + |y|^2`` expansion, no float32).
- **Ties broken as scikit-learn meets the rows.** scikit-learn keeps the k nearest rows in a
  heap that refuses a row no nearer than the farthest kept one, so among rows at the k-th
  distance the first ones it *visits* are kept. ``algorithm="brute"`` visits the training rows
  in their order; a KD tree or ball tree visits its leaves depth first, the child whose bounding
  box (ball) is nearer to the query first, and the rows of a leaf in the tree's order. The graph
  computes that visiting order for every query row (the same node bounds, in the same float64
  arithmetic) and keeps, at the k-th distance, the rows visited first.
- **Bounded memory.** Query rows go through a ``Scan`` in blocks of ``B`` rows (the last block
  padded), so the largest tensor is ``[B, M]`` for ``M`` training rows, whatever ``N``:
  ``B = clamp(BLOCK_ELEMENTS // M, 1, MAX_BLOCK_ROWS)``.

What cannot be reproduced: when a row strictly nearer than the k-th distance is visited *after*
the heap is full (it then evicts one of the tied rows, chosen by the heap's layout), and
scikit-learn's brute search on few query rows (``algorithm="brute"``, more than 256 training
rows, at most ``1024 x threads`` query rows, and not KNeighborsClassifier's uniform vote) splits
the training rows between threads and merges the heaps. Both change the answer only when the
tied rows disagree (labels, targets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxbridge.convert.converters._graph import _AXES_AS_INPUT, Graph
from onnxbridge.convert.converters.neighbors_radius import metric_p
from onnxbridge.errors import ConversionError

__all__ = [
    "BLOCK_ELEMENTS",
    "MAX_BLOCK_ROWS",
    "block_rows",
    "check_k",
    "kneighbors",
    "reduced_to_distance",
]

# Elements of one [B, M] float64 block tensor: 2**22 is 32 MB; a few are alive at once.
BLOCK_ELEMENTS = 2**22
MAX_BLOCK_ROWS = 1024
# Nearest rows taken as candidates (at least 4 k): more makes the heap's sequence start shorter.
CANDIDATES = 256


def block_rows(n_train: int) -> int:
    """Query rows per block for ``n_train`` training rows."""
    return int(min(MAX_BLOCK_ROWS, max(1, BLOCK_ELEMENTS // max(1, n_train))))


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
        leaf_of_row: ``[M]`` the leaf (0..L-1) holding each training row.
        position: ``[M]`` each training row's position inside its leaf.
        rows_by_leaf: ``[L, span]`` the training rows of each leaf in the tree's order, padded
            with M (no row).
        span: more than any leaf's size.
    """

    kind: str
    low: np.ndarray
    high: np.ndarray
    radius: np.ndarray
    ancestors: np.ndarray
    left: np.ndarray
    leaf_of_row: np.ndarray
    position: np.ndarray
    rows_by_leaf: np.ndarray
    span: int


def _tree(model: Any) -> _Tree | None:
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
    leaf_of_row = np.zeros(n_train, dtype=np.int64)
    position = np.zeros(n_train, dtype=np.float64)
    for leaf_index, node_index in enumerate(leaves):
        start, end = int(node_data["idx_start"][node_index]), int(node_data["idx_end"][node_index])
        rows = np.asarray(idx_array[start:end])
        leaf_of_row[rows] = leaf_index
        position[rows] = np.arange(end - start)
    span = int((node_data["idx_end"] - node_data["idx_start"])[leaves].max()) + 1
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
        leaf_of_row=leaf_of_row,
        position=position,
        rows_by_leaf=rows_by_leaf,
        span=span,
    )


class _Body:
    """The ``Scan`` body under construction: nodes and ``Constant`` nodes, opset-aware."""

    def __init__(self, prefix: str, opset: int) -> None:
        self.prefix = prefix
        self.opset = opset
        self.nodes: list[Any] = []
        self.count = 0
        self.n_train = 0
        self._ints: dict[str, list[int]] = {}

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}_{hint}_{self.count}"

    def const(self, value: Any, dtype: Any = np.float64) -> str:
        out = self.name("c")
        array = np.asarray(value, dtype=dtype)
        self.nodes.append(
            helper.make_node("Constant", [], [out], value=numpy_helper.from_array(array, out))
        )
        if array.dtype == np.int64:
            self._ints[out] = array.ravel().tolist()
        return out

    def node(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        outputs = [self.name(op_type.lower()) for _ in range(n_out)]
        since = _AXES_AS_INPUT.get(op_type)
        if since is not None and self.opset < since and len(inputs) == 2:
            attrs = {**attrs, "axes": self._ints[inputs[1]]}
            inputs = inputs[:1]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, **attrs))
        return outputs[0] if n_out == 1 else outputs


def _reduced(body: _Body, x: str, points: np.ndarray, p: float) -> str:
    """``[B, F] -> [B, P]``: scikit-learn's reduced distance to each row of ``points``, summed
    feature by feature in scikit-learn's order (so equal rows give equal sums)."""
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


def _visit_order(body: _Body, x: str, tree: _Tree, p: float) -> tuple[str, str]:
    """``[B, F] -> ([B, M], [B, L])``: where the tree's depth-first query visits each training
    row (``leaf rank * span + position in the leaf``; nearer child first, ``<=`` going left, as
    scikit-learn) and the rank of each leaf."""
    position = body.const(tree.position.reshape(1, -1))
    depth, n_leaves = tree.ancestors.shape
    if depth == 0:
        zero = body.node("Mul", [body.node("Slice", [x, *_span(body, 0, 1)]), body.const(0.0)])
        return body.node("Add", [zero, position]), zero
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
    leaf_rank = body.node("ReduceSum", [shaped, body.const([1], np.int64)], keepdims=0)
    per_row = body.node("Gather", [leaf_rank, body.const(tree.leaf_of_row, np.int64)], axis=1)
    scaled = body.node("Mul", [per_row, body.const(float(tree.span))])
    return body.node("Add", [scaled, position]), leaf_rank


def _span(body: _Body, start: int, end: int) -> list[str]:
    """Slice inputs for columns ``start:end``."""
    return [body.const([start], np.int64), body.const([end], np.int64), body.const([1], np.int64)]


def _sequence(
    body: _Body, rdist: str, k: int, tree: _Tree | None, key: str | None, leaf_rank: str | None
) -> tuple[str, str]:
    """``[B, W]`` reduced distances and training indices of every row that scikit-learn's heap
    can accept, in the order its search visits them (padding: index M, distance +inf).

    A row is accepted only while fewer than k rows visited before it are as near. So with
    ``S`` the ``c`` nearest rows, a row outside ``S`` can only be accepted before the k-th row
    of ``S`` is visited: the sequence is every row visited before that point (in visiting
    order), then the rest of ``S`` (in visiting order).
    """
    n_train = int(body.n_train)
    c = int(min(n_train, max(4 * k, CANDIDATES)))
    inf = body.const(np.inf)
    near_rdist, near = body.node(
        "TopK", [rdist, body.const([c], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    if tree is None:
        near_key = body.node("Cast", [near], to=TensorProto.DOUBLE)  # the training order
    else:
        near_key = body.node("GatherElements", [key, near], axis=1)
    kth_keys, _ = body.node(
        "TopK", [near_key, body.const([k], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    kth_key = body.node("Slice", [kth_keys, *_span(body, k - 1, k)])
    last = body.node("ReduceMax", [kth_key], keepdims=0)  # the latest k-th visit of the block
    end = body.node("Cast", [body.node("Add", [last, body.const(1.0)])], to=TensorProto.INT64)
    padded = body.node("Concat", [rdist, body.node("Add", [kth_key, inf])], axis=1)  # [B, M+1]
    if tree is None:
        ids = body.node(
            "Slice",
            [
                body.const(np.arange(n_train), np.int64),
                body.const([0], np.int64),
                body.node("Reshape", [end, body.const([1], np.int64)]),
                body.const([0], np.int64),
            ],
        )
        first_ids = body.node(
            "Expand",
            [
                body.node("Unsqueeze", [ids, body.const([0], np.int64)]),
                body.node("Shape", [body.node("Gather", [rdist, ids], axis=1)]),
            ],
        )
        covered = body.node("Cast", [end], to=TensorProto.DOUBLE)
    else:
        span = int(tree.span)
        n_leaves = body.node(
            "Div",
            [body.node("Add", [end, body.const(span - 1, np.int64)]), body.const(span, np.int64)],
        )
        order = body.node(
            "ScatterElements",
            [
                body.node(
                    "Cast", [body.node("Mul", [leaf_rank, body.const(0.0)])], to=TensorProto.INT64
                ),
                body.node("Cast", [leaf_rank], to=TensorProto.INT64),
                body.node(
                    "Add",
                    [
                        body.node(
                            "Cast",
                            [body.node("Mul", [leaf_rank, body.const(0.0)])],
                            to=TensorProto.INT64,
                        ),
                        body.const(np.arange(tree.ancestors.shape[1]).reshape(1, -1), np.int64),
                    ],
                ),
            ],
            axis=1,
        )  # [B, L]: the leaves in visiting order
        first_leaves = body.node(
            "Slice",
            [
                order,
                body.const([0], np.int64),
                body.node("Reshape", [n_leaves, body.const([1], np.int64)]),
                body.const([1], np.int64),
            ],
        )
        first_ids = body.node(
            "Reshape",
            [
                body.node(
                    "Gather", [body.const(tree.rows_by_leaf, np.int64), first_leaves], axis=0
                ),
                body.const([0, -1], np.int64),
            ],
        )
        covered = body.node(
            "Cast",
            [body.node("Mul", [n_leaves, body.const(span, np.int64)])],
            to=TensorProto.DOUBLE,
        )
    first = body.node("GatherElements", [padded, first_ids], axis=1)
    # The rest of S, in visiting order; rows of S already in the first part are dropped.
    seen = body.node("Less", [near_key, covered])
    later_key = body.node("Where", [seen, inf, near_key])
    _, later = body.node(
        "TopK", [later_key, body.const([c], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    later_ids = body.node("GatherElements", [near, later], axis=1)
    later_rdist = body.node(
        "Where",
        [
            body.node("GatherElements", [seen, later], axis=1),
            inf,
            body.node("GatherElements", [near_rdist, later], axis=1),
        ],
    )
    return (
        body.node("Concat", [first, later_rdist], axis=1),
        body.node("Concat", [first_ids, later_ids], axis=1),
    )


def _heap(body: _Body, values: str, ids: str, k: int) -> tuple[str, str]:
    """scikit-learn's ``heap_push`` of each column of ``values`` / ``ids`` ``[B, W]``, in
    order, into a max-heap of size k per row; returns the heap ``([B, k], [B, k])``."""
    loop = _Body(body.name("heap"), body.opset)
    step, cond = loop.name("step"), loop.name("cond")
    heap_in, ids_in = loop.name("heap"), loop.name("ids")
    at = loop.node("Unsqueeze", [step, loop.const([0], np.int64)])
    val = loop.node("Gather", [values, at], axis=1)  # [B, 1]
    idx = loop.node("Gather", [ids, at], axis=1)
    accept = loop.node("Less", [val, loop.node("Slice", [heap_in, *_span(loop, 0, 1)])])
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
        v_left = loop.node("GatherElements", [heap, loop.node("Min", [left, last])], axis=1)
        v_right = loop.node("GatherElements", [heap, loop.node("Min", [right, last])], axis=1)
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
            [heap, cur, loop.node("GatherElements", [heap, child], axis=1)],
            axis=1,
        )
        where = loop.node(
            "ScatterElements",
            [where, cur, loop.node("GatherElements", [where, child], axis=1)],
            axis=1,
        )
        cur, active = child, move
        level += 1
    kept = loop.node("Where", [accept, val, loop.node("GatherElements", [heap, cur], axis=1)])
    kept_id = loop.node("Where", [accept, idx, loop.node("GatherElements", [where, cur], axis=1)])
    heap_out = loop.node("ScatterElements", [heap, cur, kept], axis=1)
    ids_out = loop.node("ScatterElements", [where, cur, kept_id], axis=1)
    cond_out = loop.node("Identity", [cond])
    graph = helper.make_graph(
        loop.nodes,
        loop.prefix,
        [
            helper.make_tensor_value_info(step, TensorProto.INT64, []),
            helper.make_tensor_value_info(cond, TensorProto.BOOL, []),
            helper.make_tensor_value_info(heap_in, TensorProto.DOUBLE, None),
            helper.make_tensor_value_info(ids_in, TensorProto.INT64, None),
        ],
        [
            helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_value_info(heap_out, TensorProto.DOUBLE, None),
            helper.make_tensor_value_info(ids_out, TensorProto.INT64, None),
        ],
    )
    first = body.node("Slice", [values, *_span(body, 0, k)])
    start_heap = body.node("Add", [body.node("Mul", [first, body.const(0.0)]), body.const(np.inf)])
    start_ids = body.node(
        "Sub",
        [
            body.node("Slice", [ids, *_span(body, 0, k)]),
            body.node("Slice", [ids, *_span(body, 0, k)]),
        ],
    )
    steps = body.node("Gather", [body.node("Shape", [values]), body.const(1, np.int64)], axis=0)
    final_heap, final_ids = body.node(
        "Loop", [steps, body.const(True, bool), start_heap, start_ids], n_out=2, body=graph
    )
    # Sorted as scikit-learn returns them: ascending distances.
    ordered, position = body.node(
        "TopK", [final_heap, body.const([k], np.int64)], n_out=2, axis=1, largest=0, sorted=1
    )
    return ordered, body.node("GatherElements", [final_ids, position], axis=1)


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
    tree = _tree(model)
    n_train, n_features = train.shape
    rows = block_rows(n_train)

    prefix = g.name("knn_block")
    body = _Body(prefix, g.opset)
    block = body.name("rows")
    rdist = _reduced(body, block, train, p)
    body.n_train = n_train
    key, leaf_rank = (None, None) if tree is None else _visit_order(body, block, tree, p)
    sequence, sequence_ids = _sequence(body, rdist, k, tree, key, leaf_rank)
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
