"""Models known to diverge are caught — verdict, probe set and diagnosis — and equivalent ones pass.

Each divergent model is real: a tree whose features are too large for float32, a pipeline with a
deliberately wrong converter registered in skl2onnx, a tree whose learned NaN routing is removed
from the graph, and a graph edited so ONNX Runtime and onnx.reference compute different results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import helper
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from onnxbridge import Bundle, convert_estimator, validate_bundle, validate_model


def _tree_node(model: onnx.ModelProto) -> onnx.NodeProto:
    (node,) = [n for n in model.graph.node if n.op_type.startswith("TreeEnsemble")]
    return node


def _set_attribute(node: onnx.NodeProto, name: str, value: Any) -> None:
    for attribute in list(node.attribute):
        if attribute.name == name:
            node.attribute.remove(attribute)
    node.attribute.append(helper.make_attribute(name, value))


# --------------------------------------------------------------- large magnitudes in float32
@pytest.fixture(scope="module")
def large_magnitude(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, pd.DataFrame]:
    rng = np.random.RandomState(0)
    n = 600
    frame = pd.DataFrame({"meter": 1e6 + rng.rand(n) * 3, "noise": rng.rand(n)})
    y = np.sin(frame["meter"] * 7) + 0.1 * frame["noise"]
    model = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(frame[:400], y[:400])
    path = tmp_path_factory.mktemp("large") / "large.onnx"
    # Divergent on purpose: convert would refuse it without allow_divergent.
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        conversion = convert_estimator(
            model, frame.head(50), precision="float", allow_divergent=True
        )
    conversion.save(path)
    return path, model, frame[400:].reset_index(drop=True)


def test_tree_on_large_magnitude_features_diverges_in_float32(
    large_magnitude, tmp_path: Path
) -> None:
    path, model, holdout = large_magnitude
    report = validate_model(path, model, holdout)
    assert report.verdict == "DIVERGENT"
    # Rows one float32 step from a split catch it, whatever the held-out rows do.
    thresholds = report.probe_set("thresholds")
    assert not thresholds.ok and thresholds.cause == "conversion"
    assert "thresholds" in report.failing_probe_sets and "holdout" in report.failing_probe_sets
    assert report.probe_set("batch").pairs[-1].name == "reference~reference[1-row]"
    (value,) = [c for c in thresholds.pairs[0].outputs]
    assert value.name == "value" and value.status == "big-diff" and value.worst_rows
    assert set(value.worst_rows[0]["inputs"]) == {"meter", "noise"}
    (trees,) = [d for d in report.diagnoses if d.kind == "trees"]
    assert "float32 rounding explains all of them" in trees.summary
    assert trees.data["explained_by_float32"] == trees.data["flipped_rows"] > 0
    assert trees.data["thresholds"][0]["feature"] == "meter"
    assert "thresholds" in trees.data["probe_sets"]
    # The float64 graph keeps every decision: the diagnosis re-converts and re-checks.
    recheck = trees.data["double_precision"]
    assert recheck == {"available": True, "fixed": True, "still_diverging": 0}
    assert any(
        line.startswith("re-checked with precision double: ") and line.endswith("(fixed)")
        for line in trees.details
    )
    assert trees.next_step.startswith("convert with --precision double")
    double = tmp_path / "double.onnx"
    convert_estimator(model, holdout.head(50), precision="double").save(double)
    assert validate_model(double, model, holdout).verdict == "EQUIVALENT"


# ------------------------------------------------------------- a pipeline with a wrong step
class Doubler(BaseEstimator, TransformerMixin):
    """Multiplies every column by two."""

    def fit(self, X: Any, y: Any = None) -> Doubler:
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) * 2.0


class StatelessDoubler(BaseEstimator, TransformerMixin):
    """Doubles too, but learns nothing: scikit-learn calls a pipeline ending in it unfitted."""

    def fit(self, X: Any, y: Any = None) -> StatelessDoubler:
        return self

    def transform(self, X: Any) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) * 2.0


def _doubler_shape(operator: Any) -> None:
    from skl2onnx.common.data_types import FloatTensorType

    operator.outputs[0].type = FloatTensorType([None, operator.inputs[0].type.shape[1]])


def _wrong_doubler(scope: Any, operator: Any, container: Any) -> None:
    # Deliberately wrong: multiplies by 3 instead of 2.
    factor = scope.get_unique_variable_name("factor")
    container.add_initializer(factor, onnx.TensorProto.FLOAT, [1], [3.0])
    container.add_node(
        "Mul",
        [operator.inputs[0].full_name, factor],
        [operator.outputs[0].full_name],
        name=scope.get_unique_operator_name("WrongDoubler"),
    )


@pytest.fixture(scope="module")
def wrong_converter() -> None:
    """The wrong converter, registered in skl2onnx for the two test-only classes above.

    It stays registered after the tests: its aliases and classes exist only in this module, so
    no other conversion can reach it, and skl2onnx has no public way to unregister one.
    """
    from skl2onnx import update_registered_converter

    aliases = {
        Doubler: "OnnxbridgeTestWrongDoubler",
        StatelessDoubler: "OnnxbridgeTestWrongStatelessDoubler",
    }
    for cls, alias in aliases.items():
        update_registered_converter(cls, alias, _doubler_shape, _wrong_doubler, overwrite=True)


def test_pipeline_with_a_wrong_converter_names_the_step(wrong_converter, tmp_path: Path) -> None:
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True, as_frame=True)
    pipeline = Pipeline(
        [
            ("scale", StandardScaler()),
            ("double", Doubler()),
            ("model", LogisticRegression(max_iter=500)),
        ]
    ).fit(X[::2], y[::2])
    path = tmp_path / "pipe.onnx"
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        convert_estimator(pipeline, X.head(20), allow_divergent=True).save(path)
    report = validate_model(path, pipeline, X[1::2], probes=["holdout", "range", "edge"])
    assert report.verdict == "DIVERGENT"
    holdout = report.probe_set("holdout")
    assert not holdout.ok and holdout.cause == "conversion"
    probabilities = holdout.pairs[0].outputs[1]
    assert probabilities.name == "probabilities" and probabilities.max_abs_diff > 1e-3
    (diagnosis,) = [d for d in report.diagnoses if d.kind == "pipeline"]
    assert diagnosis.summary == "the first diverging step is step 2 'double' (Doubler)"
    assert diagnosis.data["first_diverging_step"] == 2
    assert [p["ok"] for p in diagnosis.data["prefixes"]] == [True, False]
    assert "fix or replace the ONNX converter of Doubler" in diagnosis.next_step


def test_pipeline_prefix_that_cannot_be_converted(wrong_converter, tmp_path: Path) -> None:
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True, as_frame=True)
    pipeline = Pipeline(
        [
            ("scale", StandardScaler()),
            ("double", StatelessDoubler()),
            ("model", LogisticRegression(max_iter=500)),
        ]
    ).fit(X[::2], y[::2])
    path = tmp_path / "pipe.onnx"
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        convert_estimator(pipeline, X.head(20), allow_divergent=True).save(path)
    report = validate_model(path, pipeline, X[1::2], probes=["holdout"])
    (diagnosis,) = [d for d in report.diagnoses if d.kind == "pipeline"]
    assert diagnosis.summary == (
        "steps before step 2 'double' (StatelessDoubler) convert faithfully; from step 2 on the "
        "prefixes could not be checked, so the divergence is in steps 2..3"
    )
    assert diagnosis.data["prefixes"][1]["checked"] is False
    assert "is not fitted" in diagnosis.data["prefixes"][1]["error"]
    assert "StatelessDoubler" in diagnosis.next_step


# --------------------------------------------------------------- learned NaN routing dropped
@pytest.fixture(scope="module")
def nan_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any, pd.DataFrame]:
    rng = np.random.RandomState(0)
    n = 800
    frame = pd.DataFrame(rng.rand(n, 3), columns=["a", "b", "c"])
    y = (frame["a"] > 0.5).astype(int)
    gaps = rng.rand(n) < 0.25
    frame.loc[gaps, "a"] = np.nan
    y[gaps] = 0  # missing "a" means class 0: NaN must go left, with the small values
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(frame[:500], y[:500])
    folder = tmp_path_factory.mktemp("nan")
    faithful = folder / "faithful.onnx"
    # float64, so that rows on the thresholds keep their decisions too (float32 does not:
    # HistGradientBoosting compares float64 values).
    conversion = convert_estimator(model, frame.head(50), precision="double")
    conversion.save(faithful)
    # The same graph without the learned direction for NaN: what a converter that ignores
    # missing_go_to_left writes.
    node = _tree_node(conversion.model)
    # One entry per node (per interior node in ai.onnx.ml 5's TreeEnsemble).
    n_nodes = len(next(a for a in node.attribute if a.name == "nodes_featureids").ints)
    _set_attribute(node, "nodes_missing_value_tracks_true", [0] * n_nodes)
    lost = folder / "lost.onnx"
    onnx.save(conversion.model, lost)
    return faithful, lost, model, frame[500:].reset_index(drop=True)


def test_nan_routing_dropped_is_caught_and_diagnosed(nan_model) -> None:
    _, lost, model, holdout = nan_model
    report = validate_model(lost, model, holdout)
    assert report.verdict == "DIVERGENT"
    missing = report.probe_set("missing")
    assert missing.gating and not missing.ok and missing.cause == "conversion"
    assert "missing" in report.failing_probe_sets
    for name in ("range", "thresholds", "edge"):
        assert report.probe_set(name).ok, name
    (diagnosis,) = report.diagnoses
    assert diagnosis.kind == "missing-values"
    assert diagnosis.summary.startswith("missing-value routing was lost")
    assert diagnosis.data["columns"].get("a", 0) > 0
    assert "impute missing values before the model" in diagnosis.next_step


def test_faithful_nan_routing_passes_every_probe_set(nan_model) -> None:
    faithful, _, model, holdout = nan_model
    report = validate_model(faithful, model, holdout)
    assert report.verdict == "EQUIVALENT", report.failing_probe_sets
    assert report.probe_set("missing").gating and report.probe_set("missing").n_rows > 0
    assert report.warning_probe_sets == [] and report.diagnoses == []
    # The float64 tree ensemble runs on onnxbridge's reference kernel: all three runtimes agree.
    assert "failed_on" not in report.runtimes["reference"]
    assert [p.name for p in report.probe_set("holdout").pairs] == [
        "sklearn~onnxruntime",
        "sklearn~reference",
        "onnxruntime~reference",
    ]


def test_missing_values_warn_when_the_rows_hold_no_nan(nan_model) -> None:
    _, lost, model, holdout = nan_model
    complete = holdout.dropna()
    report = validate_model(lost, model, complete)
    # No NaN in the rows given: a divergence on NaN rows is a warning unless asked to gate.
    assert report.verdict == "EQUIVALENT"
    assert report.warning_probe_sets == ["missing"] and not report.probe_set("missing").gating
    (diagnosis,) = report.diagnoses
    assert diagnosis.kind == "missing-values"
    assert any(line.startswith("a warning, not part of the verdict") for line in diagnosis.details)
    strict = validate_model(lost, model, complete, missing_values="gate")
    assert strict.verdict == "DIVERGENT" and strict.failing_probe_sets == ["missing"]


# ------------------------------------------------------- the two ONNX runtimes disagree
def test_runtimes_that_disagree_are_told_from_a_conversion_error(
    iris_bundle: Bundle, tmp_path: Path
) -> None:
    # PROBIT of a probability of exactly 0 is -inf in ONNX Runtime and 0 in onnx.reference: the
    # scores differ wherever a class gets no vote, and so do the labels (argmax) of ties.
    model = onnx.load(iris_bundle.onnx_path)
    tree = _tree_node(model)
    _set_attribute(tree, "post_transform", "PROBIT")
    # The forest's vote sums are divided by the number of trees after the operator; onnx.reference
    # answers PROBIT in float64, which that Div refuses: let the operator write the scores.
    (divide,) = [n for n in model.graph.node if n.op_type == "Div" and tree.output[1] in n.input]
    tree.output[1] = divide.output[0]
    model.graph.node.remove(divide)
    path = tmp_path / "probit.onnx"
    onnx.save(model, path)
    X, _ = iris_bundle.load_holdout()
    report = validate_model(path, iris_bundle.load_estimator(), X, probes=["holdout", "range"])
    assert report.verdict == "DIVERGENT"
    holdout = report.probe_set("holdout")
    pairs = {p.name: p for p in holdout.pairs}
    assert not pairs["onnxruntime~reference"].ok
    _, scores = pairs["onnxruntime~reference"].outputs
    assert scores.status == "big-diff" and scores.max_abs_diff == float("inf")
    assert scores.worst_rows[0]["a"][0] == "-inf" and scores.worst_rows[0]["b"][0] == 0.0
    ranged = {p.name: p for p in report.probe_set("range").pairs}
    assert ranged["onnxruntime~reference"].outputs[0].n_mismatched > 0  # labels of ties
    assert holdout.cause == "conversion+runtime"
    kinds = [d.kind for d in report.diagnoses]
    assert kinds[0] == "runtime"
    runtime = report.diagnoses[0]
    assert "the two ONNX runtimes compute different results" in runtime.summary
    assert "report the runtime that departs from the ONNX specification" in runtime.next_step


def test_onnxruntime_alone_departing_is_a_runtime_problem(tmp_path: Path) -> None:
    # A graph whose output is the same for scikit-learn and onnx.reference but not for ORT
    # cannot be built from a faithful one; the cause logic is checked on a constructed result.
    from onnxbridge.validate._core import _cause
    from onnxbridge.validate._report import PairComparison, ProbeSetResult

    result = ProbeSetResult("holdout", "", 3)
    result.pairs = [
        PairComparison("sklearn", "onnxruntime", ok=False),
        PairComparison("sklearn", "reference", ok=True),
        PairComparison("onnxruntime", "reference", ok=False),
    ]
    assert _cause(result) == "onnxruntime"
    result.pairs[0].ok, result.pairs[1].ok = True, False
    assert _cause(result) == "reference"
    result.pairs[1].ok, result.pairs[2].ok = False, True
    assert _cause(result) == "conversion"


# --------------------------------------------------------------- equivalent models pass
@pytest.mark.parametrize(
    "spec",
    [
        "LogisticRegression(max_iter=500)",
        "StandardScaler() | LogisticRegression(max_iter=500)",
        "DecisionTreeClassifier(random_state=0)",
        "GradientBoostingClassifier(n_estimators=10, random_state=0)",
    ],
)
def test_equivalent_models_pass_every_probe_set(spec: str, tmp_path: Path) -> None:
    from onnxbridge import convert_bundle, train_bundle

    bundle, _ = train_bundle("iris", spec, tmp_path / "b")
    convert_bundle(bundle)
    report = validate_bundle(bundle)
    assert report.verdict == "EQUIVALENT", (report.failing_probe_sets, report.diagnoses)
    compared = [p.name for p in report.probe_sets if p.skipped is None]
    assert {"holdout", "range", "edge", "batch"} <= set(compared)
    assert all(p.ok for p in report.probe_sets if p.gating)


def test_reference_model_passes_every_probe_set(iris_bundle: Bundle) -> None:
    report = validate_bundle(iris_bundle)
    assert report.verdict == "EQUIVALENT"
    assert [p.name for p in report.probe_sets if p.skipped is None] == [
        "holdout",
        "range",
        "thresholds",
        "edge",
        "missing",
        "batch",
    ]
    assert all(p.ok for p in report.probe_sets)
    assert report.probe_set("strings").skipped == "no string columns"
    assert report.warning_probe_sets == [] and report.diagnoses == []
    proba = report.probe_set("thresholds").pairs[0].outputs[1]
    assert proba.name == "probabilities" and proba.max_abs_diff <= 1e-6


# ------------------------------------------------------------------- string inputs
def test_strings_probe_on_a_mixed_type_model(tmp_path: Path) -> None:
    """Unseen, empty and non-ASCII values of a text column, fed as a string tensor.

    (Before main's fix of empty strings, the "" row diverged here: the graph imputed it as a
    missing value while scikit-learn took it as an unseen category.)
    """
    from onnxbridge import convert_bundle, train_bundle

    rng = np.random.RandomState(0)
    n = 300
    frame = pd.DataFrame(
        {
            "age": rng.uniform(18, 80, n).round(1),
            "rooms": rng.randint(1, 6, n),
            "city": rng.choice(["Paris", "Lyon", "Zürich", "Köln"], n).astype(object),
            "income": rng.lognormal(10, 1, n),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "city"] = None
    score = frame["rooms"] + (frame["city"] == "Lyon") * 2 + frame["age"] / 30
    frame["churn"] = np.where(score > 4.5, "yes", "no")
    data = tmp_path / "customers.csv"
    frame.to_csv(data, index=False)
    bundle, _ = train_bundle(
        str(data), "LogisticRegression()", tmp_path / "b", target="churn", preprocess="auto"
    )
    convert_bundle(bundle)
    report = validate_bundle(bundle, probes=["holdout", "strings"])
    strings = report.probe_set("strings")
    assert strings.n_rows == 5 and strings.skipped is None  # one row per awkward value
    assert report.verdict == "EQUIVALENT", (report.failing_probe_sets, report.diagnoses)
    assert strings.ok and all(p.ok for p in strings.pairs)
    assert {p.name for p in strings.pairs} == {
        "sklearn~onnxruntime",
        "sklearn~reference",
        "onnxruntime~reference",
    }
