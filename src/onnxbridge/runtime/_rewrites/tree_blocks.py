"""Split large tree-ensemble operators into blocks of trees, for large batches.

ONNX Runtime's ``TreeEnsembleClassifier`` / ``TreeEnsembleRegressor`` kernel walks every tree
for one row before the next row. A forest of fully grown trees has far more nodes than a core's
L2 cache holds (the benchmark forest of ``benchmarks/tree_blocks.py``: 100 trees, 172 000
nodes), so on a large batch every row re-reads the trees from memory. Cut into blocks of a few
trees each, one operator per block, each block walks all the rows while its trees stay in cache,
and the blocks' scores are added (``Sum``), which is much faster on large batches. On one row
there is nothing to gain and each extra operator costs a little, so blocking is a *session setting*
(:attr:`SessionSettings.tree_block_nodes <onnxbridge.runtime._settings.SessionSettings>`), used
for large calls and left off for small ones.

The rewrite keeps the operator's result: each block is the same kind of sum over its own trees,
and the blocks are added once each, so scores differ from the single operator's only by the
order of float32 additions (a few units in the last place). It applies only where that holds:

- ``TreeEnsembleRegressor`` with ``aggregate_function="SUM"`` and ``post_transform="NONE"``
  (``base_values`` go to the first block);
- ``TreeEnsembleClassifier`` with ``post_transform="NONE"`` whose label output nothing reads
  (onnxbridge's own converters take the label from ``ArgMax`` of the probabilities), whose
  weights name every class, and with no ``base_values`` on two classes (ONNX Runtime's binary
  rules): its blocks are regressors over the class columns.

Any other operator, and any model whose ensembles are all below the block size, is left as it is
(:func:`block_tree_ensembles` returns None). The ``.onnx`` file is never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxbridge.runtime._rewrites import Rewrite

__all__ = [
    "DEFAULT_TREE_BLOCK_NODES",
    "ONE_THREAD_TREE_BLOCK_NODES",
    "attributes_of",
    "block_tree_ensembles",
    "tree_blocks",
    "unique_names",
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


def unique_names(graph: Any) -> Callable[[str], str]:
    """``unique(base)``: a node / value name not yet used in ``graph`` (nor by earlier calls)."""
    taken = {n.name for n in graph.node} | {v for n in graph.node for v in n.output}
    taken |= {i.name for i in graph.input} | {i.name for i in graph.initializer}

    def unique(base: str) -> str:
        candidate, i = base, 0
        while candidate in taken:
            i += 1
            candidate = f"{base}_{i}"
        taken.add(candidate)
        return candidate

    return unique


def _plan(attrs: dict[str, Any], max_nodes: int) -> list[np.ndarray] | None:
    """Tree ids per block (consecutive trees, at most ``max_nodes`` nodes a block), or None."""
    trees = attrs.get("nodes_treeids", np.zeros(0, dtype=np.int64))
    if len(trees) <= max_nodes:
        return None
    ids, counts = np.unique(trees, return_counts=True)
    blocks: list[list[int]] = [[]]
    size = 0
    for tree, count in zip(ids.tolist(), counts.tolist(), strict=True):
        if blocks[-1] and size + count > max_nodes:
            blocks.append([])
            size = 0
        blocks[-1].append(tree)
        size += count
    if len(blocks) < 2:
        return None
    return [np.asarray(b, dtype=np.int64) for b in blocks]


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
            elif key.startswith("base_values") and index == 0:
                attributes.append(_attribute(key, value))
                continue
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
    new_nodes.append(
        helper.make_node(
            "Sum", block_outputs, [node.output[-1]], name=name(f"{node.name or 'trees'}_sum")
        )
    )
    return new_nodes


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
