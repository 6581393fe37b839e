"""Tree converters: exact float64 graphs, learned NaN routing, boosters in pipelines, defaults.

Every model here is a real fitted model converted by onnxbridge and run in a real ONNX Runtime
session; the source model's own predictions are the reference.
"""

from __future__ import annotations

import numpy as np
import onnx
import pandas as pd
import pytest
from catboost import CatBoostClassifier, CatBoostRegressor
from lightgbm import LGBMClassifier, LGBMRegressor
from onnx import numpy_helper
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    IsolationForest,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from xgboost import XGBClassifier, XGBRegressor

from onnxbridge import Predictor, convert_estimator
from onnxbridge.convert import find_converter
from onnxbridge.errors import ConversionError
from onnxbridge.validate import validate_model

# Float32 graphs that differ from scikit-learn on purpose: convert returns them only with
# allow_divergent, and warns.
pytestmark = pytest.mark.filterwarnings("ignore:NOT CHECKED:UserWarning")


SEED = 0


def _large_magnitude(n: int = 2000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features around 1e6, where one float32 step is 0.0625."""
    rng = np.random.RandomState(SEED)
    X = 1e6 + rng.rand(n, 4) * 100
    labels = ((X[:, 0] - 1e6) % 7 > 3.5).astype(int)
    values = (X[:, 0] - 1e6) % 7 + (X[:, 1] - 1e6) / 50
    return X, labels, values


def _run(result, X) -> dict[str, np.ndarray]:
    predictor = Predictor(result.model.SerializeToString())
    raw = predictor.run(predictor.prepare(X))
    names = [o.name for o in predictor.outputs]
    by_name = dict(zip(names, raw, strict=True))
    return {role: np.asarray(by_name[name]) for role, name in result.metadata.outputs.items()}


def _with_nan(n: int = 600, seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NaN carries signal: a missing x2 pushes the target up, so the trees learn where it goes."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 4))
    X[rng.rand(n, 4) < 0.2] = np.nan
    score = np.nan_to_num(X[:, 0]) + 2.0 * np.isnan(X[:, 2]) - 1.5 * np.isnan(X[:, 1])
    return X, (score > 0.5).astype(int), score


LARGE_CLASSIFIERS = [
    pytest.param(lambda: LGBMClassifier(n_estimators=100, verbose=-1, n_jobs=1), id="LGBMC"),
    pytest.param(lambda: HistGradientBoostingClassifier(max_iter=50, random_state=0), id="HGBC"),
    pytest.param(lambda: RandomForestClassifier(n_estimators=50, random_state=0), id="RFC"),
    pytest.param(lambda: ExtraTreesClassifier(n_estimators=50, random_state=0), id="ETC"),
]
LARGE_REGRESSORS = [
    pytest.param(lambda: LGBMRegressor(n_estimators=100, verbose=-1, n_jobs=1), id="LGBMR"),
    pytest.param(lambda: HistGradientBoostingRegressor(max_iter=50, random_state=0), id="HGBR"),
    pytest.param(lambda: RandomForestRegressor(n_estimators=50, random_state=0), id="RFR"),
]


@pytest.mark.parametrize("make", LARGE_CLASSIFIERS)
def test_defaults_flip_no_label_on_features_around_1e6(make) -> None:
    X, y, _ = _large_magnitude()
    model = make().fit(X[:1000], y[:1000])
    result = convert_estimator(model, X[:50])
    got = _run(result, X[1000:])
    flipped = int((got["label"] != model.predict(X[1000:])).sum())
    assert flipped == 0, f"{type(model).__name__}: {flipped} of 1000 labels flipped; {result.notes}"
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(X[1000:]), atol=1e-5)


@pytest.mark.parametrize("make", LARGE_REGRESSORS)
def test_defaults_keep_regression_within_1e5_relative_around_1e6(make) -> None:
    X, _, y = _large_magnitude()
    model = make().fit(X[:1000], y[:1000])
    result = convert_estimator(model, X[:50])
    got = _run(result, X[1000:])["value"].ravel()
    expected = model.predict(X[1000:])
    np.testing.assert_allclose(got, expected, rtol=1e-5, err_msg=type(model).__name__)


def test_float_graph_of_lightgbm_flips_there_which_is_why_auto_switches() -> None:
    X, y, _ = _large_magnitude()
    model = LGBMClassifier(n_estimators=100, verbose=-1, n_jobs=1).fit(X[:1000], y[:1000])
    as_float = convert_estimator(model, X[:50], precision="float", allow_divergent=True)
    flipped = int((_run(as_float, X[1000:])["label"] != model.predict(X[1000:])).sum())
    assert flipped > 0
    result = convert_estimator(model, X[:50])
    assert result.precision == "double"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: HistGradientBoostingRegressor(max_iter=30), id="HGBR"),
        pytest.param(lambda: LGBMRegressor(n_estimators=30, verbose=-1, n_jobs=1), id="LGBMR"),
        pytest.param(lambda: XGBRegressor(n_estimators=30, n_jobs=1), id="XGBR"),
        pytest.param(lambda: RandomForestRegressor(n_estimators=20, random_state=0), id="RFR"),
        pytest.param(lambda: GradientBoostingRegressor(n_estimators=30, random_state=0), id="GBR"),
        pytest.param(
            lambda: CatBoostRegressor(
                iterations=30, verbose=0, thread_count=1, allow_writing_files=False
            ),
            id="CBR",
        ),
    ],
)
def test_double_graph_loads_with_float64_input_and_thresholds(make) -> None:
    X, _, y = _large_magnitude(600)
    model = make().fit(X, y)
    result = convert_estimator(model, X[:20], precision="double")
    graph = result.model.graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    # ai.onnx.ml 5's TreeEnsemble where the model allows it, else TreeEnsembleRegressor (3).
    trees = [n for n in graph.node if n.op_type in ("TreeEnsemble", "TreeEnsembleRegressor")]
    assert len(trees) == 1
    attrs = {a.name: a for a in trees[0].attribute}
    thresholds = attrs.get("nodes_splits", attrs.get("nodes_values_as_tensor"))
    assert thresholds is not None
    assert numpy_helper.to_array(thresholds.t).dtype == np.float64
    expected = 5 if trees[0].op_type == "TreeEnsemble" else 3
    assert result.metadata.opsets["ai.onnx.ml"] == expected
    got = _run(result, X)["value"]
    assert got.dtype == np.float64
    # Exact up to the order of float64 additions (XGBoost and CatBoost add float32 leaves).
    rtol = 1e-6 if isinstance(model, (XGBRegressor, CatBoostRegressor)) else 1e-12
    np.testing.assert_allclose(got.ravel(), model.predict(X), rtol=rtol)


NAN_MODELS = [
    pytest.param(lambda: DecisionTreeClassifier(max_depth=5, random_state=0), id="DTC"),
    pytest.param(lambda: RandomForestClassifier(n_estimators=20, random_state=0), id="RFC"),
    pytest.param(lambda: ExtraTreesClassifier(n_estimators=20, random_state=0), id="ETC"),
    pytest.param(lambda: HistGradientBoostingClassifier(max_iter=20), id="HGBC"),
    pytest.param(lambda: XGBClassifier(n_estimators=20, n_jobs=1), id="XGBC"),
    pytest.param(lambda: LGBMClassifier(n_estimators=20, verbose=-1, n_jobs=1), id="LGBMC"),
    pytest.param(
        lambda: CatBoostClassifier(
            iterations=20, verbose=0, thread_count=1, allow_writing_files=False
        ),
        id="CBC",
    ),
]


@pytest.mark.parametrize("precision", ["float", "double", "auto"])
@pytest.mark.parametrize("make", NAN_MODELS)
def test_learned_nan_routing_is_kept(make, precision: str) -> None:
    X, y, _ = _with_nan()
    model = make().fit(X[:400], y[:400])
    rows = X[400:]
    has_nan = np.isnan(rows).any(axis=1)
    assert has_nan.sum() > 100
    result = convert_estimator(
        model, X[:50], precision=precision, allow_divergent=precision == "float"
    )
    got = _run(result, rows)
    np.testing.assert_array_equal(got["label"][has_nan], model.predict(rows)[has_nan])
    atol = 1e-5 if result.precision == "float" else 1e-6
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(rows), atol=atol)


def test_skl2onnx_drops_the_nan_routing_this_converter_keeps() -> None:
    """The reason the scikit-learn tree converters are replaced, measured."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    from onnxbridge.convert._registry import upstream_converters

    X, y, _ = _with_nan()
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y.astype(float))
    assert find_converter(DecisionTreeRegressor).replaces.startswith("skl2onnx drops the NaN")
    ours_onnx = convert_estimator(model, X[:20], precision="float")
    # skl2onnx's own converter, on the same model and rows.
    with upstream_converters():
        upstream = convert_sklearn(model, initial_types=[("input", FloatTensorType([None, 4]))])
    import onnxruntime as ort

    session = ort.InferenceSession(upstream.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"input": X.astype(np.float32)})[0].ravel()
    ours = _run(ours_onnx, X)["value"].ravel()
    expected = model.predict(X)
    assert np.abs(theirs - expected).max() > 0.1
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-6)


