"""Large calls of NaN-refusing linear models check the output for NaN (runtime/nancheck.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from onnxbridge import Predictor, convert_estimator
from onnxbridge.errors import SchemaMismatchError
from onnxbridge.runtime.nancheck import flag_shows_nan, graph_carries_nan, session_shows_nan
from onnxbridge.runtime.predictor import OUTPUT_NAN_CHECK_MAX_COLUMNS, OUTPUT_NAN_CHECK_MIN_ROWS


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=3000, n_features=6, n_informative=4, random_state=0)
    return X.astype(np.float32), y


def _rows(X: np.ndarray, n: int) -> np.ndarray:
    return np.ascontiguousarray(X[np.arange(n) % len(X)])


def test_a_linear_pipeline_checks_large_calls_on_the_output(data, tmp_path: Path) -> None:
    X, y = data
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    path = convert_estimator(model, X[:50]).save(tmp_path / "lr.onnx")
    predictor = Predictor(path)
    assert predictor.metadata.missing_values == "refused"
    assert graph_carries_nan(path.read_bytes())
    rows = _rows(X, OUTPUT_NAN_CHECK_MIN_ROWS + 100)

    clean = predictor.predict(rows)
    # The output-side check was taken: the session was probed and shows NaN.
    assert [check is not None for check in predictor._output_checks.values()] == [True]
    unchecked = predictor.predict(rows, allow_missing=True)
    np.testing.assert_array_equal(clean.labels, unchecked.labels)
    np.testing.assert_array_equal(clean.probabilities, unchecked.probabilities)

    # A NaN anywhere — first row, last row, any column — is refused with the usual message.
    for row, column in [(0, 0), (len(rows) - 1, 5), (1234, 3)]:
        bad = rows.copy()
        bad[row, column] = np.nan
        with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row, columns"):
            predictor.predict(bad)
        small = bad[max(0, row - 5) : row + 5]  # the input-side check says the same
        with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row, columns"):
            predictor.predict(small)
    assert len(predictor.predict(bad, allow_missing=True)) == len(bad)


def test_trees_keep_the_input_check(data, tmp_path: Path) -> None:
    X, y = data
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    path = convert_estimator(model, X[:50]).save(tmp_path / "gb.onnx")
    assert not graph_carries_nan(path.read_bytes())
    predictor = Predictor(path)
    bad = _rows(X, OUTPUT_NAN_CHECK_MIN_ROWS + 10)
    bad[7, 2] = np.nan
    with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
        predictor.predict(bad)
    assert predictor._output_checks == {}


def _int_round_trip(width: int) -> onnx.ModelProto:
    """``value = float(int64(x @ 1))``: every operator is listed, yet the Cast to int64 turns
    NaN into a number — only the probe can tell."""
    nodes = [
        helper.make_node("Cast", ["input"], ["as_int"], to=TensorProto.INT64),
        helper.make_node("Cast", ["as_int"], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node(
            "LinearRegressor",
            ["as_float"],
            ["value"],
            domain="ai.onnx.ml",
            coefficients=[1.0] * width,
            intercepts=[0.0],
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("value", TensorProto.FLOAT, [None, 1])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 1)]
    )


def test_the_probe_refuses_a_graph_that_loses_nan() -> None:
    import onnxruntime as ort

    model = _int_round_trip(4)
    data = model.SerializeToString()
    assert graph_carries_nan(data)  # the operators alone would allow it...
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert not session_shows_nan(session, "input", np.float32, 4, 0)  # ...the probe does not
    linear = _int_round_trip(4)
    del linear.graph.node[:2]
    linear.graph.node[0].input[0] = "input"
    session = ort.InferenceSession(linear.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session_shows_nan(session, "input", np.float32, 4, 0)


def _flagged(flag: str) -> bytes:
    """``z = x @ w`` ``[N, 1]`` and a flag over it: ``z · z`` (``"dot"``), the same sum with NaN
    replaced by 0 first (``"masked"``), or a constant NaN (``"always"``)."""
    width = 4
    nodes = [helper.make_node("MatMul", ["input", "w"], ["z"])]
    inits = [
        numpy_helper.from_array(np.arange(1, width + 1, dtype=np.float32).reshape(-1, 1), "w"),
        numpy_helper.from_array(np.zeros(1, dtype=np.float32), "zero"),
        numpy_helper.from_array(np.array(np.nan, dtype=np.float32), "nan"),
    ]
    if flag == "dot":
        nodes.append(helper.make_node("Gemm", ["z", "z", "zero"], ["flag"], transA=1))
    elif flag == "masked":
        nodes += [
            helper.make_node("IsNaN", ["z"], ["holes"]),
            helper.make_node("Where", ["holes", "zero", "z"], ["filled"]),
            helper.make_node("Gemm", ["filled", "filled", "zero"], ["flag"], transA=1),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["nan"], ["flag"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, width])],
        [
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 1]),
            helper.make_tensor_value_info("flag", TensorProto.FLOAT, None),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    return model.SerializeToString()


@pytest.mark.parametrize(("flag", "shows"), [("dot", True), ("masked", False), ("always", False)])
def test_the_flag_probe_accepts_only_a_flag_that_is_nan_exactly_then(flag, shows) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(_flagged(flag), providers=["CPUExecutionProvider"])
    assert flag_shows_nan(session, "input", np.float32, 4, "flag") is shows


def test_wide_inputs_keep_the_input_check(tmp_path: Path) -> None:
    """Above OUTPUT_NAN_CHECK_MAX_COLUMNS columns the probe (about 4 × columns² values) is not
    run: the input is checked, and NaN is refused all the same."""
    width = OUTPUT_NAN_CHECK_MAX_COLUMNS + 1
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, width)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    path = convert_estimator(LogisticRegression(max_iter=200).fit(X, y), X[:5]).save(
        tmp_path / "wide.onnx"
    )
    predictor = Predictor(path)
    rows = _rows(X, OUTPUT_NAN_CHECK_MIN_ROWS)
    assert predictor._output_check(rows) is None
    rows[-1, width - 1] = np.nan
    with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
        predictor.predict(rows)
