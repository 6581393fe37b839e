"""`validate` within a time budget (seeded samples), in bounded memory (batches), and saying so
when a runtime cannot run the model (a warning under the verdict)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import TensorProto, helper, numpy_helper
from sklearn.compose import ColumnTransformer
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC

from cli_support import assert_one_line_error, run
from onnxbridge import convert_estimator, save_estimator
from onnxbridge.errors import DataError
from onnxbridge.validate import ProbeSpec, validate_model
from onnxbridge.validate._html import render_html

EVERY_PAIR = ["sklearn~onnxruntime", "sklearn~reference", "onnxruntime~reference"]


@pytest.fixture(scope="module")
def forest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, pd.DataFrame]:
    """A small faithful forest and 600 held-out rows (more than the 200-row minimum sample)."""
    X, y = make_classification(n_samples=900, n_features=5, random_state=0)
    frame = pd.DataFrame(X, columns=list("abcde"))
    model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
    model.fit(frame[:300], y[:300])
    path = tmp_path_factory.mktemp("budget") / "forest.onnx"
    convert_estimator(model, frame.head(50)).save(path)
    return path, model, frame[300:].reset_index(drop=True)


SPEC = dict(probes=("holdout", "range", "edge", "batch"), range_rows=400)
# A budget spent before the first set starts (loading the model alone takes longer): every set
# beyond the minimum sample is scored on exactly that sample, however fast the machine is.
SPENT = 1e-9


def test_a_spent_budget_samples_large_sets_and_every_runtime_still_compares(forest) -> None:
    path, model, holdout = forest
    report = validate_model(path, model, holdout, probes=ProbeSpec(seed=5, **SPEC), budget=SPENT)
    assert report.verdict == "EQUIVALENT", report.failing_probe_sets
    assert report.budget_s == SPENT and report.seed == 5
    # The sets beyond the minimum sample are sampled to it; the small ones are scored whole.
    assert report.sampled_probe_sets == ["holdout", "range"]
    holdout_set, range_set = report.probe_set("holdout"), report.probe_set("range")
    within = "(seed 5) to stay within the 1e-09 s budget"
    assert holdout_set.sampled == f"sampled 200 of 600 rows {within}"
    assert range_set.sampled == f"sampled 200 of 400 rows {within}"
    assert holdout_set.n_rows == 200 and range_set.n_rows == 200
    assert report.probe_set("edge").sample is None and report.probe_set("edge").sampled is None
    for probe in report.probe_sets:
        assert [p.name for p in probe.pairs][:3] == EVERY_PAIR, probe.name
        assert all(p.ok and not p.error for p in probe.pairs), probe.name
        for pair in probe.pairs:
            assert all(c.n_rows == probe.n_rows for c in pair.outputs)
    # No runtime was left out; the minimum samples took longer than the budget, and it says so.
    (warning,) = report.warnings
    assert warning.startswith("scoring took ") and "beyond the 1e-09 s budget" in warning
    saved = report.to_dict()
    first = saved["probe_sets"][0]
    assert first["sample"]["rows"] == 200 and first["sample"]["of"] == 600
    assert first["sample"]["seed"] == 5 and first["sample"]["budget_s"] == SPENT
    assert first["sampled"] == holdout_set.sampled
    assert saved["sampled_probe_sets"] == ["holdout", "range"] and saved["budget_s"] == SPENT
    # The worst rows name rows of the sample, which the positions map back to the set.
    positions = first["sample"]["positions"]
    assert len(positions) == 200 == len(set(positions)) and positions == sorted(positions)
    assert 0 <= positions[0] and positions[-1] < 600


def test_no_budget_scores_every_row(forest) -> None:
    path, model, holdout = forest
    for budget in (None, 0, "none"):
        report = validate_model(path, model, holdout, probes=ProbeSpec(**SPEC), budget=budget)
        assert report.budget_s is None and report.sampled_probe_sets == []
        assert report.probe_set("holdout").n_rows == 600
        assert report.probe_set("range").n_rows == 400


def test_the_same_seed_samples_the_same_rows(forest) -> None:
    path, model, holdout = forest

    def positions(seed: int) -> list[int]:
        report = validate_model(
            path, model, holdout, probes=ProbeSpec(seed=seed, **SPEC), budget=SPENT
        )
        return report.probe_set("holdout").sample["positions"]

    first, again, other = positions(3), positions(3), positions(4)
    assert first == again
    assert first != other and len(other) == 200


def _compared(report) -> list:
    """Every set's rows and every pair's output comparisons, as the JSON report holds them."""
    saved = report.to_dict()
    return [
        (p["name"], p["n_rows"], p["n_refused"], [(q["name"], q["outputs"]) for q in p["pairs"]])
        for p in saved["probe_sets"]
    ]


@pytest.mark.filterwarnings("ignore:The `probability` parameter was deprecated:FutureWarning")
def test_batches_give_the_results_of_one_call(tmp_path: Path) -> None:
    # An SVM compares each row with every support vector: its cost per row is read from the
    # graph, and a small memory bound makes every runtime score in batches.
    X, y = make_classification(n_samples=900, n_features=5, random_state=0)
    frame = pd.DataFrame(X, columns=list("abcde"))
    model = SVC(probability=True, random_state=0).fit(frame[:300], y[:300])
    path = tmp_path / "svc.onnx"
    convert_estimator(model, frame.head(50)).save(path)
    holdout = frame[300:].reset_index(drop=True)
    whole = validate_model(path, model, holdout, budget=None)
    batched = validate_model(path, model, holdout, budget=None, memory_bound=100_000)
    assert whole.batch_rows >= len(holdout)
    assert batched.batch_rows < 100 and batched.memory_bound == 100_000
    assert whole.verdict == batched.verdict == "EQUIVALENT"

    assert _compared(batched) == _compared(whole)
    # Within a budget that affords every row, rows are scored in a seeded order and put back.
    generous = validate_model(path, model, holdout, budget=3600, memory_bound=100_000)
    assert generous.sampled_probe_sets == [] and _compared(generous) == _compared(whole)
    assert batched.to_dict()["batch_rows"] == batched.batch_rows


def test_a_forest_scores_in_one_batch_and_neighbours_in_many(forest) -> None:
    # A tree walks one path per row: its thresholds and leaf values build nothing per row and
    # per node, so under a bound that holds 1 250 rows of 5 columns a forest scores its 600
    # rows in one batch. A neighbour model compares each row with its 300 training rows.
    path, model, holdout = forest
    bound = 200_000
    trees = validate_model(path, model, holdout, budget=None, memory_bound=bound)
    assert trees.batch_rows >= len(holdout), trees.batch_rows
    assert trees.verdict == "EQUIVALENT"
    X, y = make_classification(n_samples=900, n_features=5, random_state=0)
    frame = pd.DataFrame(X, columns=list("abcde"))
    knn = KNeighborsClassifier(n_neighbors=5).fit(frame[:300], y[:300])
    knn_path = path.parent / "knn.onnx"
    convert_estimator(knn, frame.head(50)).save(knn_path)
    whole = validate_model(knn_path, knn, holdout, budget=None)
    batched = validate_model(knn_path, knn, holdout, budget=None, memory_bound=bound)
    assert whole.batch_rows >= len(holdout) and batched.batch_rows < 100
    assert whole.verdict == batched.verdict == "EQUIVALENT"
    assert _compared(batched) == _compared(whole)


def test_rows_the_source_model_refuses_are_found_by_halving_batches(tmp_path: Path) -> None:
    # A pipeline that imputes column a and refuses NaN in column b: 7 held-out rows hold one.
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(900, 3), columns=["a", "b", "c"])
    target = (frame["a"] + frame["b"] > 1).astype(int)
    prep = ColumnTransformer([("impute", SimpleImputer(), ["a"])], remainder="passthrough")
    model = Pipeline([("prep", prep), ("clf", LogisticRegression())])
    model.fit(frame[:300], target[:300])
    path = tmp_path / "pipeline.onnx"
    convert_estimator(model, frame.head(50)).save(path)
    holdout = frame[300:].reset_index(drop=True)
    holdout.loc[rng.choice(len(holdout), 7, replace=False), "b"] = np.nan

    def refuses(row: pd.DataFrame) -> bool:
        try:
            model.predict_proba(row)
        except ValueError:
            return True
        return False

    expected = sum(refuses(holdout.iloc[i : i + 1]) for i in range(len(holdout)))
    assert expected == 7
    counted = copy.deepcopy(model)
    counted.__class__ = _CountingPipeline
    _CountingPipeline.calls = 0
    report = validate_model(path, counted, holdout, budget=None, memory_bound=10_000)
    assert report.verdict == "EQUIVALENT"
    scored = report.probe_set("holdout")
    assert scored.n_refused == expected and scored.n_rows == len(holdout) - expected
    assert scored.refused.startswith("scikit-learn refused the rows: Input X contains NaN")
    # Each refused row costs a few halvings of its batch, not one call per row of the set.
    assert _CountingPipeline.calls < len(holdout), _CountingPipeline.calls
    # Within a budget the refused rows are the same (all rows fit in a generous one).
    timed = validate_model(path, model, holdout, budget=3600, memory_bound=10_000)
    assert timed.probe_set("holdout").n_refused == expected
    assert _compared(timed) == _compared(report)


class _CountingPipeline(Pipeline):
    """The same fitted pipeline, counting the calls scikit-learn's runtime makes to it."""

    calls = 0

    def predict(self, X):
        _CountingPipeline.calls += 1
        return super().predict(X)

    def predict_proba(self, X):
        _CountingPipeline.calls += 1
        return super().predict_proba(X)


