"""Tree nodes written from the fitted arrays: many nodes, the same model, the same predictions.

Unpruned forests (thousands of nodes, node ids past two varint bytes) are converted by
onnxbridge and run in real ONNX Runtime sessions; scikit-learn's own predictions and the fitted
``tree_`` arrays are the reference.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import FloatTensorType
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

from onnxbridge import Predictor, convert_estimator
from onnxbridge.convert import _tree_ensemble as tree_ensemble
from onnxbridge.runtime import SessionSettings


def _nan_rows(X: np.ndarray, seed: int) -> np.ndarray:
    X = X.astype(np.float32).astype(np.float64)
    X[np.random.RandomState(seed).rand(*X.shape) < 0.05] = np.nan
    return X


def _outputs(model: onnx.ModelProto, X: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: X})


def _ensemble(model: onnx.ModelProto) -> onnx.NodeProto:
    (node,) = [n for n in model.graph.node if n.op_type.startswith("TreeEnsemble")]
    return node


def _attributes(node: onnx.NodeProto) -> dict[str, np.ndarray]:
    found = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        if isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        found[attribute.name] = np.asarray(value)
    return found


@pytest.fixture(scope="module")
def classification() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=3000, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    return _nan_rows(X, 1), y


@pytest.mark.parametrize("precision", ["float", "double"])
def test_unpruned_forest_with_nan_predicts_as_scikit_learn(classification, precision):
    X, y = classification
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    result = convert_estimator(forest, X[:100], precision=precision)
    dtype = np.float64 if precision == "double" else np.float32
    label, probabilities = _outputs(result.model, X.astype(dtype))
    assert result.precision == precision
    np.testing.assert_array_equal(label, forest.predict(X))
    np.testing.assert_allclose(probabilities, forest.predict_proba(X), atol=1e-6)
    assert np.isnan(X).any(axis=1).sum() > 1000  # NaN routing is exercised


@pytest.mark.parametrize("precision", ["float", "double"])
def test_multi_output_regressor_predicts_as_scikit_learn(precision):
    X, y = make_regression(n_samples=2000, n_features=6, n_targets=2, random_state=0)
    X = _nan_rows(X, 2)
    forest = ExtraTreesRegressor(n_estimators=4, random_state=0).fit(X, y)
    result = convert_estimator(forest, X[:100], precision=precision)
    dtype = np.float64 if precision == "double" else np.float32
    (value,) = _outputs(result.model, X.astype(dtype))
    tolerance = 1e-9 if precision == "double" else 1e-3
    np.testing.assert_allclose(value, forest.predict(X), rtol=tolerance, atol=tolerance)


def test_node_attributes_are_the_fitted_arrays():
    X, y = make_regression(n_samples=20_000, n_features=5, random_state=0)
    X = X.astype(np.float32)
    tree = DecisionTreeRegressor(random_state=0).fit(X, y)
    t = tree.tree_
    assert t.node_count > 2**14  # node ids take three varint bytes
    # The opset-3 form (ml_opset pinned); tests/convert/test_tree_v5.py reads the opset-5 one.
    result = convert_estimator(tree, X[:100], precision="float", ml_opset=3)
    node = _ensemble(result.model)
    attrs = _attributes(node)
    leaf = t.children_left < 0
    assert (node.op_type, node.domain) == ("TreeEnsembleRegressor", "ai.onnx.ml")
    np.testing.assert_array_equal(attrs["nodes_nodeids"], np.arange(t.node_count))
    np.testing.assert_array_equal(attrs["nodes_treeids"], np.zeros(t.node_count))
    np.testing.assert_array_equal(attrs["nodes_featureids"], np.where(leaf, 0, t.feature))
    np.testing.assert_array_equal(attrs["nodes_truenodeids"], np.where(leaf, 0, t.children_left))
    np.testing.assert_array_equal(attrs["nodes_falsenodeids"], np.where(leaf, 0, t.children_right))
    modes = np.where(leaf, b"LEAF", b"BRANCH_LEQ")
    np.testing.assert_array_equal(attrs["nodes_modes"], modes)
    # Thresholds are rounded down to float32, so float32(x) <= t keeps every decision.
    thresholds = attrs["nodes_values"][~leaf].astype(np.float64)
    assert np.all(thresholds <= t.threshold[~leaf])
    assert np.all(
        np.nextafter(thresholds.astype(np.float32), np.float32(np.inf)) > t.threshold[~leaf]
    )
    np.testing.assert_array_equal(attrs["target_nodeids"], np.flatnonzero(leaf))
    np.testing.assert_array_equal(attrs["target_weights"], t.value[leaf, 0, 0].astype(np.float32))
    (value,) = _outputs(result.model, X)
    np.testing.assert_array_equal(value.ravel(), tree.predict(X).astype(np.float32))


def test_written_model_imports_the_ml_opset_of_its_operators(classification):
    X, y = classification
    X = np.nan_to_num(X)
    booster = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    for precision, version in (("float", 1), ("double", 3)):
        model = convert_estimator(booster, X[:100], precision=precision).model
        node = _ensemble(model)
        imports = {o.domain: o.version for o in model.opset_import}
        assert node.domain == "ai.onnx.ml"
        assert imports["ai.onnx.ml"] >= version
        onnx.checker.check_model(model)


def test_plain_skl2onnx_call_gets_complete_nodes(classification):
    """After onnxbridge has converted once, skl2onnx itself uses its converters: whole nodes."""
    X, y = classification
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    ours = convert_estimator(forest, X[:100], precision="float").model
    plain = convert_sklearn(
        forest,
        initial_types=[("X", FloatTensorType([None, X.shape[1]]))],
        options={id(forest): {"zipmap": False}},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )

    def written(model: onnx.ModelProto) -> list[bytes]:
        return [a.SerializeToString() for a in _ensemble(model).attribute]

    assert written(plain) == written(ours)
    label, probabilities = _outputs(plain, X.astype(np.float32))
    np.testing.assert_array_equal(label, forest.predict(X))
    np.testing.assert_allclose(probabilities, forest.predict_proba(X), atol=1e-6)


@pytest.fixture
def tensor_form(monkeypatch):
    """Every ensemble written as a big one is: float arrays as tensors."""
    monkeypatch.setattr(tree_ensemble, "TENSOR_NODES", 1)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_arrays_as_tensors_predict_the_same(classification, tensor_form, kind, precision):
    X, y = classification
    if kind == "classifier":
        forest = RandomForestClassifier(n_estimators=7, random_state=0).fit(X, y)
    else:
        forest = ExtraTreesRegressor(n_estimators=7, random_state=0).fit(X, y * 1.5)
    # ml_opset=3: the opset-3 operator's tensor form (opset 5 writes tensors anyway). In double,
    # each tree's leaf index among its own leaves, then the float64 leaf table.
    result = convert_estimator(forest, X[:100], precision=precision, ml_opset=3)
    node = _ensemble(result.model)
    tensors = {a.name for a in node.attribute if a.type == onnx.AttributeProto.TENSOR}
    weights = "class_weights" if kind == "classifier" and precision == "float" else "target_weights"
    assert tensors == {"nodes_values_as_tensor", f"{weights}_as_tensor"}
    outputs = _outputs(result.model, X.astype(np.float32 if precision == "float" else np.float64))
    tolerance = 1e-6 if precision == "float" else 1e-12
    if kind == "classifier":
        np.testing.assert_array_equal(outputs[0], forest.predict(X))
        np.testing.assert_allclose(outputs[1], forest.predict_proba(X), atol=tolerance)
    else:
        np.testing.assert_allclose(outputs[0].ravel(), forest.predict(X), rtol=tolerance * 10)


@pytest.mark.parametrize("kind", ["classes", "outputs"])
def test_ensembles_with_more_leaf_weights_than_nodes_write_them_as_tensors(monkeypatch, kind):
    # A many-class forest (or a multi-output one) lists a weight per leaf and class: its float
    # lists reach protobuf's limit long before its nodes do, so the weights count too.
    X, y = make_classification(
        n_samples=600, n_features=6, n_informative=5, n_redundant=0, n_classes=12,
        n_clusters_per_class=1, random_state=0,
    )  # fmt: skip
    X = X.astype(np.float32)
    if kind == "classes":
        forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
        weights = sum(t.tree_.n_leaves for t in forest.estimators_) * 12
    else:
        targets = np.column_stack([X @ np.arange(1.0, 7.0) + k for k in range(8)])
        forest = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, targets)
        weights = sum(t.tree_.n_leaves for t in forest.estimators_) * 8
    nodes = sum(t.tree_.node_count for t in forest.estimators_)
    assert weights > 2 * nodes
    monkeypatch.setattr(tree_ensemble, "TENSOR_NODES", 2 * nodes)
    result = convert_estimator(forest, X[:100], precision="float", ml_opset=3)
    node = _ensemble(result.model)
    tensors = {a.name for a in node.attribute if a.type == onnx.AttributeProto.TENSOR}
    name = "class_weights" if kind == "classes" else "target_weights"
    assert tensors == {"nodes_values_as_tensor", f"{name}_as_tensor"}
    outputs = _outputs(result.model, X)
    if kind == "classes":
        np.testing.assert_array_equal(outputs[0], forest.predict(X))
        np.testing.assert_allclose(outputs[1], forest.predict_proba(X), atol=1e-6)
    else:
        np.testing.assert_allclose(outputs[0], forest.predict(X), rtol=1e-5, atol=1e-4)
    # Below the count, the same forest keeps its float lists.
    monkeypatch.setattr(tree_ensemble, "TENSOR_NODES", weights + 1)
    plain = _ensemble(convert_estimator(forest, X[:100], precision="float", ml_opset=3).model)
    assert not any(a.type == onnx.AttributeProto.TENSOR for a in plain.attribute)


def test_model_saved_with_external_data_loads_and_predicts(classification, tensor_form, tmp_path):
    X, y = classification
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    result = convert_estimator(forest, X[:100], precision="float")
    path = result.save(tmp_path / "model.onnx", external_data=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    assert (tmp_path / "model.onnx.data").stat().st_size > 10_000
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    label, probabilities = session.run(None, {session.get_inputs()[0].name: X.astype(np.float32)})
    np.testing.assert_array_equal(label, forest.predict(X))
    np.testing.assert_allclose(probabilities, forest.predict_proba(X), atol=1e-6)
    # The model in memory keeps its values: saved again as one file, it is the same model.
    single = result.save(tmp_path / "single.onnx")
    again = ort.InferenceSession(str(single), providers=["CPUExecutionProvider"])
    assert not (tmp_path / "single.onnx.data").exists()
    np.testing.assert_array_equal(
        again.run(None, {again.get_inputs()[0].name: X.astype(np.float32)})[1], probabilities
    )


def test_double_graph_saved_with_external_data_predicts(classification, tmp_path):
    X, y = classification
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    result = convert_estimator(forest, X[:100], precision="double")
    path = result.save(tmp_path / "model.onnx", external_data=True)
    assert (tmp_path / "model.onnx.data").is_file()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    label, probabilities = session.run(None, {session.get_inputs()[0].name: X})
    np.testing.assert_array_equal(label, forest.predict(X))
    np.testing.assert_allclose(probabilities, forest.predict_proba(X), atol=1e-12)


def test_tensor_form_runs_in_tree_blocks_with_the_same_outputs(classification, tensor_form, caplog):
    X, y = classification
    forest = RandomForestClassifier(n_estimators=6, random_state=0).fit(X, y)
    model = convert_estimator(forest, X[:100], precision="float").model.SerializeToString()
    rows = X.astype(np.float32)
    blocks = SessionSettings(intra_op_num_threads=1, tree_block_nodes=2_000)
    in_blocks = Predictor(model, settings=blocks)
    as_is = Predictor(model, settings=SessionSettings.onnxbridge_default())
    assert in_blocks.settings_for(len(rows)).tree_block_nodes == 2_000
    caplog.set_level(logging.WARNING, logger="onnxbridge.runtime")
    got = in_blocks.run(in_blocks.prepare(rows))
    assert not [r for r in caplog.records if r.name == "onnxbridge.runtime"]  # not refused
    expected = as_is.run(as_is.prepare(rows))
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_allclose(got[1], expected[1], atol=1e-6)
    np.testing.assert_array_equal(got[0], forest.predict(X))
