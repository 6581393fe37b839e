"""Tree ensembles as ``ai.onnx.ml`` ``TreeEnsemble`` (opset 5), built from the converter's arrays.

The opset-5 operator keeps interior nodes and leaves apart: a node lists its feature, threshold
(a tensor), mode (a ``uint8`` tensor) and two children, each either a node or a leaf, and a leaf
is one ``(target, weight)`` pair. So a forest takes about 40 % of the bytes of the opset-3
``TreeEnsembleRegressor``, which repeats tree ids, node ids and a mode string for every node and
lists leaves a second time as targets; thresholds and weights are tensors, which a model past
protobuf's 2 GiB limit keeps in an external data file.

ONNX Runtime computes the same thing for both operators (it reads an opset-5 node into the same
kernel), so onnxbridge writes opset 5 wherever the result is the same ensemble:

- every leaf writes exactly one value (regressors, gradient boosting, the leaf-index ensembles of
  double-precision graphs); a forest classifier, whose leaves hold one probability per class,
  would need a copy of each tree per class, and stays ``TreeEnsembleClassifier``;
- ``aggregate_function="SUM"``, ``post_transform="NONE"``; ``base_values`` become an ``Add``
  after the node (ONNX Runtime adds them after the sum too);
- the installed ONNX Runtime runs ``TreeEnsemble`` (1.20 loads ``ai.onnx.ml`` 5 without a
  kernel for it), and the user did not pin ``ml_opset``;
- no other operator of the model changes meaning between ``ai.onnx.ml`` 3 and 5 (the opset-5
  import applies to the whole model: ``LabelEncoder`` changes at 4, ``TreeEnsembleClassifier``
  and ``TreeEnsembleRegressor`` are deprecated at 5).

A big ensemble, of either form, is written in blocks of whole consecutive trees (``make_v5``,
``split_regressor`` and ``split_classifier`` with ``block_nodes``), one node each, and a
``Sum`` of their scores:
ONNX Runtime builds its tree kernel node by node, and building one node of millions of nodes
takes several times the time and the peak memory the same trees take in blocks. The blocks add
float32 scores in another order than one node does (the last place may differ); in the
double-precision graph every tree writes its own column, so each block writes its trees'
columns only and a ``Concat`` joins them, which changes nothing.

Some ONNX Runtime releases take a tree for a single leaf when its root's true and false ids
are equal; ids of nodes and of leaves are separate numbers, so a root with one leaf child and
one node child could look like one. A few unreferenced leaves at the front of the leaf arrays
shift every leaf id past any such clash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from typing import Any

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from onnxbridge._onnxfile import tree_runs, unique_names

__all__ = [
    "ML_OPSET",
    "can_use_v5",
    "make_v5",
    "set_ml_opset",
    "split_classifier",
    "split_regressor",
]

ML_DOMAIN = "ai.onnx.ml"
ML_OPSET = 5
_V3 = "TreeEnsembleRegressor"
_MODES = {
    b"BRANCH_LEQ": 0,
    b"BRANCH_LT": 1,
    b"BRANCH_GTE": 2,
    b"BRANCH_GT": 3,
    b"BRANCH_EQ": 4,
    b"BRANCH_NEQ": 5,
}
_LEAF = b"LEAF"


def _small(node: NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _floats(value: Any) -> np.ndarray:
    """A float attribute's values: a ``TensorProto`` or an array keeps its type, a list is
    float32."""
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value).reshape(-1)
    if isinstance(value, np.ndarray):
        return value.reshape(-1)
    return np.asarray(value, dtype=np.float32).reshape(-1)


def _modes(value: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``nodes_modes`` as (is a leaf, opset-5 mode code) per node; None for an unknown mode.

    ``value``: the converter's table of texts and a code per node, or a list of texts.
    """
    table = getattr(value, "table", None)
    codes = np.asarray(value.codes, dtype=np.intp) if table is not None else None
    if table is None:
        table, codes = np.unique(np.array(list(value), dtype=object), return_inverse=True)
    texts = [t if isinstance(t, bytes) else str(t).encode() for t in table]
    if any(t != _LEAF and t not in _MODES for t in texts):
        return None
    leaf = np.array([t == _LEAF for t in texts])
    mode = np.array([_MODES.get(t, 0) for t in texts], dtype=np.uint8)
    return leaf[codes], mode[codes]


