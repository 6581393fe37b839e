"""RandomTreesEmbedding: the one-hot code of the leaf each tree sends a row to.

skl2onnx's converter refuses the default ``sparse_output=True`` ("cannot convert the model with
sparse outputs"), so this one replaces it; the graph's output is dense, equal value for value
to scikit-learn's (densified) result. ``[N, F] -> transformed [N, total leaves]``.

One ``ai.onnx.ml`` ``TreeEnsembleRegressor`` writes, per tree, the output column of the reached
leaf (the tree's offset plus the leaf's rank in ``one_hot_encoder_.categories_``; small integers,
exact in float32), and ``ScatterElements`` sets those columns of a zero ``[N, K]`` matrix to 1.
scikit-learn's trees compare ``float32(x) <= threshold``: thresholds are rounded down to float32
(:func:`onnxbridge.convert._tree_ensemble.floor_float32`) and float64 input is cast to float32
first, which is exactly what scikit-learn does to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper
from sklearn.datasets import make_regression
from sklearn.ensemble import RandomTreesEmbedding

from onnxbridge.convert._converters._graph import Graph, set_float_output, single_output_parser
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.convert._tree_ensemble import floor_float32, from_sklearn_trees
from onnxbridge.errors import ConversionError


def _n_columns(model: Any) -> int:
    return int(sum(len(c) for c in model.one_hot_encoder_.categories_))


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, _n_columns(operator.raw_operator)])


def _leaf_columns(model: Any, tree: np.ndarray, node: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """The output column of every leaf row (tree offset + position among its categories)."""
    categories = model.one_hot_encoder_.categories_
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in categories])[:-1]])
    columns = np.full(len(tree), -1, dtype=np.int64)
    for row in np.flatnonzero(leaf):
        t = int(tree[row])
        position = np.searchsorted(categories[t], node[row])
        if position >= len(categories[t]) or categories[t][position] != node[row]:
            raise ConversionError(
                f"RandomTreesEmbedding: leaf {int(node[row])} of tree {t} has no column in "
                "one_hot_encoder_ (it received no training row); refit the model"
            )
        columns[row] = offsets[t] + position
    return columns


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    spec = from_sklearn_trees(model.estimators_, lambda value: [0.0], 1, [0.0])
    leaf = spec.is_leaf
    columns = _leaf_columns(model, spec.tree, spec.node, leaf)
    thresholds = np.where(leaf, 0.0, floor_float32(spec.threshold)).astype(np.float32)
    leaf_rows = np.flatnonzero(leaf)
    x = g.input if g.dtype == np.float32 else g.node("Cast", [g.input], to=TensorProto.FLOAT)
    codes = g.name("leaf_column")
    container.add_node(
        "TreeEnsembleRegressor",
        [x],
        [codes],
        op_domain="ai.onnx.ml",
        op_version=3,
        name=scope.get_unique_operator_name("TreeEnsembleRegressor"),
        nodes_treeids=[int(v) for v in spec.tree],
        nodes_nodeids=[int(v) for v in spec.node],
        nodes_featureids=[int(max(v, 0)) for v in spec.feature],
        nodes_modes=["LEAF" if is_leaf else "BRANCH_LEQ" for is_leaf in leaf],
        nodes_values=[float(v) for v in thresholds],
        nodes_truenodeids=[int(max(v, 0)) for v in spec.left],
        nodes_falsenodeids=[int(max(v, 0)) for v in spec.right],
        nodes_missing_value_tracks_true=[int(bool(v)) for v in spec.missing_left],
        target_treeids=[int(spec.tree[r]) for r in leaf_rows],
        target_nodeids=[int(spec.node[r]) for r in leaf_rows],
        target_ids=[int(spec.tree[r]) for r in leaf_rows],
        target_weights=[float(columns[r]) for r in leaf_rows],
        n_targets=int(spec.n_trees),
        aggregate_function="SUM",
        post_transform="NONE",
    )
    index = g.node("Cast", [codes], to=TensorProto.INT64)  # [N, T]
    rows = g.node("Shape", [g.input], start=0, end=1)
    size = g.node("Concat", [rows, g.int64([_n_columns(model)])], axis=0)
    zero = helper.make_tensor("value", g.onnx_type, [1], [0.0])
    empty = g.node("ConstantOfShape", [size], value=zero)
    ones = g.node(
        "Add",
        [g.node("Mul", [g.node("Cast", [index], to=g.onnx_type), g.const(0.0)]), g.const(1.0)],
    )
    g.node("ScatterElements", [empty, index, ones], g.output(), axis=1)


def _example() -> tuple[Any, Any]:
    X, _ = make_regression(n_samples=100, n_features=5, random_state=0)
    return RandomTreesEmbedding(n_estimators=10, max_depth=3, random_state=0).fit(X), X


register_converter(
    ConverterSpec(
        RandomTreesEmbedding,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses the default sparse_output=True; the graph writes it densely",
        # skl2onnx's own parser for it hard-codes its converter's name.
        parser=single_output_parser,
    )
)