BOOSTERS = [
    pytest.param(lambda: HistGradientBoostingClassifier(max_iter=30), "c", id="HGBC"),
    pytest.param(lambda: HistGradientBoostingRegressor(max_iter=30), "r", id="HGBR"),
    pytest.param(lambda: XGBClassifier(n_estimators=30, n_jobs=1), "c", id="XGBC"),
    pytest.param(lambda: XGBRegressor(n_estimators=30, n_jobs=1), "r", id="XGBR"),
    pytest.param(lambda: LGBMClassifier(n_estimators=30, verbose=-1, n_jobs=1), "c", id="LGBMC"),
    pytest.param(lambda: LGBMRegressor(n_estimators=30, verbose=-1, n_jobs=1), "r", id="LGBMR"),
    pytest.param(
        lambda: CatBoostClassifier(
            iterations=30, verbose=0, thread_count=1, allow_writing_files=False
        ),
        "c",
        id="CBC",
    ),
    pytest.param(
        lambda: CatBoostRegressor(
            iterations=30, verbose=0, thread_count=1, allow_writing_files=False
        ),
        "r",
        id="CBR",
    ),
]


def _frame(n: int = 500) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.RandomState(SEED)
    X = pd.DataFrame(rng.normal(size=(n, 5)), columns=[f"f{i}" for i in range(5)])
    score = X.f0 - 0.5 * X.f1 + 0.3 * X.f2 * X.f3
    labels = np.digitize(score, [-0.5, 0.5])
    return X, labels, 3 * score