def _unchanged_at_v5(op_type: str, version: int) -> bool:
    """Whether ``ai.onnx.ml`` operator ``op_type`` means the same at opset 5 as at ``version``."""
    import onnx.defs

    try:
        now = onnx.defs.get_schema(op_type, version, ML_DOMAIN)
        later = onnx.defs.get_schema(op_type, ML_OPSET, ML_DOMAIN)
    except Exception:  # an operator onnx does not know: keep the model as it is
        return False
    return not later.deprecated and now.since_version == later.since_version


def _ml_version(model: ModelProto) -> int:
    return max((int(o.version) for o in model.opset_import if o.domain == ML_DOMAIN), default=0)


def can_use_v5(
    model: ModelProto, nodes: list[NodeProto], arrays: dict[str, dict[str, Any]]
) -> bool:
    """Whether every tree ensemble of ``model`` can become an opset-5 ``TreeEnsemble``.

    Args:
        model: the converted model, its tree-ensemble nodes still without their arrays.
        nodes: every node of the model (subgraphs included).
        arrays: tree-ensemble node name -> its array attributes (numpy).
    """
    if any(n.domain == ML_DOMAIN for f in model.functions for n in f.node):
        return False
    version = _ml_version(model)
    found = False
    for node in nodes:
        if node.domain != ML_DOMAIN:
            continue
        if node.op_type == _V3 and node.name in arrays:
            if not _single_value_leaves(_small(node), arrays[node.name]):
                return False
            found = True
        elif not _unchanged_at_v5(node.op_type, version):
            return False
    return found


def _is(small: dict[str, Any], name: str, value: str) -> bool:
    """Whether text attribute ``name`` (its default: ``value``) is ``value``."""
    return small.get(name, value) in (value, value.encode())


def _plain_sum(small: dict[str, Any]) -> bool:
    """Scores that are the sum of the trees' values: ``SUM`` without a ``post_transform``."""
    return _is(small, "aggregate_function", "SUM") and _is(small, "post_transform", "NONE")


def _single_value_leaves(small: dict[str, Any], arrays: dict[str, Any]) -> bool:
    """A sum of trees whose every leaf writes one value."""
    if not _plain_sum(small):
        return False
    if "base_values_as_tensor" in small or "nodes_hitrates" in arrays:
        return False
    weights = arrays.get("target_weights_as_tensor", arrays.get("target_weights"))
    thresholds = arrays.get("nodes_values_as_tensor", arrays.get("nodes_values"))
    if weights is None or thresholds is None:
        return False
    if _floats(weights).dtype.itemsize > _floats(thresholds).dtype.itemsize:
        return False  # weights wider than the input type would be rounded
    modes = _modes(arrays["nodes_modes"])
    if modes is None:
        return False
    is_leaf = modes[0]
    if len(arrays["target_ids"]) != int(is_leaf.sum()):
        return False
    positions = _positions(arrays["nodes_treeids"], arrays["nodes_nodeids"])
    if positions is None:
        return False
    targets = positions(arrays["target_treeids"], arrays["target_nodeids"])
    if targets is None:
        return False
    counts = np.bincount(targets, minlength=len(is_leaf))
    return bool(np.all(counts[is_leaf] == 1) and not np.any(counts[~is_leaf]))


