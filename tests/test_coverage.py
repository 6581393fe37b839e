"""The coverage harness and ``onnxbridge coverage``: real training, conversion, ONNX Runtime runs.

The last test keeps docs/coverage.md current: it reruns every estimator that is cheap to run (all
but those in ``SLOW``) and compares the verdicts with the committed page.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onnxbridge._cli.main import main
from onnxbridge.coverage import (
    DATA_KINDS,
    DIVERGENT,
    EQUIVALENT,
    FAILED,
    MARKDOWN_INTRO,
    STAGES,
    CoverageCase,
    CoverageReport,
    all_cases,
    core_estimator_names,
    make_data,
    parse_markdown_verdicts,
    run_case,
    run_coverage,
    select_cases,
)
from onnxbridge.errors import DataError

DOC = Path(__file__).resolve().parents[1] / "docs" / "coverage.md"
REGENERATE = "onnxbridge coverage --out-md docs/coverage.md"

# Estimators that took more than about 2.5 s in the runs that generated docs/coverage.md (fit or
# conversion) and are not converted by a converter of their own family; the currency test leaves
# them out to stay within a couple of minutes.
SLOW = {
    "BayesianGaussianMixture",
    "DictionaryLearning",
    "IsolationForest",
    "LatentDirichletAllocation",
    "MLPClassifier",
    "MLPRegressor",
    "MeanShift",
    "MiniBatchDictionaryLearning",
    "MiniBatchSparsePCA",
    "QuantileTransformer",
    "RFECV",
    "SequentialFeatureSelector",
    "SparsePCA",
    "StackingClassifier",
    "TSNE",
    "TunedThresholdClassifierCV",
}


def _case(name: str) -> CoverageCase:
    return next(c for c in all_cases() if c.name == name)


def test_the_core_group_is_all_estimators_of_the_four_types() -> None:
    from sklearn.utils import all_estimators

    names = core_estimator_names()
    listed = {n for n, _ in all_estimators(type_filter=["classifier", "regressor"])}
    listed |= {n for n, _ in all_estimators(type_filter=["transformer", "cluster"])}
    # Experimental estimators join all_estimators() once enabled (other tests enable one).
    listed -= {"IterativeImputer", "HalvingGridSearchCV", "HalvingRandomSearchCV"}
    assert names == sorted(listed)
    assert len(names) == 181  # scikit-learn 1.9.1 (constraints.txt)
    groups = {}
    for case in all_cases():
        groups.setdefault(case.group, []).append(case.name)
        assert case.data in DATA_KINDS, case.name
    assert sorted(groups["core"]) == names
    assert groups["outlier"] == [
        "EllipticEnvelope",
        "IsolationForest",
        "LocalOutlierFactor",
        "OneClassSVM",
        "SGDOneClassSVM",
    ]
    assert sorted(groups["booster"]) == [
        "CatBoostClassifier",
        "CatBoostRegressor",
        "LGBMClassifier",
        "LGBMRegressor",
        "XGBClassifier",
        "XGBRegressor",
    ]
    assert {c.name: c.data for c in all_cases() if c.group == "categorical"} == {
        "HistGradientBoostingClassifier[categorical]": "category_dtype",
        "LGBMClassifier[categorical]": "category_dtype",
        "XGBClassifier[categorical]": "category_dtype_known",
        "CatBoostClassifier[categorical]": "category_strings",
    }
    assert len({c.name for c in all_cases()}) == len(all_cases())


def test_category_tables_hold_what_real_tables_hold() -> None:
    import pandas as pd

    data = make_data("category_dtype")
    for frame in (data.X_fit, data.X_onnx):
        assert [str(t) for t in frame.dtypes] == ["category", "category", "float64", "float64"]
    seen = set(data.X_fit["color"].dropna())
    compared = set(data.X_onnx["color"].dropna())
    assert compared - seen == {"violet"} and "Oslo" in set(data.X_onnx["city"].dropna())
    assert data.X_fit["color"].isna().any() and data.X_onnx["city"].isna().any()
    assert data.X_onnx.duplicated().sum() >= 40
    # XGBoost's rows keep the training categories: an unseen value arrives as missing.
    known = make_data("category_dtype_known")
    assert list(known.X_onnx["color"].cat.categories) == sorted(seen)
    assert known.X_onnx["color"].isna().sum() > data.X_onnx["color"].isna().sum()
    strings = make_data("category_strings")
    assert strings.X_fit["city"].dtype.kind in "OU" and not strings.X_fit.isna().any().any()
    assert "violet" in set(strings.X_onnx["color"]) and isinstance(strings.X_onnx, pd.DataFrame)


@pytest.mark.parametrize("name", ["ClassifierChain", "MultiOutputClassifier"])
def test_multi_output_classifiers_compare_every_target(name: str) -> None:
    result = run_case(_case(name))
    assert result.status == EQUIVALENT, result.reason
    roles = [c.role for c in result.comparisons]
    assert roles == [f"{r}_{t}" for t in range(3) for r in ("label", "probabilities")]
    assert [c.kind for c in result.comparisons][:2] == ["labels", "values"]
    assert result.label_agreement == 1.0 and result.max_abs_diff <= 1e-5


def test_categorical_boosters_train_and_either_convert_exactly_or_say_why() -> None:
    for case in all_cases():
        if case.group != "categorical":
            continue
        result = run_case(case)
        assert result.stages["train"] == "ok", (case.name, result.reason)
        if result.verdict != EQUIVALENT:
            # Until native categorical splits convert, the refusal names the categories.
            assert result.status == "FAILED at convert", (case.name, result.reason)
            assert result.reason.startswith("ConversionError: "), result.reason
            assert "categor" in result.reason or "cat features" in result.reason, result.reason


def test_data_kinds_are_seeded_and_keep_fit_and_compare_rows_apart() -> None:
    for kind in DATA_KINDS:
        first, second = make_data(kind), make_data(kind)
        assert repr(first.X_onnx) == repr(second.X_onnx), kind
        assert len(first.X_onnx) == len(first.X_sklearn), kind
    data = make_data("multiclass")
    assert data.X_fit.shape == (200, 6) and data.X_onnx.shape == (100, 6)
    assert sorted(set(data.y_fit)) == [0, 1, 2]
    assert (make_data("positive").X_fit >= 0).all()
    assert make_data("one_feature").X_fit.ndim == 1
    with pytest.raises(DataError, match="unknown coverage data kind 'nope'; use one of binary"):
        make_data("nope")


def test_an_equivalent_estimator_passes_every_stage() -> None:
    result = run_case(_case("LogisticRegression"))
    assert result.verdict == EQUIVALENT and result.status == EQUIVALENT
    assert result.stages == dict.fromkeys(STAGES, "ok")
    assert [c.role for c in result.comparisons] == ["label", "probabilities"]
    assert result.label_agreement == 1.0
    assert 0 < result.max_abs_diff <= 1e-5
    assert result.opsets[""] >= 15 and "ai.onnx.ml" in result.opsets
    assert result.reason == ""


def test_values_out_of_tolerance_make_it_divergent() -> None:
    # float32 ONNX probabilities never equal float64 scikit-learn ones to the last bit.
    result = run_case(_case("LogisticRegression"), atol=0.0, rtol=0.0)
    assert result.verdict == DIVERGENT
    assert result.stages["compare"] == "ok"
    assert result.reason.startswith("probabilities: ")
    assert "rows out of tolerance (max |Δ|" in result.reason
    assert result.label_agreement == 1.0


def test_a_failing_stage_is_recorded_with_its_reason() -> None:
    from sklearn.linear_model import Ridge

    bad = CoverageCase("Ridge", "core", "regression", lambda: Ridge(alpha=-1.0))
    result = run_case(bad)
    assert result.status == "FAILED at train"
    assert result.stages == {"train": "failed"}
    assert result.reason.startswith("InvalidParameterError: The 'alpha' parameter of Ridge")

    result = run_case(_case("AgglomerativeClustering"))
    assert result.status == "FAILED at convert"
    assert result.stages == {"train": "ok", "convert": "failed"}
    assert result.reason.startswith(
        "ConversionError: AgglomerativeClustering has neither predict nor transform"
    )


def test_run_coverage_isolates_estimators_and_enforces_the_time_limit() -> None:
    seen: list[tuple[str, int, int]] = []
    report = run_coverage(
        ["TSNE", "LogisticRegression"],
        timeout=0.05,
        on_result=lambda r, i, n: seen.append((r.name, i, n)),
    )
    # Run order is the table's order, whatever the order asked for.
    assert seen == [("LogisticRegression", 1, 2), ("TSNE", 2, 2)]
    by_name = {r.name: r for r in report.results}
    # LogisticRegression may itself be slower than 0.05 s; TSNE's fit always is.
    tsne = by_name["TSNE"]
    assert tsne.status == "FAILED at train"
    assert tsne.reason.startswith("TimeoutError: no result within the 0.05 s limit")
    assert report.complete is False


def test_run_coverage_refuses_unknown_names_and_bad_limits() -> None:
    with pytest.raises(DataError, match=r"only='LogisticRegresion' is not an estimator .*"):
        run_coverage(["LogisticRegresion"])
    with pytest.raises(DataError, match="did you mean LogisticRegression"):
        select_cases(["LogisticRegresion"])
    with pytest.raises(DataError, match=r"timeout=0 is not allowed: it must be > 0 seconds"):
        run_coverage(["PCA"], timeout=0)


@pytest.fixture(scope="module")
def small_report() -> CoverageReport:
    return run_coverage(["LogisticRegression", "AgglomerativeClustering", "PCA", "OneClassSVM"])


def test_markdown_has_a_summary_a_table_per_group_and_round_trips(
    small_report: CoverageReport,
) -> None:
    text = small_report.to_markdown(MARKDOWN_INTRO)
    assert text.startswith("# What converts today")
    assert REGENERATE in text
    assert "- **core: 2 of 3 EQUIVALENT (0 DIVERGENT, 1 FAILED)**" in text
    assert "- **outlier: " in text
    assert "**Partial run** (`--only`)" in text
    header = (
        "| estimator | data | train | convert | load/run | compare | verdict | max abs Δ | "
        "max rel Δ | labels | opsets | reason |"
    )
    assert text.count(header) == 2  # core and outlier tables
    row = next(line for line in text.splitlines() if line.startswith("| `AgglomerativeClustering`"))
    assert "| ok | failed | – | – | **FAILED at convert** |" in row
    verdicts = parse_markdown_verdicts(text)
    assert verdicts == {r.name: r.status for r in small_report.results}


def test_json_has_the_summary_and_every_stage(small_report: CoverageReport, tmp_path: Path) -> None:
    path = small_report.write_json(tmp_path / "coverage.json")
    payload = json.loads(path.read_text())
    assert payload["summary"]["core"] == {EQUIVALENT: 2, DIVERGENT: 0, FAILED: 1, "total": 3}
    assert payload["complete"] is False and payload["atol"] == 1e-5
    assert "scikit-learn" in payload["versions"] and "onnxruntime" in payload["versions"]
    lr = next(r for r in payload["results"] if r["name"] == "LogisticRegression")
    assert lr["stages"] == dict.fromkeys(STAGES, "ok")
    assert lr["status"] == EQUIVALENT and lr["label_agreement"] == 1.0
    assert lr["max_abs_diff"] <= 1e-5 and lr["opsets"]["ai.onnx.ml"] >= 1
    failed = next(r for r in payload["results"] if r["name"] == "AgglomerativeClustering")
    assert failed["failed_stage"] == "convert" and failed["status"] == "FAILED at convert"


def test_cli_writes_both_reports_prints_json_and_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    md, js = tmp_path / "coverage.md", tmp_path / "coverage.json"
    only = ["--only", "PCA,AgglomerativeClustering"]
    outs = ["--out-md", str(md), "--out-json", str(js)]
    code = main(["coverage", *only, *outs, "--json", "--min-equivalent", "2"])
    captured = capsys.readouterr()
    assert code == 1  # 1 core estimator EQUIVALENT, 2 asked for
    assert json.loads(captured.out)["summary"]["core"] == {
        EQUIVALENT: 1,
        DIVERGENT: 0,
        FAILED: 1,
        "total": 2,
    }
    # With --json, progress and the summary go to standard error.
    assert "[1/2] AgglomerativeClustering" in captured.err
    assert "FAILED at convert" in captured.err
    assert "core: 1 of 2 EQUIVALENT (0 DIVERGENT, 1 FAILED)" in captured.err
    assert f"wrote {md}" in captured.err and f"wrote {js}" in captured.err
    assert "check failed: 1 core estimators EQUIVALENT, --min-equivalent 2" in captured.err
    assert parse_markdown_verdicts(md.read_text()) == {
        "AgglomerativeClustering": "FAILED at convert",
        "PCA": EQUIVALENT,
    }
    assert json.loads(js.read_text())["summary"]["core"]["total"] == 2


def test_cli_lists_the_estimators_and_refuses_bad_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["coverage", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(all_cases())
    assert "IsotonicRegression\tcore\tone_feature" in lines
    assert main(["coverage", "--only", "Nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only 'Nope' is not an estimator of the coverage run")
    assert main(["coverage", "--only", "PCA", "--timeout", "-1"]) == 2
    assert "error: --timeout -1.0 is not allowed: it must be > 0 seconds" in capsys.readouterr().err
    assert main(["coverage", "--only", "PCA", "--atol", "-1"]) == 2
    err = capsys.readouterr().err
    assert "error: tolerances must be >= 0, got --atol -1.0; e.g. --atol 1e-5" in err


def test_the_committed_coverage_page_is_current() -> None:
    """docs/coverage.md lists every estimator, and a fresh run agrees on every cheap one."""
    committed = parse_markdown_verdicts(DOC.read_text())
    text = DOC.read_text()
    assert REGENERATE in text and "**Partial run**" not in text
    names = [c.name for c in all_cases()]
    assert sorted(committed) == sorted(names), (
        f"docs/coverage.md does not list the estimators of the run; regenerate it: {REGENERATE}"
    )
    cheap = [n for n in names if n not in SLOW]
    report = run_coverage(cheap)
    fresh = {r.name: r.status for r in report.results}
    changed = {n: (committed[n], fresh[n]) for n in cheap if committed[n] != fresh[n]}
    assert not changed, (
        f"docs/coverage.md is out of date ({len(changed)} changed: "
        + ", ".join(f"{n}: {old} -> {new}" for n, (old, new) in sorted(changed.items()))
        + f"); regenerate it: {REGENERATE}"
    )


def test_cli_names_the_categorical_rows_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    # Square brackets are markup to the console: the name must come through as it is.
    assert main(["coverage", "--only", "HistGradientBoostingClassifier[categorical]"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] HistGradientBoostingClassifier[categorical] " in out
    assert "categorical: " in out and " of 1 EQUIVALENT" in out
