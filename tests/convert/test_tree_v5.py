"""Tree ensembles written as ``ai.onnx.ml`` 5 ``TreeEnsemble``: the same predictions as the
opset-3 operators, in a smaller model, wherever every leaf writes one value."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from lightgbm import LGBMRegressor
from onnx import helper, numpy_helper
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor
from xgboost import XGBRegressor

from onnxbridge import convert_estimator

ML = "ai.onnx.ml"


def _regression(n: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(n_samples=n, n_features=6, noise=5.0, random_state=0)
    return X.astype(np.float32), y


def _classification(n: int = 1500, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=n, n_features=6, n_informative=4, n_classes=classes, random_state=0
    )
    return X.astype(np.float32), y


def _rows(n: int = 4000, features: int = 6) -> np.ndarray:
    rows = np.random.default_rng(1).normal(scale=2.0, size=(n, features)).astype(np.float32)
    rows[::9, 2] = np.nan
    return rows


def _run(model: onnx.ModelProto, rows: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: rows})


def _tree_ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node if n.domain == ML and "Tree" in n.op_type]


def _ml_opset(model: onnx.ModelProto) -> int:
    return max(o.version for o in model.opset_import if o.domain == ML)


CASES = [
    pytest.param(lambda: RandomForestRegressor(n_estimators=15, random_state=0), "r", id="RF"),
    pytest.param(lambda: ExtraTreesRegressor(n_estimators=10, random_state=0), "r", id="ET"),
    pytest.param(lambda: GradientBoostingRegressor(random_state=0), "r", id="GBR"),
    pytest.param(lambda: HistGradientBoostingRegressor(random_state=0), "r", id="HGBR"),
    pytest.param(lambda: DecisionTreeRegressor(max_depth=6), "r", id="tree"),
    pytest.param(lambda: XGBRegressor(n_estimators=20, max_depth=4), "r", id="XGB"),
    pytest.param(lambda: LGBMRegressor(n_estimators=20, verbose=-1), "r", id="LGBM"),
    pytest.param(
        lambda: make_pipeline(StandardScaler(), GradientBoostingRegressor(random_state=0)),
        "r",
        id="scaler+GBR",
    ),
    pytest.param(lambda: GradientBoostingClassifier(random_state=0), "c", id="GBC-3"),
    pytest.param(lambda: HistGradientBoostingClassifier(random_state=0), "c", id="HGBC-3"),
]


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(("make", "task"), CASES)
def test_opset5_ensemble_predicts_exactly_like_opset3(make, task, precision) -> None:
    X, y = _regression() if task == "r" else _classification()
    model = make().fit(X, y)
    default = convert_estimator(model, X[:100], precision=precision)
    pinned = convert_estimator(model, X[:100], precision=precision, ml_opset=3)
    assert _tree_ops(default.model) == ["TreeEnsemble"]
    assert _ml_opset(default.model) == 5
    assert default.metadata.opsets[ML] == 5
    assert "TreeEnsemble" not in _tree_ops(pinned.model)
    assert _ml_opset(pinned.model) <= 3
    rows = _rows().astype(np.float64 if precision == "double" else np.float32)
    for new, old in zip(_run(default.model, rows), _run(pinned.model, rows), strict=True):
        np.testing.assert_array_equal(new, old)
    assert default.model.ByteSize() < pinned.model.ByteSize()
    onnx.checker.check_model(default.model, full_check=True)


def test_forest_classifier_keeps_the_classifier_operator() -> None:
    # Its leaves hold a probability per class: opset 5 would need a copy of every tree per class.
    X, y = _classification()
    model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    result = convert_estimator(model, X[:100], precision="float")
    assert _tree_ops(result.model) == ["TreeEnsembleClassifier"]
    assert _ml_opset(result.model) <= 3


def _v5_attributes(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    (node,) = [n for n in model.graph.node if n.op_type == "TreeEnsemble"]
    out = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        out[attribute.name] = (
            numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.array(value)
        )
    return out


def test_a_root_with_a_leaf_and_a_node_child_keeps_its_tree() -> None:
    # Rows with x0 < -1 all have the same target: every tree's root splits there, its true
    # (left) child is a pure leaf and its false child a subtree. Leaf and node ids are separate
    # numbers, and some ONNX Runtime releases read a root whose two ids are equal as a one-leaf
    # tree: the ids written must differ.
    X, _ = _regression(2000)
    y = np.where(X[:, 0] < -1, 50.0, np.sin(X[:, 1]) * 10 + X[:, 2])
    model = RandomForestRegressor(
        n_estimators=6, bootstrap=False, max_features=None, max_depth=5, random_state=0
    ).fit(X, y)
    result = convert_estimator(model, X[:100], precision="float")
    attrs = _v5_attributes(result.model)
    roots = attrs["tree_roots"]
    assert np.all(attrs["nodes_trueleafs"][roots] == 1)
    assert np.all(attrs["nodes_falseleafs"][roots] == 0)
    assert np.all(attrs["nodes_truenodeids"][roots] != attrs["nodes_falsenodeids"][roots])
    rows = _rows()
    (got,) = _run(result.model, rows)
    ok = ~np.isnan(rows).any(axis=1)
    np.testing.assert_allclose(got.ravel()[ok], model.predict(rows[ok]), rtol=1e-5, atol=1e-4)


def test_a_tree_that_is_a_single_leaf() -> None:
    X, _ = _regression(300)
    model = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(X, np.full(300, 3.0))
    result = convert_estimator(model, X[:50], precision="float")
    attrs = _v5_attributes(result.model)
    roots = attrs["tree_roots"]
    assert np.all(attrs["nodes_truenodeids"][roots] == attrs["nodes_falsenodeids"][roots])
    rows = np.nan_to_num(_rows())
    (got,) = _run(result.model, rows)
    np.testing.assert_allclose(got.ravel(), model.predict(rows), rtol=1e-6)


def test_text_categories_keep_opset3() -> None:
    # A category column is coded with ai.onnx.ml LabelEncoder, whose attributes change at
    # ai.onnx.ml 4: the opset-5 import would change its meaning, so the model stays at 3.
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=600),
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], size=600)),
        }
    )
    y = frame["x"] * 2 + (frame["colour"] == "red") * 5
    model = HistGradientBoostingRegressor(categorical_features="from_dtype", random_state=0)
    model.fit(frame, y)
    result = convert_estimator(model, frame.head(100))
    assert "LabelEncoder" in [n.op_type for n in result.model.graph.node]
    assert _ml_opset(result.model) <= 3
    assert "TreeEnsemble" not in _tree_ops(result.model)
    assert result.check is not None and result.check.ok


def test_node_attributes_are_the_fitted_arrays() -> None:
    X, y = _regression(5000)
    tree = DecisionTreeRegressor(random_state=0).fit(X, y)
    t = tree.tree_
    result = convert_estimator(tree, X[:100], precision="float")
    attrs = _v5_attributes(result.model)
    leaf = t.children_left < 0
    inner = np.flatnonzero(~leaf)
    np.testing.assert_array_equal(attrs["tree_roots"], [0])
    np.testing.assert_array_equal(attrs["nodes_featureids"], t.feature[inner])
    np.testing.assert_array_equal(attrs["nodes_modes"], np.zeros(len(inner)))  # BRANCH_LEQ
    assert attrs["nodes_splits"].dtype == np.float32
    # Thresholds rounded down to float32, as the opset-3 form: float32(x) <= t keeps decisions.
    assert np.all(attrs["nodes_splits"].astype(np.float64) <= t.threshold[inner])
    # Children: interior nodes and leaves each numbered in the tree's order.
    node_id = np.cumsum(~leaf) - 1
    leaf_id = np.cumsum(leaf) - 1
    for side, children in (("true", t.children_left), ("false", t.children_right)):
        child = children[inner]
        np.testing.assert_array_equal(attrs[f"nodes_{side}leafs"], leaf[child])
        expected = np.where(leaf[child], leaf_id[child], node_id[child])
        np.testing.assert_array_equal(attrs[f"nodes_{side}nodeids"], expected)
    np.testing.assert_array_equal(attrs["leaf_weights"], t.value[leaf, 0, 0].astype(np.float32))
    np.testing.assert_array_equal(attrs["leaf_targetids"], np.zeros(int(leaf.sum())))
    (value,) = _run(result.model, X)
    np.testing.assert_array_equal(value.ravel(), tree.predict(X).astype(np.float32))


def test_an_onnx_runtime_without_the_opset5_kernel_keeps_opset3(monkeypatch) -> None:
    # ONNX Runtime 1.20 loads ai.onnx.ml 5 but has no TreeEnsemble kernel: the probe must run
    # the operator, and where it does not run the ensemble stays TreeEnsembleRegressor.
    from onnxbridge.convert import _core
    from onnxbridge.convert._opsets import onnxruntime_runs_tree_ensemble

    assert onnxruntime_runs_tree_ensemble()  # the installed ONNX Runtime has the kernel
    monkeypatch.setattr(_core, "onnxruntime_runs_tree_ensemble", lambda: False)
    X, y = _regression(600)
    model = GradientBoostingRegressor(n_estimators=10, random_state=0).fit(X, y)
    result = convert_estimator(model, X[:100], precision="float")
    assert _tree_ops(result.model) == ["TreeEnsembleRegressor"]
    assert _ml_opset(result.model) <= 3
    (value,) = _run(result.model, X)
    np.testing.assert_allclose(value.ravel(), model.predict(X), rtol=1e-5, atol=1e-3)


def _blocks(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    ops = ("TreeEnsemble", "TreeEnsembleRegressor", "TreeEnsembleClassifier")
    return [n for n in model.graph.node if n.domain == ML and n.op_type in ops]


def _block_size(node: onnx.NodeProto) -> tuple[int, int]:
    """(trees, splits and the leaves they reach) of a tree-ensemble node."""
    attrs = {a.name: np.array(helper.get_attribute_value(a)) for a in node.attribute}
    if node.op_type != "TreeEnsemble":
        return len(np.unique(attrs["nodes_treeids"])), len(attrs["nodes_treeids"])
    leaves = set()
    for side in ("true", "false"):
        is_leaf = attrs[f"nodes_{side}leafs"] == 1
        leaves |= set(attrs[f"nodes_{side}nodeids"][is_leaf].tolist())
    return len(attrs["tree_roots"]), len(attrs["nodes_featureids"]) + len(leaves)


BLOCK_CASES = [
    pytest.param(lambda: RandomForestRegressor(n_estimators=12, random_state=0), "r", id="RF"),
    pytest.param(lambda: GradientBoostingRegressor(random_state=0), "r", id="GBR"),
    pytest.param(lambda: HistGradientBoostingRegressor(random_state=0), "r", id="HGBR"),
    pytest.param(lambda: XGBRegressor(n_estimators=30, max_depth=5), "r", id="XGB"),
    pytest.param(lambda: LGBMRegressor(n_estimators=30, verbose=-1), "r", id="LGBM"),
    pytest.param(lambda: GradientBoostingClassifier(random_state=0), "c", id="GBC-3"),
    pytest.param(lambda: RandomForestClassifier(n_estimators=8, random_state=0), "c", id="RFC-3"),
    pytest.param(
        lambda: ExtraTreesClassifier(n_estimators=12, max_depth=7, random_state=0),
        "c2",
        id="ETC-2-shallow",
    ),
]


@pytest.mark.parametrize("ml_opset", [None, 3])
@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(("make", "task"), BLOCK_CASES)
def test_a_big_ensemble_is_written_in_blocks_of_whole_trees(
    make, task, precision, ml_opset
) -> None:
    X, y = _regression() if task == "r" else _classification(classes=3 if task == "c" else 2)
    model = make().fit(X, y)
    options = {"precision": precision, "ml_opset": ml_opset}
    whole = convert_estimator(model, X[:100], tree_block_nodes=0, **options)
    ((trees, nodes),) = [_block_size(n) for n in _blocks(whole.model)]
    limit = nodes // 5
    blocked = convert_estimator(model, X[:100], tree_block_nodes=limit, **options)
    assert {n.op_type for n in _blocks(blocked.model)} == {n.op_type for n in _blocks(whole.model)}
    sizes = [_block_size(n) for n in _blocks(blocked.model)]
    assert len(sizes) >= 5
    assert sum(t for t, _ in sizes) == trees  # every tree once
    assert all(n <= limit or t == 1 for t, n in sizes)  # a bigger tree is a block of its own
    # The float64 graph's ensemble writes each tree's leaf to the tree's own column: each
    # block writes its trees' columns only, joined in order; other ensembles add their blocks.
    joins = {"Sum", "Concat"}
    (joined,) = [n for n in blocked.model.graph.node if n.op_type in joins]
    assert joined.op_type == ("Concat" if precision == "double" else "Sum")
    scores = [n.output[-1] for n in _blocks(blocked.model)]  # a classifier's are its 2nd
    assert list(joined.input) == scores
    if precision == "double":
        widths = [
            helper.get_attribute_value(a)
            for n in _blocks(blocked.model)
            for a in n.attribute
            if a.name == "n_targets"
        ]
        assert widths == [t for t, _ in sizes]
    assert blocked.check is not None and blocked.check.ok
    onnx.checker.check_model(blocked.model, full_check=True)
    rows = _rows().astype(np.float64 if precision == "double" else np.float32)
    for got, want in zip(_run(blocked.model, rows), _run(whole.model, rows), strict=True):
        if precision == "double" or got.dtype.kind != "f":
            # The float64 graph's ensemble writes each tree's leaf index to the tree's own
            # column: the blocks' sum adds zeros, which is exact (and labels are the same).
            np.testing.assert_array_equal(got, want)
        else:
            # The float32 scores are added in another order: the last places may differ.
            scale = np.abs(want).max()
            np.testing.assert_allclose(got, want, rtol=0, atol=scale * 4e-7 * len(sizes))


@pytest.mark.parametrize("ml_opset", [None, 3])
@pytest.mark.parametrize(
    "make",
    [
        lambda: GradientBoostingClassifier(n_estimators=1, random_state=0),
        lambda: HistGradientBoostingClassifier(max_iter=1, random_state=0),
    ],
    ids=["GBC", "HGBC"],
)
def test_blocks_that_write_columns_of_their_own_keep_their_base_scores(make, ml_opset) -> None:
    # One round of a 3-class booster: one tree per class, each writing its own column, with a
    # base score per column. One tree per block: the blocks' columns are joined, and each
    # keeps its column's base score.
    X, y = _classification()
    model = make().fit(X, y)
    whole = convert_estimator(model, X[:100], precision="float", ml_opset=ml_opset)
    blocked = convert_estimator(
        model, X[:100], precision="float", ml_opset=ml_opset, tree_block_nodes=1
    )
    assert len(_blocks(blocked.model)) == 3
    assert "Concat" in [n.op_type for n in blocked.model.graph.node]
    assert blocked.check is not None and blocked.check.ok
    rows = _rows()
    for got, want in zip(_run(blocked.model, rows), _run(whole.model, rows), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "make",
    [
        lambda: GradientBoostingClassifier(n_estimators=2, max_depth=1, random_state=0),
        lambda: HistGradientBoostingClassifier(max_iter=2, max_depth=2, random_state=0),
    ],
    ids=["GBC", "HGBC"],
)
def test_blocks_that_are_added_keep_every_columns_base_score(make) -> None:
    # Two rounds of a 3-class booster in ai.onnx.ml 3, one tree per block: the first block
    # writes class 0's column only, and ONNX Runtime would add no base score to the others.
    X, y = _classification()
    model = make().fit(X, y)
    options = {"precision": "float", "ml_opset": 3}
    whole = convert_estimator(model, X[:100], **options)
    blocked = convert_estimator(model, X[:100], tree_block_nodes=1, **options)
    assert len(_blocks(blocked.model)) == 6
    assert "Sum" in [n.op_type for n in blocked.model.graph.node]
    assert blocked.check is not None and blocked.check.ok
    rows = _rows()
    got, want = _run(blocked.model, rows), _run(whole.model, rows)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-6)
    known = ~np.isnan(rows).any(axis=1)  # GradientBoostingClassifier refuses missing values
    expected = model.predict_proba(rows[known].astype(np.float64))
    np.testing.assert_allclose(got[1][known], expected, atol=1e-5)


def test_the_default_keeps_small_ensembles_whole_and_blocks_a_validated_model(tmp_path) -> None:
    from onnxbridge.validate import validate_model

    X, y = _regression(3000)
    model = ExtraTreesRegressor(n_estimators=8, random_state=0).fit(X, y)
    assert len(_blocks(convert_estimator(model, X[:100]).model)) == 1
    blocked = convert_estimator(model, X[:100], tree_block_nodes=3000)
    assert len(_blocks(blocked.model)) == 8  # each tree has more than 3 000 nodes
    path = blocked.save(tmp_path / "blocks.onnx")
    frame = pd.DataFrame(X[2000:], columns=blocked.metadata.inputs[0]["columns"])
    assert validate_model(path, model, frame).verdict == "EQUIVALENT"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "tree_block_nodes=-1 is negative"),
        (np.int64(-2), "tree_block_nodes=-2 is negative"),
        (2.5, "tree_block_nodes=2.5 is not a whole"),
    ],
)
def test_tree_block_nodes_must_be_a_count(value, message) -> None:
    from onnxbridge.errors import ConversionError

    X, y = _regression(300)
    model = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(X, y)
    with pytest.raises(ConversionError, match=message) as info:
        convert_estimator(model, X[:50], tree_block_nodes=value)
    assert info.value.arguments == ("tree_block_nodes",)