def _positions(trees: np.ndarray, ids: np.ndarray) -> Any:
    """``find(tree, id) -> row`` over the node arrays (None where a pair is not a node), or
    None when the arrays are not laid out as the converter writes them: trees one after
    another in order, node ids ``0..n-1`` within each."""
    trees = np.asarray(trees, dtype=np.int64)
    ids = np.asarray(ids, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, trees[1:] != trees[:-1]]) if len(trees) else trees
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(trees)]))
    tree_order = trees[starts] if len(trees) else trees
    if not len(trees) or not np.all(np.diff(tree_order) > 0):
        return None
    if not np.array_equal(ids, np.arange(len(ids)) - starts[run]):
        return None
    sizes = np.diff(np.r_[starts, len(trees)])

    def find(tree: np.ndarray, node: np.ndarray) -> np.ndarray | None:
        where = np.minimum(np.searchsorted(tree_order, tree), len(tree_order) - 1)
        valid = (tree_order[where] == tree) & (node >= 0) & (node < sizes[where])
        return (starts[where] + node) if bool(np.all(valid)) else None

    return find


def make_v5(
    graph: Any, node: NodeProto, arrays: dict[str, Any], block_nodes: int = 0
) -> list[tuple[NodeProto, dict[str, Any]]]:
    """Turn ``node`` of ``graph`` (a ``TreeEnsembleRegressor`` without its arrays) into
    ``TreeEnsemble`` nodes; returns each node with the array attributes to set on it.

    ``can_use_v5`` must hold. The node's small attributes are replaced, and its
    ``base_values`` become an ``Add`` after it. An ensemble of more than ``block_nodes`` nodes
    (0: no limit) becomes one ``TreeEnsemble`` per block of whole trees, each of at most
    ``block_nodes`` nodes unless a single tree is bigger, and a ``Sum`` of their scores (a
    ``Concat`` where each block writes columns of its own: :func:`_own_columns`).
    """
    small = _small(node)
    parts = _tree_blocks(arrays, block_nodes)
    dtype = _floats(arrays.get("nodes_values_as_tensor", arrays.get("nodes_values"))).dtype
    out = node.output[0]
    del node.attribute[:]
    node.op_type = "TreeEnsemble"
    node.attribute.extend(
        [
            helper.make_attribute("aggregate_function", 1),
            helper.make_attribute("n_targets", int(small.get("n_targets", 1))),
            helper.make_attribute("post_transform", 0),
        ]
    )
    # The opset-5 node outputs the input's type (opset 3: always float32).
    kept = [v for v in graph.value_info if v.name != out]
    if len(kept) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(kept)
    parts, widths = _own_columns(parts, int(small.get("n_targets", 1)))
    blocks, last = _blocked(graph, node, len(parts), widths)
    base = small.get("base_values")
    if base is not None and any(base):
        _add_base(graph, last, [float(v) for v in base], dtype)
    return [(block, _v5_arrays(part)) for block, part in zip(blocks, parts, strict=True)]


def split_regressor(
    graph: Any, node: NodeProto, arrays: dict[str, Any], block_nodes: int
) -> list[tuple[NodeProto, dict[str, Any]]]:
    """An opset-3 ``TreeEnsembleRegressor`` (``SUM``, ``NONE``; without its arrays) of more
    than ``block_nodes`` nodes as one such node per block of whole trees and a ``Sum`` of
    their scores; or, where each block writes columns of its own (:func:`_own_columns`), a
    ``Concat``. The base values are added after it (``Add``): ONNX Runtime adds a base value
    only to the columns the node's own leaves write, which a block's may not all be.
    Returns each node with its arrays."""
    small = _small(node)
    if not _plain_sum(small):
        return [(node, arrays)]
    parts = _tree_blocks(arrays, block_nodes)
    parts, widths = _own_columns(parts, int(small.get("n_targets", 1)))
    blocks, last = _blocked(graph, node, len(parts), widths)
    names = ("base_values", "base_values_as_tensor")
    found = [small[name] for name in names if name in small]
    if len(blocks) > 1 and found:
        for block in blocks:
            kept = [a for a in block.attribute if a.name not in names]
            del block.attribute[:]
            block.attribute.extend(kept)
        base = _floats(found[0])
        if np.any(base != 0):
            _add_base(graph, last, [float(v) for v in base], np.float32)
    return list(zip(blocks, parts, strict=True))


