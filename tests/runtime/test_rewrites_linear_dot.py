"""The linear-dot pass (runtime/rewrites/linear_dot.py): one-column linear operators as a dot
product per row for large batches give the same results as the graph as it is."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import (
    LinearRegression,
    LogisticRegression,
    RidgeClassifier,
    SGDClassifier,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC, LinearSVR

from onnxbridge import Predictor, convert_estimator
from onnxbridge.errors import SessionSettingsError
from onnxbridge.runtime._rewrites import apply_rewrites
from onnxbridge.runtime._rewrites.linear_dot import LINEAR_GEMV_MIN_ROWS, gemv_linear_models
from onnxbridge.runtime._router import MULTI_THREAD_BLOCK_MIN_ROWS
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from onnxbridge.tune import Variants, stage_two_candidates
from tuning_support import store_spec

FEATURES = 12


def _frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


def _session(model: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _ops(model: bytes) -> list[str]:
    return [n.op_type for n in onnx.load_model_from_string(model).graph.node]


def _data(task: str, labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    if task == "regression":
        X, y = make_regression(n_samples=6000, n_features=FEATURES, noise=5.0, random_state=0)
        return X.astype(np.float32), y
    X, y = make_classification(n_samples=6000, n_features=FEATURES, n_informative=6, random_state=0)
    return X.astype(np.float32), y if labels is None else labels[y]


def _rewritten_outputs(
    plain: bytes, rewritten: bytes, feeds: dict[str, np.ndarray]
) -> list[np.ndarray]:
    """The rewrite's outputs, which are the plain model's, by name and in order."""
    names = [o.name for o in _session(plain).get_outputs()]
    session = _session(rewritten)
    assert [o.name for o in session.get_outputs()] == names
    return session.run(names, feeds)


def _converted(estimator, X: np.ndarray, y: np.ndarray) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the quick fits
        estimator.fit(X[:3000], y[:3000])
    return convert_estimator(estimator, _frame(X[:5])).model.SerializeToString()


CLASSIFIERS = {
    "logistic": (LogisticRegression(max_iter=500), None),
    "logistic-strings": (LogisticRegression(max_iter=500), np.array(["no", "yes"])),
    "logistic-3-7": (LogisticRegression(max_iter=500), np.array([3, 7])),
    "linear-svc": (LinearSVC(), None),
    "ridge-classifier": (RidgeClassifier(), None),
    "scaled-logistic": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), None),
}


@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_binary_linear_classifiers_give_the_same_labels_and_scores(name: str) -> None:
    estimator, labels = CLASSIFIERS[name]
    X, y = _data("classification", labels)
    plain = _converted(estimator, X, y)
    rewritten = gemv_linear_models(plain)
    assert rewritten is not None
    onnx.checker.check_model(onnx.load_model_from_string(rewritten))
    assert "LinearClassifier" not in _ops(rewritten) and "Gemm" in _ops(rewritten)
    rows = X[3000:].copy()
    rows[:3, 1] = np.nan  # NaN scores where the operator has them, and its label
    name_in = _session(plain).get_inputs()[0].name
    before = _session(plain).run(None, {name_in: rows})
    after = _rewritten_outputs(plain, rewritten, {name_in: rows})
    assert [o.dtype for o in after] == [o.dtype for o in before]
    assert [o.shape for o in after] == [o.shape for o in before]
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(np.isnan(after[1]), np.isnan(before[1]))
    assert np.isnan(after[1][:3]).all()
    np.testing.assert_allclose(after[1], before[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(after[0][3:], estimator.predict(rows[3:]))


@pytest.mark.parametrize("estimator", [LinearRegression(), LinearSVR()], ids=["ols", "svr"])
def test_single_target_regressors_give_the_same_values(estimator) -> None:
    X, y = _data("regression")
    plain = _converted(estimator, X, y)
    rewritten = gemv_linear_models(plain)
    assert rewritten is not None and "LinearRegressor" not in _ops(rewritten)
    name_in = _session(plain).get_inputs()[0].name
    before = _session(plain).run(None, {name_in: X[3000:]})[0]
    (after,) = _rewritten_outputs(plain, rewritten, {name_in: X[3000:]})
    holed = X[3000:].copy()
    holed[-1, -1] = np.nan
    assert np.isnan(_rewritten_outputs(plain, rewritten, {name_in: holed})[0][-1]).all()
    assert after.shape == before.shape == (3000, 1) and after.dtype == before.dtype
    # float32 sums in another order: the same to a few units in the last place of the values.
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-3 * np.abs(before).max() / 1e3)
    np.testing.assert_allclose(after[:, 0], estimator.predict(X[3000:]), rtol=1e-4, atol=1e-2)


def test_operators_the_rewrite_does_not_serve_are_left_alone() -> None:
    X, y = make_classification(
        n_samples=600, n_features=FEATURES, n_informative=6, n_classes=3, random_state=0
    )
    X = X.astype(np.float32)
    # Three classes (three coefficient rows), and SGDClassifier's MatMul graph.
    assert gemv_linear_models(_converted(LogisticRegression(max_iter=500), X, y)) is None
    binary = (y > 0).astype(int)
    assert gemv_linear_models(_converted(SGDClassifier(random_state=0), X, binary)) is None
    # Two targets.
    Xr, yr = make_regression(n_samples=600, n_features=FEATURES, n_targets=2, random_state=0)
    assert gemv_linear_models(_converted(LinearRegression(), Xr.astype(np.float32), yr)) is None
    # Two classes whose rows are not negatives of each other (a hand-made operator).
    unequal = _binary_operator([1.0, 2.0, 1.0, 2.0], [0.0, 0.0], [0, 1], "NONE", opset=13)
    assert gemv_linear_models(unequal) is None


def _binary_operator(
    coefficients: list[float],
    intercepts: list[float],
    labels: list[int],
    transform: str,
    opset: int,
) -> bytes:
    """A hand-made two-class ``LinearClassifier`` model on ``[N, len(coefficients) / 2]`` rows."""
    from onnx import TensorProto, helper

    node = helper.make_node(
        "LinearClassifier",
        ["X"],
        ["label", "scores"],
        domain="ai.onnx.ml",
        coefficients=coefficients,
        intercepts=intercepts,
        classlabels_ints=labels,
        post_transform=transform,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, len(coefficients) // 2])],
        [
            helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, 2]),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", 1)],
    )
    model.ir_version = 7
    return model.SerializeToString()


def _lr_model(tmp_path: Path) -> tuple[Path, LogisticRegression, np.ndarray]:
    X, y = _data("classification")
    model = LogisticRegression(max_iter=500)
    path = tmp_path / "lr.onnx"
    path.write_bytes(_converted(model, X, y))
    return path, model, X


def test_untuned_predictor_uses_dot_products_on_large_calls_only(tmp_path: Path) -> None:
    path, model, X = _lr_model(tmp_path)
    predictor = Predictor(path, intra_op_num_threads=2)
    assert predictor.settings_for(1).linear_gemv is False
    assert predictor.settings_for(MULTI_THREAD_BLOCK_MIN_ROWS).linear_gemv is True
    large = X[np.arange(MULTI_THREAD_BLOCK_MIN_ROWS) % len(X)]
    result = predictor.predict(large)
    assert predictor.session_for(len(large)) is not predictor.session_for(1)
    settings = predictor.settings_for(len(large))
    assert apply_rewrites(path.read_bytes(), settings)[1] is not None  # it runs the rewrite
    np.testing.assert_array_equal(result.labels, model.predict(large))
    np.testing.assert_allclose(result.probabilities, model.predict_proba(large), atol=1e-5)
    # run() gives the model's outputs, as the graph as it is names them.
    outputs = predictor.run({predictor.inputs[0].name: large})
    assert len(outputs) == len(predictor.outputs) == 2
    # The model refuses NaN: a large call with one is refused, named by row and column.
    bad = large.copy()
    bad[7, 2] = np.nan
    bad[-1, 5] = np.nan
    from onnxbridge.errors import SchemaMismatchError

    with pytest.raises(SchemaMismatchError, match=r"in 2 rows, columns: 'f2' \(1\), 'f5' \(1\)"):
        predictor.predict(bad)
    np.testing.assert_array_equal(
        predictor.predict(bad, allow_missing=True).labels[8:-1], result.labels[8:-1]
    )


def test_tuned_dot_products_serve_calls_from_their_threshold(tmp_path: Path) -> None:
    path, model, X = _lr_model(tmp_path)
    linear = SessionSettings(1, allow_spinning=False, linear_gemv=True)
    spec = TuningSpec(
        latency=SessionSettings(1, allow_spinning=False), throughput=linear, latency_max_rows=10
    )
    store_spec(path, spec)
    predictor = Predictor(path)
    # Above the boundary, below the threshold: the throughput settings without the rewrite.
    assert predictor.settings_for(100) == replace(linear, linear_gemv=False)
    assert predictor.settings_for(LINEAR_GEMV_MIN_ROWS - 1).linear_gemv is False
    assert predictor.settings_for(LINEAR_GEMV_MIN_ROWS) == linear
    assert predictor.session_for(100) is not predictor.session_for(LINEAR_GEMV_MIN_ROWS)
    for rows in (5, 100, LINEAR_GEMV_MIN_ROWS, 5000):
        part = X[np.arange(rows) % len(X)]
        result = predictor.predict(part)
        np.testing.assert_array_equal(result.labels, model.predict(part))
        np.testing.assert_allclose(result.probabilities, model.predict_proba(part), atol=1e-5)
    # open_sessions opens the rewrite too (a server's first large request does not wait).
    fresh = Predictor(path)
    fresh.open_sessions()
    assert fresh.settings_for(5000) == linear
    outputs = fresh.session_for(5000).run(None, fresh.prepare(X[:5000]))
    np.testing.assert_array_equal(outputs[0], model.predict(X[:5000]))


def test_a_split_call_refuses_missing_values_in_every_part(tmp_path: Path) -> None:
    """Rows split across two one-thread parts running the rewrite: the same labels, and a NaN
    in either part is refused."""
    path, model, X = _lr_model(tmp_path)
    split = SessionSettings(2, allow_spinning=False, row_split=2, linear_gemv=True)
    store_spec(path, TuningSpec(latency=split, throughput=split, latency_max_rows=0))
    predictor = Predictor(path)
    large = X[np.arange(4096) % len(X)]
    np.testing.assert_array_equal(predictor.predict(large).labels, model.predict(large))
    from onnxbridge.errors import SchemaMismatchError

    for row in (10, 4000):  # in the first part, in the second
        bad = large.copy()
        bad[row, 3] = np.nan
        with pytest.raises(SchemaMismatchError, match=r"in 1 row, columns: 'f3' \(1\)"):
            predictor.predict(bad)


def test_the_setting_is_labelled_stored_and_checked() -> None:
    settings = SessionSettings(2, allow_spinning=False, linear_gemv=True)
    assert "linear as dot products" in settings.label()
    assert SessionSettings.from_dict(settings.to_dict()) == settings
    with pytest.raises(SessionSettingsError, match="linear_gemv must be true or false"):
        SessionSettings(linear_gemv="yes")  # type: ignore[arg-type]


def test_tune_tries_the_rewrite_on_one_thread_first_then_on_the_winners_threads() -> None:
    winner = SessionSettings(2, allow_spinning=True)
    variants = stage_two_candidates(winner, 2, Variants.ROW_SPLIT | Variants.DOT_PRODUCT)
    linear = [v for v in variants if v.linear_gemv]
    assert len(linear) == 2
    # The cheaper one thread without spinning first: it wins a tie within tune's margin.
    assert linear[0].intra_op_num_threads == 1 and not linear[0].allow_spinning
    assert linear[1] == replace(winner, linear_gemv=True)
    assert not any(v.linear_gemv for v in stage_two_candidates(winner, 2, Variants.ROW_SPLIT))


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("opset", [9, 11, 17])
def test_every_post_transform_keeps_the_operators_scores(transform: str, opset: int) -> None:
    """A hand-made binary operator (negated rows) with each post-transform it serves, in an
    opset where Gemm needs its C input (9), before Softmax took one axis (11) and after."""
    rng = np.random.RandomState(0)
    w = rng.standard_normal(4).astype(np.float32)
    coefficients = np.concatenate([-w, w]).tolist()
    plain = _binary_operator(coefficients, [-0.25, 0.25], [4, 9], transform, opset)
    rewritten = gemv_linear_models(plain)
    assert rewritten is not None and "LinearClassifier" not in _ops(rewritten)
    rows = rng.standard_normal((3000, 4)).astype(np.float32)
    before = _session(plain).run(None, {"X": rows})
    after = _rewritten_outputs(plain, rewritten, {"X": rows})
    np.testing.assert_array_equal(after[0], before[0])
    assert set(np.unique(after[0])) == {4, 9}
    np.testing.assert_allclose(after[1], before[1], rtol=1e-5, atol=1e-6)