def test_bad_budget_and_memory_bound_are_refused(forest) -> None:
    path, model, holdout = forest
    with pytest.raises(DataError, match=r"budget='soon' is not valid: pass seconds >= 0"):
        validate_model(path, model, holdout, budget="soon")
    with pytest.raises(DataError, match=r"budget=-1 is not valid"):
        validate_model(path, model, holdout, budget=-1)
    with pytest.raises(DataError, match=r"memory_bound must be a number of bytes >= 1, got 0"):
        validate_model(path, model, holdout, memory_bound=0)


def test_cli_budget(capsys, forest, tmp_path: Path) -> None:
    path, model, holdout = forest
    save_estimator(model, tmp_path / "forest.skops")
    holdout.to_csv(tmp_path / "holdout.csv", index=False)
    common = [
        "validate",
        path,
        "--reference",
        tmp_path / "forest.skops",
        "--data",
        tmp_path / "holdout.csv",
        "--probes",
        "holdout,range,edge",
        "--range-rows",
        "400",
        "--report-dir",
        tmp_path / "reports",
    ]
    code, out, err = run(capsys, *common, "--budget", str(SPENT))
    assert code == 0, err
    assert "holdout: sampled 200 of 600 rows (seed 0) to stay within the 1e-09 s budget" in out
    assert "range: sampled 200 of 400 rows (seed 0) to stay within the 1e-09 s budget" in out
    html = (tmp_path / "reports" / "validation.html").read_text()
    assert "holdout: sampled 200 of 600 rows (seed 0) to stay within the 1e-09 s budget" in html
    code, out, _ = run(capsys, *common, "--budget", "none", "--json")
    assert code == 0
    saved = json.loads(out)
    assert saved["budget_s"] is None and saved["sampled_probe_sets"] == []
    assert saved["warnings"] == []
    assert saved["probe_sets"][0]["n_rows"] == 600
    code, _, err = run(capsys, *common, "--budget", "soon")
    assert_one_line_error(code, err, r"--budget 'soon' is not valid: pass seconds >= 0")