def split_classifier(
    graph: Any, node: NodeProto, arrays: dict[str, Any], block_nodes: int
) -> list[tuple[NodeProto, dict[str, Any]]]:
    """An opset-3 ``TreeEnsembleClassifier`` (``post_transform`` ``NONE``, no base values,
    without its arrays) whose label output nothing reads, of more than ``block_nodes`` nodes,
    as one such node per block of whole trees and a ``Sum`` of their class scores. (onnxbridge's
    forest classifiers take the label from the scores: ONNX Runtime decides the operator's own
    by its binary rule.) Returns each node with its arrays."""
    small = _small(node)
    if not _is(small, "post_transform", "NONE"):
        return [(node, arrays)]
    if "base_values" in small or "base_values_as_tensor" in small:
        return [(node, arrays)]
    labels = small.get("classlabels_int64s", small.get("classlabels_strings")) or []
    found = _modes(arrays["nodes_modes"])
    if found is None or len(arrays["class_ids"]) != int(found[0].sum()) * len(labels):
        return [(node, arrays)]  # not every leaf lists every class: ONNX Runtime's binary rule
    label = node.output[0]
    read = {name for other in graph.node for name in other.input}
    if label in read or label in {o.name for o in graph.output}:
        return [(node, arrays)]
    parts = _tree_blocks(arrays, block_nodes)
    blocks, _ = _blocked(graph, node, len(parts), score=1)
    return list(zip(blocks, parts, strict=True))


def _own_columns(
    parts: list[dict[str, Any]], n_targets: int
) -> tuple[list[dict[str, Any]], list[int] | None]:
    """When each block writes output columns of its own, one run of them after the other's
    (the float64 graph's ensemble writes each tree's leaf to the tree's column): the blocks with
    their columns numbered from 0, and each block's number of columns. Else ``parts`` and
    None: the blocks' scores are added."""
    if len(parts) == 1:
        return parts, None
    firsts, expected = [], 0
    for part in parts:
        ids = np.asarray(part["target_ids"])
        if not len(ids) or int(ids.min()) != expected:
            return parts, None
        firsts.append(expected)
        expected = int(ids.max()) + 1
    if expected != n_targets:
        return parts, None
    widths = np.diff([*firsts, n_targets]).tolist()
    own = [
        {**part, "target_ids": np.asarray(part["target_ids"]) - first}
        for part, first in zip(parts, firsts, strict=True)
    ]
    return own, widths


def _blocked(
    graph: Any, node: NodeProto, count: int, widths: list[int] | None = None, score: int = 0
) -> tuple[list[NodeProto], NodeProto]:
    """``node`` (without its arrays) and ``count - 1`` copies after it, each writing a score
    (output ``score``) of its own, and a ``Sum`` of the scores writing ``node``'s output (with
    ``widths``, each block's number of output columns: a ``Concat`` of its columns instead);
    the copies' other outputs get names of their own. Returns (the tree nodes, the node that
    writes the output)."""
    if count == 1:
        return [node], node
    unique = unique_names(graph)
    at = _index(graph, node)
    out = node.output[score]
    node.output[score] = unique(f"{out}_block0")
    blocks, scores = [node], [node.output[score]]
    for k in range(1, count):
        block = NodeProto()
        block.CopyFrom(node)
        block.name = unique(f"{node.name}_block{k}")
        for i, name in enumerate(node.output):
            block.output[i] = unique(f"{out if i == score else name}_block{k}")
        scores.append(block.output[score])
        graph.node.insert(at + k, block)
        blocks.append(graph.node[at + k])
    if widths is None:
        total = helper.make_node("Sum", scores, [out], name=unique(f"{node.name}_sum"))
    else:
        for block, width in zip(blocks, widths, strict=True):
            (targets,) = [a for a in block.attribute if a.name == "n_targets"]
            targets.i = width
        total = helper.make_node("Concat", scores, [out], axis=1, name=unique(f"{node.name}_cat"))
    graph.node.insert(at + count, total)
    return blocks, graph.node[at + count]