@pytest.mark.parametrize(("make", "task"), BOOSTERS)
def test_boosters_convert_equivalent_with_defaults(make, task: str, tmp_path) -> None:
    frame, labels, values = _frame()
    # A plain array: validate's XGBoost split probes trip over a DataFrame's feature_names_in_.
    X = frame.to_numpy()
    model = make().fit(X[:350], labels[:350] if task == "c" else values[:350])
    result = convert_estimator(model, X[:50])
    assert result.opsets.as_target() == {"": 22, "ai.onnx.ml": 3}
    path = result.save(tmp_path / "model.onnx")
    report = validate_model(
        path, model, X[350:], runtimes=("sklearn", "onnxruntime"), diagnose=False
    )
    assert report.verdict == "EQUIVALENT", f"{type(model).__name__}: {report.verdict}"


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(("make", "task"), BOOSTERS)
def test_boosters_inside_a_pipeline(make, task: str, precision: str) -> None:
    X, labels, values = _frame()
    model = make_pipeline(StandardScaler(), make())
    model.fit(X[:350], labels[:350] if task == "c" else values[:350])
    result = convert_estimator(
        model, X.head(50), precision=precision, allow_divergent=precision == "float"
    )
    assert result.precision == precision
    got = _run(result, X[350:])
    if task == "c":
        agree = (got["label"] == model.predict(X[350:]).ravel()).mean()
        # float32 scaling moves a few rows across a threshold; float64 keeps every one.
        assert agree == 1.0 if precision == "double" else agree >= 0.98
    else:
        # XGBoost and CatBoost add float32 leaves themselves: float64 sums differ by ~1e-7.
        tol = 1e-6 if precision == "double" else 1e-1
        np.testing.assert_allclose(
            got["value"].ravel(), model.predict(X[350:]).ravel(), rtol=tol, atol=tol
        )


def test_gradient_boosting_binary_and_multiclass_double() -> None:
    X, labels, _ = _frame()
    for y in (labels.clip(0, 1), labels):
        model = GradientBoostingClassifier(n_estimators=20, random_state=0).fit(X, y)
        got = _run(convert_estimator(model, X.head(20), precision="double"), X)
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(X), atol=1e-12)
        np.testing.assert_array_equal(got["label"], model.predict(X))


def test_string_classes_keep_their_labels() -> None:
    X, labels, _ = _frame()
    y = np.array(["low", "mid", "high"])[labels]
    for model in (
        RandomForestClassifier(n_estimators=10, random_state=0),
        LGBMClassifier(n_estimators=10, verbose=-1, n_jobs=1),
        CatBoostClassifier(iterations=10, verbose=0, thread_count=1, allow_writing_files=False),
    ):
        model.fit(X, y)
        for precision in ("float", "double"):
            got = _run(convert_estimator(model, X.head(20), precision=precision), X)
            np.testing.assert_array_equal(got["label"], model.predict(X).ravel())