# ------------------------------------------------------- a runtime that cannot run the model
@pytest.fixture(scope="module")
def contrib_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, pd.DataFrame]:
    """A linear model as a graph with an ONNX Runtime contrib operator (com.microsoft
    FusedMatMul): ONNX Runtime runs it, onnx.reference has no kernel for it."""
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(300, 3), columns=["a", "b", "c"])
    target = frame.to_numpy() @ np.array([0.5, -0.25, 0.125]) + 1.0
    model = LinearRegression().fit(frame, target)
    graph = helper.make_graph(
        [
            helper.make_node("FusedMatMul", ["X", "W"], ["P"], domain="com.microsoft"),
            helper.make_node("Add", ["P", "B"], ["Y"]),
        ],
        "linear",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [None, 1])],
        [
            numpy_helper.from_array(model.coef_.reshape(3, 1), "W"),
            numpy_helper.from_array(np.array([model.intercept_]), "B"),
        ],
    )
    proto = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("com.microsoft", 1)],
    )
    proto.ir_version = 8
    folder = tmp_path_factory.mktemp("contrib")
    onnx.save(proto, folder / "linear.onnx")
    return folder / "linear.onnx", model, frame


WARNING = (
    "compared on 2 of 3 runtimes: onnx.reference cannot load the model: Node type 'FusedMatMul'"
)