def _tree_blocks(arrays: dict[str, Any], block_nodes: int) -> list[dict[str, Any]]:
    """``arrays`` cut into blocks of whole trees of at most ``block_nodes`` nodes each (a
    bigger tree alone): node rows and leaf (``target_*`` / ``class_*``) rows of consecutive
    trees, each value of the same kind as in ``arrays``. One block, ``arrays`` itself, when
    the ensemble is no bigger or a name is neither kind."""
    trees = np.asarray(arrays["nodes_treeids"], dtype=np.int64)
    if block_nodes <= 0 or len(trees) <= block_nodes:
        return [arrays]
    if any(not k.startswith(("nodes_", "target_", "class_")) for k in arrays):
        return [arrays]
    starts = np.flatnonzero(np.r_[True, trees[1:] != trees[:-1]])
    if np.any(np.diff(trees[starts]) <= 0):
        return [arrays]  # a tree's nodes are not all together: keep the ensemble whole
    sizes = np.diff(np.r_[starts, len(trees)])
    runs = tree_runs(np.arange(len(starts)), sizes, block_nodes)
    if runs is None:
        return [arrays]
    cuts = [int(starts[run[0]]) for run in runs] + [len(trees)]
    take = {k: _rows_of(v) for k, v in arrays.items()}
    leaf_trees = arrays.get("target_treeids", arrays.get("class_treeids"))
    target_trees = np.asarray(leaf_trees, dtype=np.int64)
    ordered = bool(np.all(target_trees[1:] >= target_trees[:-1]))
    parts = []
    for a, b in pairwise(cuts):
        first, last = int(trees[a]), int(trees[b - 1])
        if ordered:
            lo, hi = np.searchsorted(target_trees, [first, last + 1])
            targets: Any = slice(int(lo), int(hi))
        else:
            targets = (target_trees >= first) & (target_trees <= last)
        parts.append(
            {k: cut(slice(a, b) if k.startswith("nodes_") else targets) for k, cut in take.items()}
        )
    return parts


def _rows_of(value: Any) -> Callable[[Any], Any]:
    """``rows -> `` those rows of an array attribute, of the same kind: an array, a tensor,
    or the converter's table of texts with a code per node."""
    if isinstance(value, TensorProto):
        array = numpy_helper.to_array(value).reshape(-1)
        return lambda rows: _tensor(array[rows])
    if getattr(value, "table", None) is not None:
        codes = np.asarray(value.codes)
        return lambda rows: replace(value, codes=codes[rows])
    array = np.asarray(value)
    return lambda rows: array[rows]


