"""Split large tree-ensemble operators into blocks of trees, for large batches.

ONNX Runtime's tree-ensemble kernel (``TreeEnsembleClassifier`` / ``TreeEnsembleRegressor``,
and ``TreeEnsemble`` of ``ai.onnx.ml`` 5) walks every tree for one row before the next row. A
forest of fully grown trees has far more nodes than a core's L2 cache holds (the benchmark
forest of ``benchmarks/tree_blocks.py``: 100 trees, 172 000 nodes), so on a large batch every
row re-reads the trees from memory. Cut into blocks of a few
trees each, one operator per block, each block walks all the rows while its trees stay in cache,
and the blocks' scores are added (``Sum``), which is much faster on large batches. On one row
there is nothing to gain and each extra operator costs a little, so blocking is a *session setting*
(:attr:`SessionSettings.tree_block_nodes <onnxbridge.runtime._settings.SessionSettings>`), used
for large calls and left off for small ones.

The rewrite keeps the operator's result: each block is the same kind of sum over its own trees,
and the blocks are added once each, so scores differ from the single operator's only by the
order of float additions (a few units in the last place, in float32 or float64 as the operator
adds). It applies only where that holds:

- ``TreeEnsembleRegressor`` with ``aggregate_function="SUM"`` and ``post_transform="NONE"``
  (``base_values`` are added after the blocks' ``Sum``: ONNX Runtime adds a base value only to
  the columns a row's leaves write in that operator, and a block may write some columns only. For
  a model whose trees do not write every column for every row — none that a converter writes —
  the blocks give the base to every column, as the ONNX specification does, where the single
  operator left some out);
- ``TreeEnsembleClassifier`` with ``post_transform="NONE"`` whose label output nothing reads
  (onnxbridge's own converters take the label from ``ArgMax`` of the probabilities), whose
  weights name every class, and with no ``base_values`` on two classes (ONNX Runtime's binary
  rules): its blocks are regressors over the class columns;
- ``TreeEnsemble`` (``ai.onnx.ml`` 5) with ``aggregate_function`` SUM or AVERAGE and
  ``post_transform`` NONE, without set-membership splits (``BRANCH_MEMBER``): each tree is found
  by walking from its root (its splits and leaves may lie anywhere in the arrays) and renumbered
  within its block; the blocks sum, and for AVERAGE their sum is divided by the number of all
  trees (``Div``), as the operator does. A block's size counts splits and leaves.

Any other operator, and any model whose ensembles are all below the block size, is left as it is
(:func:`block_tree_ensembles` returns None). The ``.onnx`` file is never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxbridge._onnxfile import tree_runs, unique_names
from onnxbridge.runtime._rewrites import Rewrite

__all__ = [
    "DEFAULT_TREE_BLOCK_NODES",
    "ONE_THREAD_TREE_BLOCK_NODES",
    "attributes_of",
    "block_tree_ensembles",
    "tree_blocks",
]

ML_DOMAIN = "ai.onnx.ml"
# About 0.5 MiB of ONNX Runtime's node records: a block fits in one core's L2 cache on common
# x86 servers (1-2 MiB). This size is for operators that split their rows between several
# intra-op threads, where smaller blocks multiply the hand-offs between threads.
DEFAULT_TREE_BLOCK_NODES = 16384
# Operators that run on one thread (one intra-op thread, or rows split one thread per part) have
# no hand-offs to pay for and are faster on smaller blocks.
ONE_THREAD_TREE_BLOCK_NODES = 8192


def attributes_of(node: Any) -> dict[str, Any]:
    """The node's attributes as numpy arrays (lists, tensors) or plain values (scalars)."""
    from onnx import AttributeProto, numpy_helper

    values: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == AttributeProto.INTS:
            values[a.name] = np.array(a.ints, dtype=np.int64)
        elif a.type == AttributeProto.FLOATS:
            values[a.name] = np.array(a.floats, dtype=np.float32)  # exactly what is stored
        elif a.type == AttributeProto.STRINGS:
            values[a.name] = np.array(list(a.strings), dtype=object)
        elif a.type == AttributeProto.TENSOR:
            values[a.name] = numpy_helper.to_array(a.t)
        elif a.type == AttributeProto.STRING:
            values[a.name] = a.s.decode()
        elif a.type == AttributeProto.INT:
            values[a.name] = int(a.i)
        elif a.type == AttributeProto.FLOAT:
            values[a.name] = float(a.f)
    return values