@pytest.mark.parametrize("label", ["only", 3, True], ids=["text", "int", "bool"])
def test_a_forest_of_one_class_predicts_it(label) -> None:
    # ONNX Runtime's classifier operator reads a second label on one class (on text labels
    # the process aborted): such a model predicts from its scores.
    X, _, _ = _frame(200)
    y = np.array([label] * len(X))
    for model in (
        DecisionTreeClassifier(random_state=0),
        RandomForestClassifier(n_estimators=3, random_state=0),
        ExtraTreesClassifier(n_estimators=3, random_state=0),
    ):
        model.fit(X, y)
        for precision, ml_opset in (("float", None), ("float", 3), ("double", None)):
            result = convert_estimator(model, X.head(20), precision=precision, ml_opset=ml_opset)
            got = _run(result, X)
            np.testing.assert_array_equal(got["label"], model.predict(X))
            np.testing.assert_array_equal(got["probabilities"], model.predict_proba(X))


@pytest.mark.parametrize("how", ["rounds", "callback"])
def test_xgboost_stopped_early_predicts_up_to_its_best_iteration(how: str) -> None:
    # XGBoost's predict stops at best_iteration whichever way early stopping was asked for.
    import xgboost

    X, _, values = _frame(600)
    y = values + np.random.RandomState(1).normal(scale=2.0, size=len(values))
    stop = (
        {"early_stopping_rounds": 3}
        if how == "rounds"
        else {"callbacks": [xgboost.callback.EarlyStopping(rounds=3)]}
    )
    model = XGBRegressor(n_estimators=200, learning_rate=0.5, max_depth=6, n_jobs=1, **stop)
    model.fit(X[:300], y[:300], eval_set=[(X[300:], y[300:])], verbose=False)
    assert model.best_iteration + 1 < model.get_booster().num_boosted_rounds()
    for precision in ("float", "double"):
        got = _run(convert_estimator(model, X.head(20), precision=precision), X)
        np.testing.assert_allclose(got["value"].ravel(), model.predict(X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "params",
    [{}, {"max_features": 0.6, "contamination": 0.1}, {"max_samples": 1}],
    ids=["defaults", "feature-subsets", "one-row-trees"],
)
def test_isolation_forest_keeps_the_nan_routing_and_scores(params) -> None:
    # Its trees learn where missing values go; scikit-learn scores rows with NaN.
    rng = np.random.RandomState(0)
    X = rng.normal(size=(400, 5))
    X[rng.rand(*X.shape) < 0.05] = np.nan
    rows = rng.normal(scale=2.0, size=(1000, 5))
    rows[rng.rand(*rows.shape) < 0.1] = np.nan
    model = IsolationForest(random_state=0, **params).fit(X)
    for precision in ("auto", "double"):
        result = convert_estimator(model, X[:50], precision=precision)
        assert result.check is not None and result.check.ok
        got = _run(result, pd.DataFrame(rows, columns=[f"x{j}" for j in range(5)]))
        np.testing.assert_array_equal(got["label"].ravel(), model.predict(rows))
        tolerance = 1e-12 if result.precision == "double" else 1e-6
        np.testing.assert_allclose(
            got["scores"].ravel(), model.decision_function(rows), rtol=0, atol=tolerance
        )


def test_lightgbm_zero_as_missing_is_refused() -> None:
    X, labels, _ = _frame()
    model = LGBMClassifier(n_estimators=5, zero_as_missing=True, verbose=-1).fit(X, labels)
    with pytest.raises(ConversionError, match=r"zero_as_missing=True cannot be converted"):
        convert_estimator(model, X.head(5), precision="float")


def test_xgboost_with_another_missing_value_is_refused() -> None:
    X, labels, _ = _frame()
    model = XGBClassifier(n_estimators=5, missing=0.0, n_jobs=1).fit(X, labels)
    with pytest.raises(ConversionError, match=r"missing=0.0\) cannot be converted"):
        convert_estimator(model, X.head(5), precision="float")


def test_catboost_with_categorical_features_converts_from_rows_holding_its_categories() -> None:
    X = pd.DataFrame({"colour": ["red", "blue", "green", "red"] * 25, "x": np.arange(100.0)})
    model = CatBoostClassifier(
        iterations=5, verbose=0, cat_features=["colour"], allow_writing_files=False
    )
    model.fit(X, (X.x > 50).astype(int))
    # The first rows hold every colour: CatBoost keeps only hashes, the rows give the values.
    result = convert_estimator(model, X.head(5), precision="float")
    rows = pd.DataFrame({"colour": ["green", "blue", "pink"], "x": [10.0, 70.0, 60.0]})
    np.testing.assert_allclose(
        Predictor(result.model.SerializeToString()).predict(rows).probabilities,
        model.predict_proba(rows),
        atol=1e-5,
    )


def test_float_trees_load_at_ml_opset_1_and_double_ones_need_3() -> None:
    X, labels, _ = _frame()
    model = HistGradientBoostingClassifier(max_iter=5).fit(X, labels)
    as_float = convert_estimator(model, X.head(5), precision="float", ml_opset=1)
    assert as_float.metadata.opsets["ai.onnx.ml"] == 1
    with pytest.raises(ConversionError, match=r"double precision for trees needs ai.onnx.ml 3"):
        convert_estimator(model, X.head(5), precision="double", ml_opset=1)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_hist_gradient_boosting_writes_ints_not_bools(monkeypatch, precision: str) -> None:
    """protobuf 7 refuses a bool in an int-list attribute (skl2onnx's HGB converter writes one).

    protobuf 6, pinned here, silently turns the bool into an int, so the finished graph cannot
    tell; the attributes are checked as the converter hands them to skl2onnx's container.
    """
    from skl2onnx.common._container import ModelComponentContainer

    seen: list[tuple[str, str]] = []
    original = ModelComponentContainer.add_node

    def recording(self, op_type, inputs, outputs, *args, **attrs):
        for name, value in attrs.items():
            if isinstance(value, bool) or (
                isinstance(value, (list, tuple)) and any(isinstance(v, bool) for v in value)
            ):
                seen.append((op_type, name))
        return original(self, op_type, inputs, outputs, *args, **attrs)

    monkeypatch.setattr(ModelComponentContainer, "add_node", recording)
    X, labels, values = _with_nan()
    for model in (
        HistGradientBoostingClassifier(max_iter=5).fit(X, labels),
        HistGradientBoostingRegressor(max_iter=5).fit(X, values),
    ):
        convert_estimator(model, X[:10], precision=precision)
    assert seen == []


@pytest.mark.parametrize("precision", ["float", "double"])
def test_lightgbm_reads_values_near_zero_as_zero(tmp_path, precision: str) -> None:
    """LightGBM turns |x| <= 1e-35 into 0 and splits negatives from zero at -1e-35."""
    rng = np.random.RandomState(0)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=list("abcd"))
    model = LGBMClassifier(n_estimators=5, verbose=-1).fit(X, rng.randint(0, 3, 300))
    result = convert_estimator(
        model, X.head(50), precision=precision, allow_divergent=precision == "float"
    )
    predictor = Predictor(result.model.SerializeToString())
    near_zero = [-1.0000000180025095e-35, -5e-36, 5e-36, 1.0000000180025095e-35, -2e-35, 0.0]
    for column in X.columns:
        rows = X.head(len(near_zero)).copy()
        rows[column] = near_zero
        np.testing.assert_allclose(
            predictor.predict(rows).probabilities, model.predict_proba(rows), atol=1e-5
        )
    if precision == "double":  # LightGBM compares in float64: float32 flips its thresholds
        path = result.save(tmp_path / "lgbm.onnx")
        assert validate_model(path, model, X.tail(100)).verdict == "EQUIVALENT"


@pytest.mark.parametrize("ml_opset", [None, 3])
def test_xgboost_with_two_targets_declares_both_columns(ml_opset) -> None:
    X = np.random.RandomState(SEED).normal(size=(400, 4)).astype(np.float32)
    y = X[:, 0] * 3 + np.sin(X[:, 1])
    model = XGBRegressor(n_estimators=5, max_depth=3, n_jobs=1).fit(X, np.c_[y, -y])
    result = convert_estimator(model, X[:20], precision="float", ml_opset=ml_opset)
    (output,) = result.model.graph.output
    assert [d.dim_value for d in output.type.tensor_type.shape.dim][1:] == [2]
    onnx.checker.check_model(result.model, full_check=True)
    got = _run(result, X)["value"]
    np.testing.assert_allclose(got, model.predict(X), rtol=1e-5, atol=1e-3)