def _v5_arrays(arrays: dict[str, Any]) -> dict[str, Any]:
    """The opset-5 array attributes of the trees in ``arrays`` (converter layout)."""
    thresholds = _floats(arrays.get("nodes_values_as_tensor", arrays.get("nodes_values")))
    dtype = thresholds.dtype
    found = _modes(arrays["nodes_modes"])
    assert found is not None  # can_use_v5 checked it
    is_leaf, codes = found
    trees = np.asarray(arrays["nodes_treeids"], dtype=np.int64)
    position = _positions(trees, arrays["nodes_nodeids"])
    leaf_index = np.cumsum(is_leaf) - 1
    node_index = np.cumsum(~is_leaf) - 1
    inner = np.flatnonzero(~is_leaf)
    true_at = position(trees[inner], np.asarray(arrays["nodes_truenodeids"])[inner])
    false_at = position(trees[inner], np.asarray(arrays["nodes_falsenodeids"])[inner])
    roots = position(np.unique(trees), np.zeros(len(np.unique(trees)), dtype=np.int64))
    true_leaf, false_leaf = is_leaf[true_at], is_leaf[false_at]
    padding = _padding(
        roots, is_leaf, node_index, leaf_index, true_at, false_at, true_leaf, false_leaf
    )
    true_ids = np.where(true_leaf, leaf_index[true_at] + padding, node_index[true_at])
    false_ids = np.where(false_leaf, leaf_index[false_at] + padding, node_index[false_at])
    # A tree that is a single leaf: one node whose two branches are that leaf.
    lone = roots[is_leaf[roots]]
    n_inner = len(inner)
    root_ids = np.where(
        is_leaf[roots], n_inner + np.cumsum(is_leaf[roots]) - 1, node_index[roots]
    ).astype(np.int64)
    lone_ids = leaf_index[lone] + padding
    missing = np.asarray(arrays.get("nodes_missing_value_tracks_true", np.zeros(0)))
    targets = position(arrays["target_treeids"], arrays["target_nodeids"])
    n_leaves = int(is_leaf.sum()) + padding
    weights = np.zeros(n_leaves, dtype=dtype)
    target_ids = np.zeros(n_leaves, dtype=np.int64)
    weights_in = _floats(arrays.get("target_weights_as_tensor", arrays.get("target_weights")))
    weights[leaf_index[targets] + padding] = weights_in.astype(dtype)
    target_ids[leaf_index[targets] + padding] = np.asarray(arrays["target_ids"])
    zeros = np.zeros(len(lone), dtype=np.int64)
    out: dict[str, Any] = {
        "nodes_featureids": np.r_[np.asarray(arrays["nodes_featureids"])[inner], zeros],
        "nodes_splits": _tensor(np.r_[thresholds[inner], np.zeros(len(lone), dtype)]),
        "nodes_modes": _tensor(np.r_[codes[inner], np.zeros(len(lone), np.uint8)]),
        "nodes_truenodeids": np.r_[true_ids, lone_ids],
        "nodes_falsenodeids": np.r_[false_ids, lone_ids],
        "nodes_trueleafs": np.r_[true_leaf.astype(np.int64), zeros + 1],
        "nodes_falseleafs": np.r_[false_leaf.astype(np.int64), zeros + 1],
        "leaf_targetids": target_ids,
        "leaf_weights": _tensor(weights),
        "tree_roots": root_ids,
    }
    if len(missing) and np.any(missing[inner]):
        out["nodes_missing_value_tracks_true"] = np.r_[missing[inner].astype(np.int64), zeros]
    return out


def _index(graph: Any, node: NodeProto) -> int:
    return next(i for i, n in enumerate(graph.node) if n.name == node.name)


def _tensor(values: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.ascontiguousarray(values), name="")


def _padding(
    roots: np.ndarray,
    is_leaf: np.ndarray,
    node_index: np.ndarray,
    leaf_index: np.ndarray,
    true_at: np.ndarray,
    false_at: np.ndarray,
    true_leaf: np.ndarray,
    false_leaf: np.ndarray,
) -> int:
    """How many unused leaves go first so that no root with one leaf child and one node child
    has equal true and false ids (some ONNX Runtime releases take that for a single leaf)."""
    inner_roots = roots[~is_leaf[roots]]
    at = node_index[inner_roots]  # each root's row among the interior nodes
    mixed = true_leaf[at] != false_leaf[at]
    if not np.any(mixed):
        return 0
    at = at[mixed]
    leaf_child = np.where(true_leaf[at], true_at[at], false_at[at])
    node_child = np.where(true_leaf[at], false_at[at], true_at[at])
    clashes = node_index[node_child] - leaf_index[leaf_child]
    taken = np.unique(clashes[clashes >= 0])
    free = np.setdiff1d(np.arange(len(taken) + 1), taken)
    return int(free[0])


def set_ml_opset(model: ModelProto) -> None:
    """Import ``ai.onnx.ml`` 5, with the IR version it needs."""
    for entry in model.opset_import:
        if entry.domain == ML_DOMAIN:
            entry.version = ML_OPSET
    needed = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    model.ir_version = max(int(model.ir_version), int(needed))


def _add_base(graph: Any, node: NodeProto, base: list[float], dtype: Any) -> None:
    """``output = node's sum + base``: the node writes a new name and an ``Add`` after it the
    old one."""
    unique = unique_names(graph)
    out = node.output[0]
    summed, values = unique(f"{out}_sum"), unique(f"{out}_base")
    node.output[0] = summed
    graph.initializer.append(numpy_helper.from_array(np.asarray([base], dtype=dtype), values))
    add = helper.make_node("Add", [summed, values], [out], name=unique(f"{node.name}_base"))
    graph.node.insert(_index(graph, node) + 1, add)