def _attribute(name: str, value: Any) -> Any:
    """An ``AttributeProto`` for an array of the kind :func:`_attributes` reads."""
    from onnx import AttributeProto, numpy_helper

    attr = AttributeProto(name=name)
    if name.endswith("_as_tensor"):
        attr.type = AttributeProto.TENSOR
        attr.t.CopyFrom(numpy_helper.from_array(value, name=""))
    elif value.dtype == object:
        attr.type = AttributeProto.STRINGS
        attr.strings.extend(value.tolist())
    elif value.dtype.kind == "f":
        attr.type = AttributeProto.FLOATS
        attr.floats.extend(value.tolist())
    else:
        attr.type = AttributeProto.INTS
        attr.ints.extend(value.tolist())
    return attr


def _plan(attrs: dict[str, Any], max_nodes: int) -> list[np.ndarray] | None:
    """Tree ids per block (consecutive trees, at most ``max_nodes`` nodes a block), or None."""
    trees = attrs.get("nodes_treeids", np.zeros(0, dtype=np.int64))
    if len(trees) <= max_nodes:
        return None
    ids, counts = np.unique(trees, return_counts=True)
    return tree_runs(ids, counts, max_nodes)


def _blockable(node: Any, attrs: dict[str, Any], read: set[str], outputs: set[str]) -> bool:
    if node.domain != ML_DOMAIN or attrs.get("post_transform", "NONE") != "NONE":
        return False
    if node.op_type == "TreeEnsembleRegressor":
        return attrs.get("aggregate_function", "SUM") == "SUM"
    if node.op_type != "TreeEnsembleClassifier" or len(node.output) < 2:
        return False
    label = node.output[0]
    if label in read or label in outputs:
        return False
    n_classes = _n_classes(attrs)
    class_ids = set(attrs.get("class_ids", np.zeros(0, dtype=np.int64)).tolist())
    if n_classes < 2 or class_ids != set(range(n_classes)):
        return False
    base = attrs.get("base_values", attrs.get("base_values_as_tensor"))
    return not (n_classes == 2 and base is not None and np.any(base != 0))


def _n_classes(attrs: dict[str, Any]) -> int:
    labels = attrs.get("classlabels_int64s", attrs.get("classlabels_strings"))
    return 0 if labels is None else len(labels)


def _block_nodes(node: Any, attrs: dict[str, Any], plan: list[np.ndarray], name: Any) -> list[Any]:
    """The block operators and the ``Sum`` replacing ``node`` (same scores output)."""
    from onnx import helper

    classifier = node.op_type == "TreeEnsembleClassifier"
    prefix = "class_" if classifier else "target_"
    node_trees = attrs["nodes_treeids"]
    leaf_trees = attrs[f"{prefix}treeids"]
    n_targets = _n_classes(attrs) if classifier else int(attrs.get("n_targets", 1))
    block_outputs = []
    new_nodes = []
    for index, trees in enumerate(plan):
        node_mask = np.isin(node_trees, trees)
        leaf_mask = np.isin(leaf_trees, trees)
        # Tree ids restart at 0 in each block (ONNX Runtime keys nodes by tree and node id).
        first = int(trees[0])
        attributes = [
            helper.make_attribute("n_targets", n_targets),
            helper.make_attribute("aggregate_function", "SUM"),
            helper.make_attribute("post_transform", "NONE"),
        ]
        for key, value in attrs.items():
            if key.startswith("nodes_"):
                mask, out_key = node_mask, key
            elif key.startswith(prefix) and not key.startswith("classlabels"):
                mask, out_key = leaf_mask, "target_" + key[len(prefix) :]
            else:
                continue
            array = value[mask]
            if key.endswith("treeids"):
                array = array - first  # blocks are runs of consecutive trees
            attributes.append(_attribute(out_key, array))
        out = name(f"{node.output[-1]}_block{index}")
        block_outputs.append(out)
        block = helper.make_node(
            "TreeEnsembleRegressor",
            [node.input[0]],
            [out],
            domain=ML_DOMAIN,
            name=name(f"{node.name or node.op_type}_block{index}"),
        )
        block.attribute.extend(attributes)
        new_nodes.append(block)
    base = attrs.get("base_values", attrs.get("base_values_as_tensor"))
    if base is None or not np.any(base != 0):
        new_nodes.append(
            helper.make_node(
                "Sum", block_outputs, [node.output[-1]], name=name(f"{node.name or 'trees'}_sum")
            )
        )
        return new_nodes
    # The base values after the sum: ONNX Runtime adds a base value only to the columns the
    # operator's own leaves write, which a block's may not all be.
    as_row = np.asarray(base, dtype=np.float32).reshape(1, -1)
    prefix = node.name or "trees"
    return new_nodes + _sum_then(block_outputs, node.output[-1], "Add", as_row, name, prefix)


