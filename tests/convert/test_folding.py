"""Scalers folded into the linear model after them (convert/_folding.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler
from sklearn.svm import LinearSVC

from onnxbridge import convert_estimator
from onnxbridge.convert._folding import MAX_SHIFT, fold_scaling_into_linear


def _run(model: onnx.ModelProto, X: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: X})


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=3000, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    # Features of different sizes and offsets, as real columns have.
    X = X * np.linspace(0.5, 30, 8) + np.linspace(-3, 40, 8)
    return X.astype(np.float32), y


@pytest.mark.parametrize(
    ("pipeline", "target", "folded"),
    [
        (make_pipeline(StandardScaler(), LogisticRegression()), "binary", "Scaler"),
        (make_pipeline(StandardScaler(), LogisticRegression()), "multiclass", "Scaler"),
        (make_pipeline(MinMaxScaler(), LogisticRegression()), "multiclass", "Mul + Add"),
        (make_pipeline(RobustScaler(), Ridge()), "value", "Scaler"),
        (make_pipeline(MaxAbsScaler(), LinearSVC()), "binary", "Scaler"),
    ],
)
def test_scalers_fold_into_linear_models_with_the_same_results(
    data, pipeline, target, folded
) -> None:
    X, y = data
    yy = {"binary": y % 2, "multiclass": y, "value": X[:, 0] * 0.3 - X[:, 5]}[target]
    pipeline.fit(X[:2000], yy[:2000])
    result = convert_estimator(pipeline, X[:100])
    ops = _ops(result.model)
    assert "Scaler" not in ops and "Mul" not in ops and "Add" not in ops, ops
    assert any(f"({folded})" in note for note in result.notes), result.notes
    rows = X[2000:]
    outputs = _run(result.model, rows)
    if target == "value":
        np.testing.assert_allclose(outputs[0].ravel(), pipeline.predict(rows), rtol=1e-5, atol=1e-4)
        return
    assert np.array_equal(outputs[0], pipeline.predict(rows))
    if hasattr(pipeline, "predict_proba"):
        np.testing.assert_allclose(outputs[1], pipeline.predict_proba(rows), atol=1e-5)


def _scaler_graph(offset, scale, *, also_output: bool = False, width: int = 3) -> onnx.ModelProto:
    """``Scaler -> LinearClassifier`` (3 classes, softmax) on float32 ``[N, width]``, the
    Scaler's constants and the coefficients sized for 3 features."""
    rng = np.random.RandomState(1)
    nodes = [
        helper.make_node("Scaler", ["x"], ["z"], domain="ai.onnx.ml", offset=offset, scale=scale),
        helper.make_node(
            "LinearClassifier",
            ["z"],
            ["label", "probabilities"],
            domain="ai.onnx.ml",
            coefficients=rng.normal(size=9).tolist(),
            intercepts=[0.1, -0.2, 0.3],
            classlabels_ints=[0, 1, 2],
            multi_class=1,
            post_transform="SOFTMAX",
        ),
    ]
    outputs = [
        helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 3]),
    ]
    if also_output:
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 3]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, width])], outputs
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 1)],
    )


def test_folded_graph_matches_the_graph_it_came_from() -> None:
    model = _scaler_graph([1.0, -2.0, 0.5], [0.5, 2.0, 4.0])
    X = np.random.RandomState(0).normal(size=(500, 3)).astype(np.float32)
    before = _run(model, X)
    notes = fold_scaling_into_linear(model)
    onnx.checker.check_model(model)
    assert len(notes) == 1 and _ops(model) == ["LinearClassifier"]
    after = _run(model, X)
    assert np.array_equal(before[0], after[0])
    np.testing.assert_allclose(after[1], before[1], atol=1e-6)


def test_a_large_shift_is_not_folded() -> None:
    # (x - 2000) * 0.2: a year-like column; folding would cancel two large float32 terms.
    model = _scaler_graph([2000.0, 0.0, 0.0], [0.2, 1.0, 1.0])
    assert 2000.0 * 0.2 > MAX_SHIFT
    assert fold_scaling_into_linear(model) == []
    assert _ops(model) == ["Scaler", "LinearClassifier"]


def test_a_scaling_used_elsewhere_is_not_folded() -> None:
    model = _scaler_graph([1.0, 0.0, 0.0], [0.5, 1.0, 1.0], also_output=True)
    assert fold_scaling_into_linear(model) == []
    assert _ops(model) == ["Scaler", "LinearClassifier"]


def test_a_scaling_sized_for_another_width_is_not_folded() -> None:
    """A graph whose constants are sized for 3 features on a 2-feature input fails in ONNX
    Runtime; folded, it would run (LinearClassifier does not check) and answer wrongly."""
    model = _scaler_graph([1.0, -2.0, 0.5], [0.5, 2.0, 4.0], width=2)
    assert fold_scaling_into_linear(model) == []
    assert _ops(model) == ["Scaler", "LinearClassifier"]
    with pytest.raises(InvalidArgument, match="feature size"):
        _run(model, np.zeros((4, 2), dtype=np.float32))


def test_double_precision_graphs_are_left_alone(data) -> None:
    X, y = data
    pipeline = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    result = convert_estimator(pipeline, X[:100].astype(np.float64), precision="double")
    assert not any("folded" in note for note in result.notes)
    outputs = _run(result.model, X[:200].astype(np.float64))
    assert np.array_equal(outputs[0], pipeline.predict(X[:200]))
