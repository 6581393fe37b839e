"""onnxbridge's kernels for the ``ai.onnx.ml`` operator forms ``onnx.reference`` cannot run.

``onnx.reference.ReferenceEvaluator`` is the ONNX specification's Python implementation, and the
third runtime ``onnxbridge validate`` compares. The installed onnx lacks, or gets wrong, a few
forms of the ``ai.onnx.ml`` operators that onnxbridge's converters emit:

- ``TreeEnsembleRegressor`` / ``TreeEnsembleClassifier`` with float64 attributes
  (``nodes_values_as_tensor``, ``target_weights_as_tensor``, ``base_values_as_tensor``,
  ``class_weights_as_tensor``, ...): every ``precision="double"`` tree graph. It raises.
- ``TreeEnsemble`` (``ai.onnx.ml`` opset 5), every node: ``onnx.reference`` walks one row at a
  time through a Python object per node (minutes on a forest of a million nodes), skips
  ``post_transform``, takes a single-leaf tree's leaf at the root's position instead of the leaf
  the root names, and ends a ``BRANCH_MEMBER`` set at its first zero member.
- ``SVMClassifier`` with probability estimates (``prob_a`` / ``prob_b``) for three or more
  classes: its pairwise coupling gives other probabilities (up to 0.1 apart) than ONNX Runtime and
  scikit-learn; and ``SVMClassifier`` with two text labels (``classlabels_strings``): it raises.

The kernels here are written from the operator specification (``ai.onnx.ml`` opsets 3 and 5 for
the tree ensembles, 1 for ``SVMClassifier``; the SVM attributes are LIBSVM's model, and
probabilities are LIBSVM's: Platt's sigmoid per pair of classes, coupled as in Wu, Lin and Weng
2004). They run on whole batches with numpy: trees are walked level by level for all rows and
trees at once. :func:`reference_kernels` names the kernels a model needs;
:class:`~onnxbridge.validate._runtimes.ReferenceRuntime` passes them to
``ReferenceEvaluator(model, new_ops=...)``, so every other node still runs on ``onnx.reference``'s
own implementation.

Where ONNX Runtime departs from the specification the kernels follow the specification: NaN at a
``BRANCH_NEQ`` node takes the branch ``nodes_missing_value_tracks_true`` names (ONNX Runtime: the
true one always), and a ``TreeEnsembleClassifier`` labels each row with its top-scoring class
(ONNX Runtime labels a two-class ensemble that votes for the first class only by the sign of
that score). For ``TreeEnsemble`` (opset 5), ONNX Runtime also reads ``post_transform`` 1 as
LOGISTIC and 2 as SOFTMAX (the specification: 1 is SOFTMAX, 2 LOGISTIC), applies no transform
but PROBIT to a single target, and approximates PROBIT's inverse error function (about 5e-4
off); the kernel applies the specification's transforms.

Comparison precision is the graph's: float64 input is compared with thresholds widened to float64;
float32 input with thresholds rounded to float32 (as ONNX Runtime does). The opset-1/3 ensembles
sum their scores in float64 and write the float32 tensors the specification declares. The
opset-5 ``TreeEnsemble`` outputs the input's type, and computes in it as ONNX Runtime does:
thresholds, members and weights of the input's type, weights summed tree after tree in that
type (so float32 scores match ONNX Runtime's on one thread bit for bit; on several threads it
sums in another order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import AttributeProto, ModelProto, NodeProto, helper, numpy_helper
from onnx.reference.op_run import OpRun

__all__ = [
    "SVMClassifier",
    "TreeEnsemble",
    "TreeEnsembleClassifier",
    "TreeEnsembleRegressor",
    "reference_kernels",
]

ML_DOMAIN = "ai.onnx.ml"

# nodes_modes, by the specification's names.
_MODES = {
    "BRANCH_LEQ": 0,
    "BRANCH_LT": 1,
    "BRANCH_GTE": 2,
    "BRANCH_GT": 3,
    "BRANCH_EQ": 4,
    "BRANCH_NEQ": 5,
    "LEAF": 6,
}
_LEAF = _MODES["LEAF"]
_COMPARE = {
    0: np.less_equal,
    1: np.less,
    2: np.greater_equal,
    3: np.greater,
    4: np.equal,
    5: np.not_equal,
}
# LIBSVM bounds pairwise probabilities away from 0 and 1 before coupling them.
_MIN_PROBABILITY = 1e-7
# Rows are taken in chunks of at most this many (row, tree) or (row, support vector) cells, which
# bounds the memory of a walk or of a kernel matrix (about 32 MB each) whatever the batch.
_CHUNK_CELLS = 4_000_000


def _row_chunks(rows: int, width: int) -> list[slice]:
    step = max(1, _CHUNK_CELLS // max(width, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def _attributes(node: NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if attribute.type == AttributeProto.TENSOR:
            value = numpy_helper.to_array(value)
        elif isinstance(value, bytes):
            value = value.decode("utf-8")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8") for v in value]
        out[attribute.name] = value
    return out


def _numbers(attrs: dict[str, Any], name: str) -> np.ndarray | None:
    """``name_as_tensor`` (float64) when given, else ``name`` (float32 values), as float64."""
    if f"{name}_as_tensor" in attrs:
        return np.asarray(attrs[f"{name}_as_tensor"], dtype=np.float64).reshape(-1)
    if name in attrs and len(attrs[name]):
        return np.asarray(attrs[name], dtype=np.float32).astype(np.float64)
    return None


def _ints(attrs: dict[str, Any], name: str, size: int | None = None) -> np.ndarray:
    values = attrs.get(name)
    if values is None or len(values) == 0:
        if size is None:
            raise ValueError(f"attribute {name!r} is required")
        return np.zeros(size, dtype=np.int64)
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _compute_dtype(x: np.ndarray) -> type:
    # float64 input is compared in float64; anything else (float32, integers) in float32.
    return np.float64 if x.dtype == np.float64 else np.float32


def _post_transform(scores: np.ndarray, how: str) -> np.ndarray:
    """The specification's ``post_transform`` on ``[N, K]`` float64 scores."""
    if how in ("", "NONE"):
        return scores
    if how == "LOGISTIC":
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-scores))
    if how == "SOFTMAX":
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)
    if how == "SOFTMAX_ZERO":
        # Zero scores stay zero; the others share the probability mass.
        nonzero = scores != 0
        top = np.where(nonzero, scores, -np.inf).max(axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        exps = np.where(nonzero, np.exp(scores - top), 0.0)
        total = exps.sum(axis=1, keepdims=True)
        return np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
    if how == "PROBIT":
        from scipy.special import erfinv

        return np.sqrt(2.0) * erfinv(2.0 * scores - 1.0)
    raise ValueError(f"post_transform {how!r} is not one of the specification's")


# ----------------------------------------------------------------------------- tree ensembles
class _Trees:
    """The trees of a ``TreeEnsembleRegressor`` / ``TreeEnsembleClassifier`` node, as arrays.

    Nodes are addressed by position in the ``nodes_*`` attributes; children and leaf votes, given
    as (tree id, node id), are resolved to positions once.
    """

    def __init__(self, attrs: dict[str, Any], vote: str, n_outputs: int) -> None:
        self.tree = _ints(attrs, "nodes_treeids")
        size = len(self.tree)
        self.node = _ints(attrs, "nodes_nodeids")
        self.feature = _ints(attrs, "nodes_featureids")
        modes = attrs.get("nodes_modes") or []
        unknown = sorted({m for m in modes if m not in _MODES})
        if unknown:
            raise ValueError(f"nodes_modes {unknown} are not modes of the specification")
        self.mode = np.asarray([_MODES[m] for m in modes], dtype=np.int8)
        thresholds = _numbers(attrs, "nodes_values")
        self.threshold = np.zeros(size) if thresholds is None else thresholds
        self.missing_true = _ints(attrs, "nodes_missing_value_tracks_true", size).astype(bool)
        lengths = {
            len(a) for a in (self.node, self.feature, self.mode, self.threshold, self.missing_true)
        }
        if lengths != {size}:
            raise ValueError("the nodes_* attributes do not all have the same length")
        self.is_leaf = self.mode == _LEAF
        self.modes = sorted({int(m) for m in self.mode[~self.is_leaf]})
        keys = self.tree << 32 | self.node
        self._order = np.argsort(keys, kind="stable")
        self._sorted = keys[self._order]
        if np.any(np.diff(self._sorted) == 0):
            raise ValueError("a (tree id, node id) pair appears twice in nodes_*")
        branch = ~self.is_leaf
        self.true_pos = np.zeros(size, dtype=np.int64)
        self.false_pos = np.zeros(size, dtype=np.int64)
        trues = self._positions(self.tree[branch], _ints(attrs, "nodes_truenodeids")[branch])
        falses = self._positions(self.tree[branch], _ints(attrs, "nodes_falsenodeids")[branch])
        self.true_pos[branch], self.false_pos[branch] = trues, falses
        # A tree's root is the node no branch of that tree points to.
        pointed = np.zeros(size, dtype=bool)
        pointed[trues] = True
        pointed[falses] = True
        free = np.flatnonzero(~pointed)
        _, first = np.unique(self.tree[free], return_index=True)
        self.roots = free[first]
        if len(self.roots) != len(np.unique(self.tree)):
            raise ValueError("a tree has no root (its nodes point at each other in a cycle)")
        # Leaf votes: a dense [nodes, outputs] table of summed weights, and which are given.
        at = self._positions(_ints(attrs, f"{vote}_treeids"), _ints(attrs, f"{vote}_nodeids"))
        ids = _ints(attrs, f"{vote}_ids")
        weights = _numbers(attrs, f"{vote}_weights")
        if weights is None:
            weights = np.zeros(len(ids))
        if not (len(at) == len(ids) == len(weights)):
            raise ValueError(f"the {vote}_* attributes do not all have the same length")
        if len(ids) and (ids.min() < 0 or ids.max() >= n_outputs):
            raise ValueError(f"{vote}_ids must lie in [0, {n_outputs}), got {ids.max()}")
        self.n_outputs = n_outputs
        self.weights = np.zeros((size, n_outputs))
        np.add.at(self.weights, (at, ids), weights)
        self.voted = np.zeros((size, n_outputs), dtype=bool)
        self.voted[at, ids] = True

    def _positions(self, trees: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        keys = trees << 32 | nodes
        where = np.searchsorted(self._sorted, keys)
        where = np.minimum(where, len(self._sorted) - 1)
        if len(keys) and np.any(self._sorted[where] != keys):
            bad = int(np.flatnonzero(self._sorted[where] != keys)[0])
            raise ValueError(f"node {nodes[bad]} of tree {trees[bad]} is not in nodes_*")
        return self._order[where]

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """``[N, F] -> [N, trees]``: the position of the leaf each row reaches in each tree.

        All (row, tree) pairs go down one level per step, so the cost is the depth of the deepest
        tree times the pairs still on a branch, never a Python loop over rows.
        """
        dtype = _compute_dtype(x)
        x = np.asarray(x, dtype=dtype)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        thresholds: np.ndarray = self.threshold.astype(dtype)
        n, trees = x.shape[0], len(self.roots)
        reached = np.tile(self.roots, n)
        rows = np.repeat(np.arange(n), trees)
        active = np.flatnonzero(~self.is_leaf[reached])
        for _ in range(len(self.tree) + 1):
            if active.size == 0:
                break
            here = reached[active]
            value = x[rows[active], self.feature[here]]
            limit = thresholds[here]
            if len(self.modes) == 1:
                go_true = _COMPARE[self.modes[0]](value, limit)
            else:
                go_true = np.zeros(len(here), dtype=bool)
                mode = self.mode[here]
                for code in self.modes:
                    pick = mode == code
                    go_true[pick] = _COMPARE[code](value[pick], limit[pick])
            missing = np.isnan(value)
            go_true = np.where(missing, self.missing_true[here], go_true)
            step = np.where(go_true, self.true_pos[here], self.false_pos[here])
            reached[active] = step
            active = active[~self.is_leaf[step]]
        else:  # pragma: no cover - the root check above rules cycles out
            raise ValueError("the trees hold a cycle")
        return reached.reshape(n, trees)

    def scores(self, x: np.ndarray, how: str) -> np.ndarray:
        """``[N, F] -> [N, outputs]`` float64: the aggregated votes (before ``base_values``)."""
        x = x.reshape(1, -1) if x.ndim == 1 else x
        parts = [
            self.aggregate(self.leaves(x[rows]), how)
            for rows in _row_chunks(len(x), len(self.roots))
        ]
        return np.vstack(parts) if parts else np.zeros((0, self.n_outputs))

    def aggregate(self, leaves: np.ndarray, how: str) -> np.ndarray:
        """``[N, trees] -> [N, outputs]`` float64, by ``aggregate_function``."""
        n, trees = leaves.shape
        if how in ("SUM", "AVERAGE"):
            total = np.zeros((n, self.n_outputs))
            for t in range(trees):
                total += self.weights[leaves[:, t]]
            return total / trees if how == "AVERAGE" and trees else total
        if how not in ("MIN", "MAX"):
            raise ValueError(f"aggregate_function {how!r} is not one of the specification's")
        pick = np.minimum if how == "MIN" else np.maximum
        start = np.inf if how == "MIN" else -np.inf
        result = np.full((n, self.n_outputs), start)
        for t in range(trees):
            leaf = leaves[:, t]
            result = np.where(self.voted[leaf], pick(result, self.weights[leaf]), result)
        # An output no leaf votes for scores 0.
        return np.where(np.isfinite(result), result, 0.0)


def _base(attrs: dict[str, Any], size: int) -> np.ndarray:
    base = _numbers(attrs, "base_values")
    if base is None:
        return np.zeros(size)
    if len(base) != size:
        raise ValueError(f"base_values has {len(base)} values, expected {size}")
    return base


class _CachedNode(OpRun):
    """An ``ai.onnx.ml`` kernel that reads its node's attributes once, into ``self.spec``."""

    op_domain = ML_DOMAIN

    def __init__(self, onnx_node: NodeProto, run_params: dict[str, Any], schema: Any = None):
        super().__init__(onnx_node, run_params, schema)
        self.spec = self._prepare(_attributes(onnx_node))
        # OpRun keeps every attribute as a Python value too (lists of ints: some 40 bytes an
        # entry, gigabytes for a big forest); the kernel reads only ``spec``.
        for name in self.attributes_names_:
            setattr(self, name, None)

    def _prepare(self, attrs: dict[str, Any]) -> Any:
        raise NotImplementedError


class TreeEnsembleRegressor(_CachedNode):
    """``ai.onnx.ml.TreeEnsembleRegressor`` (opsets 1 and 3): ``X [N, F] -> Y [N, n_targets]``."""

    def _prepare(self, attrs: dict[str, Any]) -> Any:
        targets = int(attrs.get("n_targets", 1))
        trees = _Trees(attrs, "target", targets)
        return (
            trees,
            attrs.get("aggregate_function", "SUM"),
            _base(attrs, targets),
            attrs.get("post_transform", "NONE"),
        )

    def _run(self, x: np.ndarray, **_: Any) -> tuple[np.ndarray]:
        trees, aggregate, base, transform = self.spec
        scores = trees.scores(np.asarray(x), aggregate) + base
        return (_post_transform(scores, transform).astype(np.float32),)


class TreeEnsembleClassifier(_CachedNode):
    """``ai.onnx.ml.TreeEnsembleClassifier`` (opsets 1 and 3): ``X [N, F] -> (Y [N], Z [N, C])``.

    Scores are the summed class votes plus ``base_values``, then ``post_transform``; the label is
    the class of the highest score.
    """

    def _prepare(self, attrs: dict[str, Any]) -> Any:
        if attrs.get("classlabels_strings"):
            labels = np.asarray(attrs["classlabels_strings"], dtype=object)
        else:
            labels = np.asarray(_ints(attrs, "classlabels_int64s"), dtype=np.int64)
        classes = len(labels)
        trees = _Trees(attrs, "class", classes)
        return trees, labels, _base(attrs, classes), attrs.get("post_transform", "NONE")

    def _run(self, x: np.ndarray, **_: Any) -> tuple[np.ndarray, np.ndarray]:
        trees, labels, base, transform = self.spec
        scores = trees.scores(np.asarray(x), "SUM") + base
        # "The top class": the highest score, the first on a tie. (ONNX Runtime labels a binary
        # ensemble whose leaves vote for class 0 only by the sign of that score instead.)
        chosen = np.argmax(scores, axis=1)
        out = _post_transform(scores, transform).astype(np.float32)
        return labels[chosen], out


# ------------------------------------------------------------- TreeEnsemble (ai.onnx.ml 5)
# aggregate_function and post_transform of opset 5: integers, by the specification's names.
_AGGREGATES_V5 = ("AVERAGE", "SUM", "MIN", "MAX")
_TRANSFORMS_V5 = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_MEMBER = 6


def _enum(attrs: dict[str, Any], name: str, names: tuple[str, ...], default: int) -> str:
    value = int(attrs.get(name, default))
    if not 0 <= value < len(names):
        raise ValueError(f"{name}={value} is not one of the specification's (0..{len(names) - 1})")
    return names[value]


def _tensor(attrs: dict[str, Any], name: str, size: int | None = None) -> np.ndarray:
    """A numeric attribute (tensor or list) as a flat array; a missing one is zeros of ``size``."""
    if name not in attrs:
        if size is None:
            raise ValueError(f"attribute {name!r} is required")
        return np.zeros(size)
    return np.asarray(attrs[name]).reshape(-1)


class _TreesV5:
    """The trees of an opset-5 ``TreeEnsemble`` node, as arrays.

    Branch nodes are positions ``[0, n)`` of the ``nodes_*`` attributes and leaves positions
    ``[n, n + leaves)``: each branch's children, leaf or node, are resolved once into that one
    index space, so a walk is a gather per level. A tree whose root sends both branches to the
    same leaf is a single leaf: walked like any other, it reaches that leaf whatever the row.
    """

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.feature = _ints(attrs, "nodes_featureids")
        size = len(self.feature)
        self.mode = _tensor(attrs, "nodes_modes").astype(np.int64)
        self.threshold = _tensor(attrs, "nodes_splits", size)
        self.missing_true = _ints(attrs, "nodes_missing_value_tracks_true", size).astype(bool)
        children = []
        for side in ("true", "false"):
            ids = _ints(attrs, f"nodes_{side}nodeids")
            leafs = _ints(attrs, f"nodes_{side}leafs").astype(bool)
            children.append((ids, leafs))
        arrays = (self.mode, self.threshold, self.missing_true, *[a for c in children for a in c])
        if {len(a) for a in arrays} != {size} or size == 0:
            raise ValueError("the nodes_* attributes must all hold one entry per node (none empty)")
        if np.any((self.mode < 0) | (self.mode > _MEMBER)):
            raise ValueError("nodes_modes must lie in 0..6 (BRANCH_LEQ .. BRANCH_MEMBER)")
        if self.feature.min() < 0:
            raise ValueError("nodes_featureids cannot be negative")
        self.target = _ints(attrs, "leaf_targetids")
        self.weight = _tensor(attrs, "leaf_weights")
        leaves = len(self.target)
        if len(self.weight) != leaves:
            raise ValueError("leaf_targetids and leaf_weights must have the same length")
        self.n_targets = int(attrs.get("n_targets", 0))
        if self.n_targets < 1:
            raise ValueError("n_targets must be a positive number of targets")
        if leaves and (self.target.min() < 0 or self.target.max() >= self.n_targets):
            raise ValueError(f"leaf_targetids must lie in [0, {self.n_targets})")
        (true_ids, true_leafs), (false_ids, false_leafs) = children
        self.true_to = self._resolve(true_ids, true_leafs, size, leaves)
        self.false_to = self._resolve(false_ids, false_leafs, size, leaves)
        self.roots = _ints(attrs, "tree_roots")
        if len(self.roots) == 0 or self.roots.min() < 0 or self.roots.max() >= size:
            raise ValueError(f"tree_roots must name at least one node, each in [0, {size})")
        self.size = size
        self.modes = sorted({int(m) for m in self.mode})
        self.members = self._members(attrs)
        self._tables: dict[type, tuple[np.ndarray, np.ndarray]] = {}

    @staticmethod
    def _resolve(ids: np.ndarray, leafs: np.ndarray, size: int, leaves: int) -> np.ndarray:
        bound = np.where(leafs, leaves, size)
        if np.any((ids < 0) | (ids >= bound)):
            raise ValueError("a nodes_truenodeids / nodes_falsenodeids entry points past its array")
        return np.where(leafs, size + ids, ids)

    def _members(self, attrs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
        """``BRANCH_MEMBER`` sets as sorted ``(node position, member)`` pairs, or None."""
        member_nodes = np.flatnonzero(self.mode == _MEMBER)
        if member_nodes.size == 0:
            return None
        values = _tensor(attrs, "membership_values", 0)
        gaps = np.isnan(values)
        # The sets follow the BRANCH_MEMBER nodes in order, each closed by NaN (the last one may
        # end the list instead).
        sets = int(gaps.sum()) + int(len(values) > 0 and not gaps[-1])
        if sets != member_nodes.size:
            raise ValueError(
                f"membership_values holds {sets} NaN-delimited sets for "
                f"{member_nodes.size} BRANCH_MEMBER nodes"
            )
        # A member's set is the number of NaN before it.
        owner = member_nodes[np.cumsum(gaps)[~gaps]]
        members = values[~gaps]
        order = np.lexsort((members, owner))
        return owner[order], members[order]

    def _member_table(self, dtype: type) -> tuple[np.ndarray, np.ndarray]:
        """The distinct members in ``dtype``, and each (node, member) pair as one sorted integer:
        node * U + rank of the member among the U distinct ones. Built once per input type."""
        if dtype not in self._tables:
            assert self.members is not None
            owner, members = self.members
            distinct: np.ndarray = np.unique(members.astype(dtype))
            keys = np.sort(owner * len(distinct) + np.searchsorted(distinct, members.astype(dtype)))
            self._tables[dtype] = (distinct, keys)
        return self._tables[dtype]

    def _is_member(self, here: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Whether each ``value`` is in the set of its ``BRANCH_MEMBER`` node ``here``."""
        distinct, keys = self._member_table(value.dtype.type)
        if distinct.size == 0:  # every set is empty
            return np.zeros(len(here), dtype=bool)
        rank = np.minimum(np.searchsorted(distinct, value), len(distinct) - 1)
        query = here * len(distinct) + rank
        at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
        return (distinct[rank] == value) & (keys[at] == query)

    def _go_true(self, here: np.ndarray, value: np.ndarray, limit: np.ndarray) -> np.ndarray:
        if len(self.modes) == 1 and self.modes[0] != _MEMBER:
            go_true: np.ndarray = _COMPARE[self.modes[0]](value, limit)
            return go_true
        go_true = np.zeros(len(here), dtype=bool)
        mode = self.mode[here]
        for code in self.modes:
            pick = mode == code
            if code == _MEMBER:
                go_true[pick] = self._is_member(here[pick], value[pick])
            else:
                go_true[pick] = _COMPARE[code](value[pick], limit[pick])
        return go_true

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """``[N, F] -> [N, trees]``: the ``leaf_*`` position each row reaches in each tree.

        All (row, tree) pairs go down one level per step, as for opset 3. A NaN feature takes the
        branch ``nodes_missing_value_tracks_true`` names, whatever the mode.
        """
        if x.shape[1] <= self.feature.max():
            raise ValueError(
                f"the trees read feature {self.feature.max()}, the input has {x.shape[1]} columns"
            )
        thresholds: np.ndarray = self.threshold.astype(x.dtype)
        n, trees = x.shape[0], len(self.roots)
        reached = np.tile(self.roots, n)
        rows = np.repeat(np.arange(n), trees)
        active = np.arange(len(reached))
        for _ in range(self.size + 1):
            if active.size == 0:
                break
            here = reached[active]
            value = x[rows[active], self.feature[here]]
            go_true = self._go_true(here, value, thresholds[here])
            go_true = np.where(np.isnan(value), self.missing_true[here], go_true)
            step = np.where(go_true, self.true_to[here], self.false_to[here])
            reached[active] = step
            active = active[step < self.size]
        else:
            raise ValueError("the trees hold a cycle (a branch points back to an ancestor)")
        return reached.reshape(n, trees) - self.size

    def aggregate(self, leaves: np.ndarray, how: str, dtype: type) -> np.ndarray:
        """``[N, trees] -> [N, n_targets]`` in ``dtype``, by ``aggregate_function``.

        Each reached leaf adds its weight to its target, tree after tree in ``dtype`` (as ONNX
        Runtime does on one thread); a target no reached leaf votes for scores 0. AVERAGE
        divides the sum by the number of trees.
        """
        n, trees = leaves.shape
        size = n * self.n_targets
        # Row-major: a row's trees in order, which ``ufunc.at`` applies one after the other.
        cells = (np.arange(n)[:, None] * self.n_targets + self.target[leaves]).ravel()
        weights = self.weight.astype(dtype)[leaves].ravel()
        if how in ("SUM", "AVERAGE"):
            total = np.zeros(size, dtype=dtype)
            np.add.at(total, cells, weights)
            if how == "AVERAGE":
                total /= dtype(trees)
            return total.reshape(n, self.n_targets)
        pick = np.minimum if how == "MIN" else np.maximum
        result = np.full(size, np.inf if how == "MIN" else -np.inf, dtype=dtype)
        pick.at(result, cells, weights)
        voted = np.zeros(size, dtype=bool)
        voted[cells] = True
        return np.where(voted, result, dtype(0)).reshape(n, self.n_targets)


class TreeEnsemble(_CachedNode):
    """``ai.onnx.ml.TreeEnsemble`` (opset 5): ``X [N, F] -> Y [N, n_targets]``, of ``X``'s type.

    Thresholds, members and weights are compared and summed in the input's precision
    (``nodes_splits`` and ``leaf_weights`` are tensors of that type): float64 input in float64,
    float32 input in float32.
    """

    def _prepare(self, attrs: dict[str, Any]) -> Any:
        return (
            _TreesV5(attrs),
            _enum(attrs, "aggregate_function", _AGGREGATES_V5, 1),
            _enum(attrs, "post_transform", _TRANSFORMS_V5, 0),
        )

    def _run(self, x: np.ndarray, **_: Any) -> tuple[np.ndarray]:
        trees, aggregate, transform = self.spec
        x = np.asarray(x)
        dtype = x.dtype.type if x.dtype.kind == "f" else np.float32
        x = x.astype(dtype, copy=False)
        x = x.reshape(1, -1) if x.ndim == 1 else x
        parts = [
            trees.aggregate(trees.leaves(x[rows]), aggregate, dtype)
            for rows in _row_chunks(len(x), len(trees.roots))
        ]
        scores = np.vstack(parts) if parts else np.zeros((0, trees.n_targets), dtype=dtype)
        return (_post_transform(scores.astype(np.float64), transform).astype(dtype),)


# ------------------------------------------------------------------------------- SVMClassifier
def _kernel(x: np.ndarray, vectors: np.ndarray, kind: str, params: list[float]) -> np.ndarray:
    """``[N, F], [L, F] -> [N, L]`` kernel values, by ``kernel_type``."""
    gamma, coef0, degree = (x.dtype.type(v) for v in [*params, 0.0, 0.0, 0.0][:3])
    if kind == "LINEAR":
        return x @ vectors.T
    if kind == "POLY":
        return (gamma * (x @ vectors.T) + coef0) ** degree
    if kind == "SIGMOID":
        return np.tanh(gamma * (x @ vectors.T) + coef0)
    if kind == "RBF":
        squared = (
            (x * x).sum(axis=1)[:, None] + (vectors * vectors).sum(axis=1)[None, :]
        ) - 2.0 * (x @ vectors.T)
        return np.exp(-gamma * np.maximum(squared, 0.0))
    raise ValueError(f"kernel_type {kind!r} is not one of LINEAR, POLY, RBF, SIGMOID")


def _platt(decision: np.ndarray, a: float, b: float) -> np.ndarray:
    """Platt's sigmoid ``1 / (1 + exp(a * d + b))``, computed without overflow, bounded."""
    z = decision * a + b
    with np.errstate(over="ignore", invalid="ignore"):
        tail = np.exp(-np.abs(z))
        p = np.where(z >= 0, tail / (1.0 + tail), 1.0 / (1.0 + tail))
    return np.clip(p, _MIN_PROBABILITY, 1.0 - _MIN_PROBABILITY)


def _couple(pairwise: np.ndarray, classes: int) -> np.ndarray:
    """Class probabilities ``[N, k]`` from pairwise ones ``r[n, i, j] = P(i | i or j)``.

    Wu, Lin and Weng (2004), method 2: minimise ``p' Q p`` with ``sum(p) = 1``, where
    ``Q[t, t] = sum_{j != t} r[j, t]^2`` and ``Q[t, j] = -r[j, t] r[t, j]``, by their fixed-point
    iteration (at most ``max(100, k)`` sweeps; a row stops when every ``|(Qp)_t - p'Qp|`` is below
    ``0.005 / k``).
    """
    n, k = pairwise.shape[0], classes
    r = pairwise
    rt = np.swapaxes(r, 1, 2)  # rt[n, i, j] = r[n, j, i]
    eye = np.eye(k, dtype=bool)[None]
    q = np.where(eye, 0.0, -rt * r)
    # r[n, j, t]^2 summed over j != t (the diagonal of r is unused).
    q[:, np.arange(k), np.arange(k)] = np.where(eye, 0.0, r * r).sum(axis=1)
    p = np.full((n, k), 1.0 / k)
    eps = 0.005 / k
    # A row whose pairwise probabilities are not numbers (NaN input) has no evidence to move
    # from the uniform start: LIBSVM's convergence test, over numbers only, never fails on it.
    todo = np.flatnonzero(np.isfinite(r).all(axis=(1, 2)))
    for _ in range(max(100, k)):
        if todo.size == 0:
            break
        pt, qt = p[todo], q[todo]
        qp = np.einsum("ntj,nj->nt", qt, pt)
        pqp = (pt * qp).sum(axis=1)
        settled = np.abs(qp - pqp[:, None]).max(axis=1) < eps
        todo, pt, qt, qp, pqp = (
            todo[~settled],
            pt[~settled],
            qt[~settled],
            qp[~settled],
            pqp[~settled],
        )
        for t in range(k):
            diff = (pqp - qp[:, t]) / qt[:, t, t]
            pt[:, t] += diff
            pqp = (pqp + diff * (diff * qt[:, t, t] + 2.0 * qp[:, t])) / (1.0 + diff) ** 2
            qp = (qp + diff[:, None] * qt[:, t, :]) / (1.0 + diff)[:, None]
            pt /= (1.0 + diff)[:, None]
        p[todo] = pt
    return p


class SVMClassifier(_CachedNode):
    """``ai.onnx.ml.SVMClassifier`` (opset 1): ``X [N, F] -> (Y [N], Z [N, ...])``.

    The attributes are LIBSVM's model: ``support_vectors`` grouped by class
    (``vectors_per_class``), ``coefficients`` ``[k-1, L]``, one ``rho`` per pair of classes
    ``(i, j)``, ``i < j``, in order, written as the intercept (LIBSVM's ``-rho``). The decision
    value of a pair is ``sum_{s in i} coef[j-1, s] K(x, s) + sum_{s in j} coef[i, s] K(x, s) +
    rho`` (positive votes for ``i``), and the label is the class with most votes (the first on a
    tie). Without ``prob_a`` / ``prob_b``, ``Z`` holds the decision values (``[-d, d]`` for two
    classes, else one column per pair); with them, the class probabilities: Platt's sigmoid of
    each pair's decision value, coupled (:func:`_couple`).
    """

    def _prepare(self, attrs: dict[str, Any]) -> Any:
        if attrs.get("classlabels_strings"):
            labels = np.asarray(attrs["classlabels_strings"], dtype=object)
        else:
            labels = np.asarray(_ints(attrs, "classlabels_ints"), dtype=np.int64)
        per_class = _ints(attrs, "vectors_per_class", 0)
        if per_class.sum() == 0:
            raise ValueError("SVMClassifier without support vectors (linear mode) is not covered")
        k = len(per_class)
        vectors = np.asarray(attrs.get("support_vectors", []), dtype=np.float64)
        total = int(per_class.sum())
        vectors = vectors.reshape(total, -1)
        coefficients = np.asarray(attrs.get("coefficients", []), dtype=np.float64)
        coefficients = coefficients.reshape(k - 1, total)
        rho = np.asarray(attrs.get("rho", []), dtype=np.float64)
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
        if len(rho) != len(pairs):
            raise ValueError(f"rho has {len(rho)} values, expected {len(pairs)} (one per pair)")
        prob_a = np.asarray(attrs.get("prob_a", []), dtype=np.float64)
        prob_b = np.asarray(attrs.get("prob_b", []), dtype=np.float64)
        if len(prob_a) and (len(prob_a) != len(pairs) or len(prob_b) != len(pairs)):
            raise ValueError("prob_a and prob_b must hold one value per pair of classes")
        starts = np.concatenate([[0], np.cumsum(per_class)])
        return {
            "labels": labels,
            "k": k,
            "vectors": vectors,
            "coefficients": coefficients,
            "rho": rho,
            "pairs": pairs,
            "slices": [slice(int(starts[c]), int(starts[c + 1])) for c in range(k)],
            "prob_a": prob_a,
            "prob_b": prob_b,
            "kernel": attrs.get("kernel_type", "LINEAR"),
            "params": list(attrs.get("kernel_params", [])),
            "transform": attrs.get("post_transform", "NONE"),
        }

    def _run(self, x: np.ndarray, **_: Any) -> tuple[np.ndarray, np.ndarray]:
        s = self.spec
        # Kernels and decision values in the input's precision: a float32 graph overflows to
        # inf / NaN where ONNX Runtime's float kernel does.
        dtype = _compute_dtype(x)
        x = np.asarray(x, dtype=dtype)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        vectors, coef, k = s["vectors"].astype(dtype), s["coefficients"].astype(dtype), s["k"]
        decisions: np.ndarray = np.empty((len(x), len(s["pairs"])), dtype=dtype)
        for rows in _row_chunks(len(x), len(vectors)):
            with np.errstate(all="ignore"):
                kernel = _kernel(x[rows], vectors, s["kernel"], s["params"])
            for p, (i, j) in enumerate(s["pairs"]):
                si, sj = s["slices"][i], s["slices"][j]
                decisions[rows, p] = (
                    kernel[:, si] @ coef[j - 1, si] + kernel[:, sj] @ coef[i, sj] + s["rho"][p]
                )
        votes = np.zeros((len(x), k), dtype=np.int64)
        for p, (i, j) in enumerate(s["pairs"]):
            positive = decisions[:, p] > 0
            votes[positive, i] += 1
            votes[~positive, j] += 1
        if len(s["prob_a"]):
            decisions = decisions.astype(np.float64)
            pairwise = np.zeros((len(x), k, k))
            for p, (i, j) in enumerate(s["pairs"]):
                r = _platt(decisions[:, p], s["prob_a"][p], s["prob_b"][p])
                pairwise[:, i, j], pairwise[:, j, i] = r, 1.0 - r
            scores = _couple(pairwise, k)
        else:
            # Two classes: one decision value d, written as the scores [-d, d].
            scores = np.hstack([-decisions, decisions]) if k == 2 else decisions
        chosen = np.argmax(votes, axis=1)
        out = _post_transform(scores, s["transform"]).astype(np.float32)
        return s["labels"][chosen], out


# ------------------------------------------------------------------------------ which kernels
def _needs_tree_kernel(node: NodeProto) -> bool:
    return any(a.name.endswith("_as_tensor") for a in node.attribute)


def _needs_svm_kernel(node: NodeProto) -> bool:
    names = {a.name: a for a in node.attribute}
    per_class = names.get("vectors_per_class")
    classes = len(per_class.ints) if per_class is not None else 0
    # Multiclass probabilities (coupled otherwise), two classes with text labels (raises).
    return (classes > 2 and "prob_a" in names) or (classes == 2 and "classlabels_strings" in names)


_KERNELS: dict[str, tuple[type[OpRun], Any]] = {
    "TreeEnsembleRegressor": (TreeEnsembleRegressor, _needs_tree_kernel),
    "TreeEnsembleClassifier": (TreeEnsembleClassifier, _needs_tree_kernel),
    "SVMClassifier": (SVMClassifier, _needs_svm_kernel),
    # onnx.reference's own walks every row through Python objects, one at a time.
    "TreeEnsemble": (TreeEnsemble, lambda node: True),
}


def _nodes(model: ModelProto) -> list[NodeProto]:
    nodes: list[NodeProto] = []
    graphs = [model.graph, *(f for f in model.functions)]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            nodes.append(node)
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    graphs.append(attribute.g)
                elif attribute.type == AttributeProto.GRAPHS:
                    graphs.extend(attribute.graphs)
    return nodes


def reference_kernels(model: ModelProto) -> list[type[OpRun]]:
    """The onnxbridge kernels ``model`` needs in ``onnx.reference``, for ``new_ops=``.

    A kernel replaces an operator when some node of that operator in the model (subgraphs
    included) has a form ``onnx.reference`` cannot run or computes otherwise than the
    specification, and always for ``TreeEnsemble`` (opset 5); every other operator keeps
    ``onnx.reference``'s implementation.
    """
    needed: list[type[OpRun]] = []
    for node in _nodes(model):
        if node.domain != ML_DOMAIN or node.op_type not in _KERNELS:
            continue
        kernel, needs = _KERNELS[node.op_type]
        if kernel not in needed and needs(node):
            needed.append(kernel)
    return needed