def _sum_then(
    outputs: list[str], out: str, op: str, constant: np.ndarray, name: Any, prefix: str
) -> list[Any]:
    """``out = op(Sum(outputs), constant)``: the blocks' sum, then the base (``Add``) or the
    average (``Div``) the single operator applied."""
    from onnx import helper, numpy_helper

    total, value = name(f"{out}_sum"), name(f"{out}_{op.lower()}_by")
    return [
        helper.make_node("Sum", outputs, [total], name=name(f"{prefix}_sum")),
        helper.make_node(
            "Constant",
            [],
            [value],
            value=numpy_helper.from_array(constant, name=""),
            name=name(f"{prefix}_{op.lower()}_by"),
        ),
        helper.make_node(op, [total, value], [out], name=name(f"{prefix}_{op.lower()}")),
    ]


# ai.onnx.ml opset 5 ``TreeEnsemble``: enumerations are integers there.
V5_OP = "TreeEnsemble"
_V5_AVERAGE, _V5_SUM = 0, 1
_V5_BRANCH_MEMBER = 6
_V5_SCALARS = frozenset({"n_targets", "aggregate_function", "post_transform"})


@dataclass(frozen=True)
class _Forest:
    """The trees of a ``TreeEnsemble`` (opset 5) as found by walking from their roots.

    ``nodes_*`` hold the splits, ``leaf_*`` the leaves: a child id indexes the leaves where
    ``true_leaf`` / ``false_leaf`` say so, the splits otherwise.
    """

    roots: np.ndarray
    true_ids: np.ndarray
    false_ids: np.ndarray
    true_leaf: np.ndarray
    false_leaf: np.ndarray
    node_tree: np.ndarray  # the tree (index into roots) of each split; -1: no root reaches it
    n_leaves: int

    def leaf_refs(self, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(owner, leaf)`` of every reference from a reached split to a leaf, ``owner``
        being given per split (its tree, its block)."""
        reached = self.node_tree >= 0
        on_true = np.flatnonzero(reached & self.true_leaf)
        on_false = np.flatnonzero(reached & self.false_leaf)
        owners = np.concatenate([owner[on_true], owner[on_false]])
        return owners, np.concatenate([self.true_ids[on_true], self.false_ids[on_false]])

    def leaf_keys(self, owner: np.ndarray) -> np.ndarray:
        """The leaves each owner names, once each, as sorted keys ``owner * n_leaves + leaf``
        (a single-leaf tree's root names its leaf twice; a leaf may be named by two owners)."""
        owners, leaves = self.leaf_refs(owner)
        by_leaf = np.full(self.n_leaves, -1, dtype=np.int64)
        by_leaf[leaves] = owners
        if not np.array_equal(by_leaf[leaves], owners):  # a leaf shared by owners: rare
            return np.unique(owners * self.n_leaves + leaves)
        named = np.flatnonzero(by_leaf >= 0)
        keys = by_leaf[named] * self.n_leaves + named
        return keys[np.argsort(by_leaf[named], kind="stable")]


def _v5_blockable(node: Any, attrs: dict[str, Any]) -> bool:
    """Whether blocks of ``node`` (a ``TreeEnsemble``) add up to its scores."""
    if node.domain != ML_DOMAIN or len(node.input) != 1 or len(node.output) != 1:
        return False
    if attrs.get("post_transform", 0) != 0:
        return False
    if attrs.get("aggregate_function", _V5_SUM) not in (_V5_SUM, _V5_AVERAGE):
        return False
    known = _V5_SCALARS | {"tree_roots", "membership_values"}
    if any(k not in known and not k.startswith(("nodes_", "leaf_")) for k in attrs):
        return False
    # Set-membership splits keep their values in one list shared by all splits: left as is.
    return not np.any(attrs.get("nodes_modes", np.zeros(0)) == _V5_BRANCH_MEMBER)


def _walk(
    roots: np.ndarray,
    children: tuple[np.ndarray, np.ndarray],
    leaves: tuple[np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """The tree of each split, walking all trees at once level by level from their roots
    (-1 for splits no root reaches), or None when a split is reached twice (a shared subtree,
    a cycle), which blocks could not keep."""
    (true_ids, false_ids), (true_leaf, false_leaf) = children, leaves
    node_tree = np.full(len(true_ids), -1, dtype=np.int64)
    frontier, owner = roots, np.arange(len(roots), dtype=np.int64)
    visits = 0
    while frontier.size:
        visits += frontier.size
        # Reached on an earlier level, or more visits than splits (one reached twice on a level).
        if visits > len(node_tree) or np.any(node_tree[frontier] >= 0):
            return None
        node_tree[frontier] = owner
        go_true, go_false = ~true_leaf[frontier], ~false_leaf[frontier]
        frontier = np.concatenate([true_ids[frontier][go_true], false_ids[frontier][go_false]])
        owner = np.concatenate([owner[go_true], owner[go_false]])
    # Each visit marked a split once unless two on a level were the same one.
    return node_tree if visits == np.count_nonzero(node_tree >= 0) else None


def _v5_forest(attrs: dict[str, Any]) -> _Forest | None:
    """The trees of a ``TreeEnsemble``, or None when its arrays do not describe separate trees
    that blocks could hold (ONNX Runtime refuses most such nodes anyway)."""
    id_names = ("tree_roots", "nodes_truenodeids", "nodes_falsenodeids")
    flag_names = ("nodes_trueleafs", "nodes_falseleafs")
    required = (*id_names, *flag_names, "leaf_weights", "leaf_targetids")
    if any(name not in attrs for name in required):
        return None
    roots, true_ids, false_ids = (np.asarray(attrs[name], dtype=np.int64) for name in id_names)
    true_leaf, false_leaf = (np.asarray(attrs[name]) != 0 for name in flag_names)
    n_nodes, n_leaves = len(true_ids), np.size(attrs["leaf_weights"])
    if not (len(roots) and n_nodes and n_leaves):
        return None
    for key, value in attrs.items():
        if key.startswith("nodes_") and np.size(value) not in (0, n_nodes):
            return None
        if key.startswith("leaf_") and np.size(value) != n_leaves:
            return None
    for ids, leaf in ((true_ids, true_leaf), (false_ids, false_leaf)):
        if np.any((ids < 0) | (ids >= np.where(leaf, n_leaves, n_nodes))):
            return None
    if roots.min() < 0 or roots.max() >= n_nodes:
        return None
    # A root with one leaf child and one split child under the same index may be read as a
    # single-leaf tree (see _padding): the blocks could not promise the same scores, left as is.
    mixed = true_leaf[roots] != false_leaf[roots]
    if np.any(true_ids[roots][mixed] == false_ids[roots][mixed]):
        return None
    node_tree = _walk(roots, (true_ids, false_ids), (true_leaf, false_leaf))
    if node_tree is None:
        return None
    return _Forest(roots, true_ids, false_ids, true_leaf, false_leaf, node_tree, n_leaves)


def _v5_plan(forest: _Forest, max_nodes: int) -> list[np.ndarray] | None:
    """Tree indices per block; a tree counts its splits and its leaves."""
    n_trees = len(forest.roots)
    splits = np.bincount(forest.node_tree[forest.node_tree >= 0], minlength=n_trees)
    keys = forest.leaf_keys(forest.node_tree)
    counts = splits + np.bincount(keys // forest.n_leaves, minlength=n_trees)
    return tree_runs(np.arange(n_trees, dtype=np.int64), counts, max_nodes)


@dataclass(frozen=True)
class _Renumbered:
    """Splits and leaves grouped by block, each block's ids restarting at 0.

    Block ``b`` holds the splits ``order[node_starts[b]:node_starts[b + 1]]`` and the leaves
    ``leaf_order[leaf_starts[b]:leaf_starts[b + 1]]`` (in their original order); ``new_true``
    / ``new_false`` are every split's child ids within its block.
    """

    order: np.ndarray
    node_starts: np.ndarray
    leaf_order: np.ndarray
    leaf_starts: np.ndarray
    new_node: np.ndarray
    new_true: np.ndarray
    new_false: np.ndarray


def _renumber(forest: _Forest, plan: list[np.ndarray]) -> _Renumbered:
    """Every split's and leaf's id within its block, all blocks at once."""
    n_blocks, n_leaves = len(plan), forest.n_leaves
    block_of_tree = np.repeat(np.arange(n_blocks), [len(trees) for trees in plan])
    reached = np.flatnonzero(forest.node_tree >= 0)
    node_block = np.full(len(forest.node_tree), -1, dtype=np.int64)
    node_block[reached] = block_of_tree[forest.node_tree[reached]]
    sort = np.argsort(node_block[reached], kind="stable")
    order = reached[sort]
    node_starts = np.concatenate(
        [[0], np.cumsum(np.bincount(node_block[reached], minlength=n_blocks))]
    )
    new_node = np.full(len(node_block), -1, dtype=np.int64)
    new_node[order] = np.arange(len(order)) - node_starts[node_block[order]]
    # A block's leaves: those its splits name, once each (a leaf named in two blocks is in both).
    keys = forest.leaf_keys(node_block)
    leaf_starts = np.searchsorted(keys // n_leaves, np.arange(n_blocks + 1))
    news = []
    for ids, is_leaf in (
        (forest.true_ids, forest.true_leaf),
        (forest.false_ids, forest.false_leaf),
    ):
        new = np.full(len(ids), -1, dtype=np.int64)
        to_leaf = reached[is_leaf[reached]]
        to_node = reached[~is_leaf[reached]]
        block = node_block[to_leaf]
        new[to_leaf] = np.searchsorted(keys, block * n_leaves + ids[to_leaf]) - leaf_starts[block]
        new[to_node] = new_node[ids[to_node]]
        news.append(new)
    return _Renumbered(order, node_starts, keys % n_leaves, leaf_starts, new_node, *news)


def _padding(
    roots: np.ndarray,
    true_ids: np.ndarray,
    false_ids: np.ndarray,
    true_leaf: np.ndarray,
    false_leaf: np.ndarray,
) -> int:
    """How many unused leaves to put first in a block so that no root has one leaf child and
    one split child under the same index.

    The operator writes a single-leaf tree as a root whose two children are the same leaf; a
    runtime that looks only at the two ids (ONNX Runtime has done so) would take any root with
    equal child ids for a single leaf. Shifting the leaf ids moves a leaf child away from its
    split sibling's id; single-leaf roots and roots of two leaves or two splits keep their ids
    equal or distinct as they were.
    """
    on_true, on_false = true_leaf[roots], false_leaf[roots]
    mixed = on_true != on_false
    leaf_id = np.where(on_true, true_ids[roots], false_ids[roots])[mixed]
    node_id = np.where(on_true, false_ids[roots], true_ids[roots])[mixed]
    gaps = node_id - leaf_id
    taken = np.unique(gaps[gaps >= 0])
    free = np.flatnonzero(taken != np.arange(len(taken)))
    return int(free[0]) if free.size else len(taken)


def _v5_attribute(name: str, value: np.ndarray, kind: Any) -> Any:
    """An ``AttributeProto`` of the same kind (ints, floats, tensor) as the original one."""
    from onnx import AttributeProto, numpy_helper

    attr = AttributeProto(name=name)
    attr.type = kind
    if kind == AttributeProto.TENSOR:
        attr.t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(value), name=""))
    elif kind == AttributeProto.FLOATS:
        attr.floats.extend(value.tolist())
    else:
        attr.ints.extend(value.tolist())
    return attr


def _v5_block_attributes(
    attrs: dict[str, Any],
    kinds: dict[str, Any],
    forest: _Forest,
    trees: np.ndarray,
    ids: _Renumbered,
    index: int,
) -> list[Any]:
    """The attributes of block ``index`` (trees ``trees``), a sum over its trees."""
    from onnx import helper

    nodes = ids.order[ids.node_starts[index] : ids.node_starts[index + 1]]
    leaves = ids.leaf_order[ids.leaf_starts[index] : ids.leaf_starts[index + 1]]
    roots = ids.new_node[forest.roots[trees]]
    true_ids, false_ids = ids.new_true[nodes], ids.new_false[nodes]
    true_leaf, false_leaf = forest.true_leaf[nodes], forest.false_leaf[nodes]
    pad = _padding(roots, true_ids, false_ids, true_leaf, false_leaf)
    replaced = {
        "tree_roots": roots,
        "nodes_truenodeids": true_ids + pad * true_leaf,
        "nodes_falsenodeids": false_ids + pad * false_leaf,
    }
    attributes = [
        helper.make_attribute("aggregate_function", _V5_SUM),
        helper.make_attribute("post_transform", 0),
    ]
    if "n_targets" in attrs:
        attributes.append(helper.make_attribute("n_targets", int(attrs["n_targets"])))
    for key, value in attrs.items():
        if key in replaced:
            array = replaced[key]
        elif key.startswith("nodes_") and np.size(value):
            array = np.ravel(value)[nodes]
        elif key.startswith("leaf_"):
            array = np.ravel(value)[leaves]
            array = np.concatenate([np.zeros(pad, dtype=array.dtype), array])
        else:
            continue  # scalars (set above), empty lists, membership values of no split
        attributes.append(_v5_attribute(key, array, kinds[key]))
    return attributes


def _v5_blocks(node: Any, max_nodes: int, name: Callable[[str], str]) -> list[Any] | None:
    """The block operators and the ``Sum`` (and, to average, ``Div``) replacing ``node``, a
    ``TreeEnsemble``, or None when it is small or its blocks would not keep its scores."""
    from onnx import helper

    attrs = attributes_of(node)
    size = np.size(attrs.get("nodes_truenodeids", 0)) + np.size(attrs.get("leaf_weights", 0))
    if size <= max_nodes or not _v5_blockable(node, attrs):
        return None
    forest = _v5_forest(attrs)
    plan = None if forest is None else _v5_plan(forest, max_nodes)
    if forest is None or plan is None:
        return None
    kinds = {a.name: a.type for a in node.attribute}
    ids = _renumber(forest, plan)
    base = node.name or node.op_type
    new_nodes, outputs = [], []
    for index, trees in enumerate(plan):
        outputs.append(name(f"{node.output[0]}_block{index}"))
        block = helper.make_node(
            V5_OP,
            [node.input[0]],
            [outputs[-1]],
            domain=ML_DOMAIN,
            name=name(f"{base}_block{index}"),
        )
        block.attribute.extend(_v5_block_attributes(attrs, kinds, forest, trees, ids, index))
        new_nodes.append(block)
    if attrs.get("aggregate_function", _V5_SUM) == _V5_SUM:
        new_nodes.append(
            helper.make_node("Sum", outputs, [node.output[0]], name=name(f"{base}_sum"))
        )
        return new_nodes
    # The operator divides its sum over all trees by their number, in the scores' type.
    n_trees = np.array(len(forest.roots), dtype=np.asarray(attrs["leaf_weights"]).dtype)
    return new_nodes + _sum_then(outputs, node.output[0], "Div", n_trees, name, base)


def block_tree_ensembles(model: bytes, max_nodes: int = DEFAULT_TREE_BLOCK_NODES) -> bytes | None:
    """``model`` with every large tree-ensemble operator split into blocks, or None.

    Args:
        model: a serialized ONNX model.
        max_nodes: the most nodes one block holds (a block has at least one tree).

    Returns:
        The rewritten model's bytes, or None when no operator qualifies (see the module
        docstring) or none has more than ``max_nodes`` nodes.
    """
    import onnx

    proto = onnx.load_model_from_string(model)
    graph = proto.graph
    read = {name for n in graph.node for name in n.input}
    outputs = {o.name for o in graph.output}
    unique = unique_names(graph)
    rewritten: list[Any] = []
    changed = False
    for node in graph.node:
        if node.op_type in ("TreeEnsembleRegressor", "TreeEnsembleClassifier"):
            attrs = attributes_of(node)
            plan = _plan(attrs, max_nodes)
            if plan is not None and _blockable(node, attrs, read, outputs):
                rewritten.extend(_block_nodes(node, attrs, plan, unique))
                changed = True
                continue
        elif node.op_type == V5_OP:
            blocks = _v5_blocks(node, max_nodes, unique)
            if blocks is not None:
                rewritten.extend(blocks)
                changed = True
                continue
        rewritten.append(node)
    if not changed:
        return None
    del graph.node[:]
    graph.node.extend(rewritten)
    if not any(o.domain in ("", "ai.onnx") for o in proto.opset_import):
        proto.opset_import.append(onnx.helper.make_opsetid("", 13))
    return proto.SerializeToString()


def _has_tree_ensemble(model: bytes) -> bool:
    """Whether ``model`` may hold a tree-ensemble operator (a byte search, before parsing)."""
    return b"TreeEnsemble" in model


def tree_blocks(max_nodes: int = DEFAULT_TREE_BLOCK_NODES) -> Rewrite:
    """The pass splitting tree ensembles of more than ``max_nodes`` nodes into blocks."""
    return Rewrite(
        f"tree_blocks({max_nodes})",
        _has_tree_ensemble,
        lambda model: block_tree_ensembles(model, max_nodes),
    )