def test_a_runtime_that_cannot_run_is_a_warning_under_the_verdict(
    capsys, contrib_model, tmp_path: Path
) -> None:
    path, model, frame = contrib_model
    save_estimator(model, tmp_path / "linear.skops")
    frame.to_csv(tmp_path / "rows.csv", index=False)
    common = [
        "validate",
        path,
        "--reference",
        tmp_path / "linear.skops",
        "--data",
        tmp_path / "rows.csv",
        "--report-dir",
        tmp_path / "reports",
    ]
    code, out, err = run(capsys, *common)
    assert code == 0, err
    lines = out.splitlines()
    verdict = lines.index("verdict: EQUIVALENT")
    assert lines[verdict + 1].startswith("warning: " + WARNING), lines[verdict:]
    assert not any(line.startswith("note:") for line in lines)
    html = (tmp_path / "reports" / "validation.html").read_text()
    assert "warning: " + WARNING.replace("'", "&#x27;") in html
    code, out, _ = run(capsys, *common, "--json")
    saved = json.loads(out)
    (warning,) = saved["warnings"]
    assert warning.startswith(WARNING)
    assert [p["name"] for p in saved["probe_sets"][0]["pairs"]] == ["sklearn~onnxruntime"]


def test_one_runnable_runtime_is_refused(contrib_model) -> None:
    path, _, frame = contrib_model
    # No source model and no onnx.reference: nothing to compare ONNX Runtime with.
    with pytest.raises(DataError, match="only one runtime can run the model, so there is nothing"):
        validate_model(path, None, frame)


def test_a_runtime_that_fails_on_some_sets_is_named(tmp_path: Path) -> None:
    # The same linear model, plus a branch taken only when a row holds a value above 100 (the
    # edge set's rows): it matches the values with a regular expression in re2 syntax (\p{N}),
    # which ONNX Runtime runs and onnx.reference, on Python's re, refuses when it runs it.
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(rng.rand(300, 3), columns=["a", "b", "c"])
    model = LinearRegression().fit(frame, frame.to_numpy() @ np.array([0.5, -0.25, 0.125]) + 1)
    matched = helper.make_graph(
        [
            helper.make_node("Cast", ["X"], ["text"], to=TensorProto.STRING),
            helper.make_node("RegexFullMatch", ["text"], ["match"], pattern=r"\p{N}.*"),
            helper.make_node("Cast", ["match"], ["ones"], to=TensorProto.DOUBLE),
            helper.make_node("ReduceSum", ["ones"], ["count"], keepdims=0),
            helper.make_node("Mul", ["count", "zero"], ["nothing"]),
            helper.make_node("Add", ["P", "nothing"], ["Y1"]),
        ],
        "matched",
        [],
        [helper.make_tensor_value_info("Y1", TensorProto.DOUBLE, [None, 1])],
    )
    plain = helper.make_graph(
        [helper.make_node("Identity", ["P"], ["Y2"])],
        "plain",
        [],
        [helper.make_tensor_value_info("Y2", TensorProto.DOUBLE, [None, 1])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "W"], ["XW"]),
            helper.make_node("Add", ["XW", "B"], ["P"]),
            helper.make_node("ReduceMax", ["X"], ["largest"], keepdims=0),
            helper.make_node("Greater", ["largest", "limit"], ["large"]),
            helper.make_node("If", ["large"], ["Y"], then_branch=matched, else_branch=plain),
        ],
        "linear",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [None, 1])],
        [
            numpy_helper.from_array(model.coef_.reshape(3, 1), "W"),
            numpy_helper.from_array(np.array([model.intercept_]), "B"),
            numpy_helper.from_array(np.array(100.0), "limit"),
            numpy_helper.from_array(np.array(0.0), "zero"),
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    proto.ir_version = 9
    onnx.save(proto, tmp_path / "linear.onnx")
    report = validate_model(tmp_path / "linear.onnx", model, frame, probes=["holdout", "edge"])
    assert report.verdict == "EQUIVALENT"
    assert [p.name for p in report.probe_set("holdout").pairs] == EVERY_PAIR
    assert [p.name for p in report.probe_set("edge").pairs] == ["sklearn~onnxruntime"]
    (warning,) = report.warnings
    assert warning.startswith(
        "compared on 2 of 3 runtimes on edge: onnx.reference failed to run the model: "
        "Invalid regex pattern"
    ), warning
    assert report.to_dict()["warnings"] == [warning]
    assert "warning: compared on 2 of 3 runtimes on edge:" in render_html(report)
