"""convert's check before writing: which rows it compares, and what it says when it cannot."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from convert_support import Shifter, register_wrong_converter
from onnxbridge import Bundle, convert_estimator
from onnxbridge.data import blank_values
from onnxbridge.errors import ConversionError


def _numbers(n_rows: int, n_columns: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        rng.normal(size=(n_rows, n_columns)), columns=[f"f{i}" for i in range(n_columns)]
    )
    return X, (X["f0"] + 0.5 * X["f1"] > 0).to_numpy().astype(int)


# ------------------------------------------------------------- a missing value in a text column
@pytest.mark.parametrize("dtype", ["object", "category", "string"])
def test_a_missing_text_value_is_probed_where_the_model_takes_it(dtype: str) -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=80), "c": rng.choice(["x", "y", "z"], 80)})
    y = ((X["a"] > 0) ^ (X["c"] == "x")).to_numpy().astype(int)
    prep = ColumnTransformer(
        [("s", StandardScaler(), ["a"]), ("o", OneHotEncoder(handle_unknown="ignore"), ["c"])]
    )
    model = make_pipeline(prep, LogisticRegression()).fit(X, y)
    result = convert_estimator(model, X.astype({"c": dtype}).head(40))
    assert result.metadata.missing_by_column == {"a": "refused", "c": "accepted"}
    check = result.check
    assert check.ok is True
    # The check agrees with the metadata: 'c' takes a missing value and is probed with one.
    assert check.probe_rows["missing"] == 1
    assert "missing: scikit-learn refuses missing values in 'a'" in check.skipped
    assert not any("'c'" in s for s in check.skipped if s.startswith("missing"))


@pytest.mark.parametrize(
    ("column", "missing"),
    [
        (pd.Series([1, 2, 3]), None),
        (pd.Series([True, False, True]), None),
        (pd.Series(["a", "b", "c"], dtype=object), None),
        (pd.Series(["a", "b", "c"], dtype="category"), "category"),
        (pd.Series(["a", "b", "c"], dtype="string"), "string"),
    ],
)
def test_a_blank_value_keeps_the_column_kind(column: pd.Series, missing: str | None) -> None:
    blank = blank_values(column, [1])
    assert blank.isna().tolist() == [False, True, False]
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        assert blank.dtype == np.float64
        assert blank[[0, 2]].tolist() == column[[0, 2]].astype(float).tolist()
    else:
        assert str(blank.dtype) == str(column.dtype)  # text stays text
        assert blank[[0, 2]].tolist() == column[[0, 2]].tolist()
    assert blank_values(column).isna().all()


# ------------------------------------------------------------------------- the probe budget
def test_columns_refusing_missing_values_leave_the_probe_rows_to_other_kinds() -> None:
    X, y = _numbers(300, 220)
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    result = convert_estimator(model, X.head(50))
    check = result.check
    assert check.ok is True
    assert set(result.metadata.missing_by_column.values()) == {"refused"}
    assert "missing" not in check.probe_rows
    assert check.probe_rows["extremes"] > 0
    assert check.rows == 50 + check.probe_rows["extremes"]


def test_each_probe_kind_gets_a_share() -> None:
    X, y = _numbers(300, 220)
    # Takes a missing value in every column (imputed), so missing probes could fill the budget.
    model = make_pipeline(SimpleImputer(), LogisticRegression()).fit(X, y)
    result = convert_estimator(model, X.head(50))
    check = result.check
    assert set(result.metadata.missing_by_column.values()) == {"accepted"}
    assert check.probe_rows["missing"] > 0 and check.probe_rows["extremes"] > 0
    assert sum(check.probe_rows.values()) <= 200


# --------------------------------------------------- sample rows the source model refuses
def test_sample_rows_with_refused_missing_values_are_left_out_not_all_rows() -> None:
    X, y = _numbers(200, 3)
    model = LogisticRegression().fit(X, y)
    sample = X.head(60).copy()
    sample.loc[::2, "f0"] = np.nan
    result = convert_estimator(model, sample)
    check = result.check
    assert check.ok is True
    assert check.sample_rows == 30
    assert check.probe_rows["extremes"] == 6  # built from the rows kept
    assert any(
        s.startswith("sample: 30 of 60 rows left out") and "'f0'" in s for s in check.skipped
    )


def test_a_missing_value_in_a_column_the_model_takes_keeps_the_row() -> None:
    X, y = _numbers(200, 4)
    prep = ColumnTransformer(
        [("imp", SimpleImputer(), ["f0", "f1"]), ("keep", "passthrough", ["f2", "f3"])]
    )
    model = make_pipeline(prep, LogisticRegression()).fit(X, y)
    sample = X.head(40).copy()
    sample.loc[::2, "f0"] = np.nan  # taken: rows kept
    sample.loc[1::4, "f3"] = np.nan  # refused: rows left out
    result = convert_estimator(model, sample)
    assert result.metadata.missing_by_column == {
        "f0": "accepted",
        "f1": "accepted",
        "f2": "refused",
        "f3": "refused",
    }
    assert result.check.ok is True
    assert result.check.sample_rows == 30
    assert result.check.probe_rows["missing"] == 2


def test_no_comparable_sample_row_means_not_checked() -> None:
    X, y = _numbers(200, 3)
    model = LogisticRegression().fit(X, y)
    sample = X.head(20).assign(f1=np.nan)
    with pytest.raises(ConversionError) as refused:
        convert_estimator(model, sample)
    message = str(refused.value)
    assert message.startswith("convert refused: nothing could be compared with scikit-learn")
    assert "nothing was written" in message and "allow_divergent=True" in message
    with pytest.warns(UserWarning, match="NOT CHECKED: no sample row could be compared"):
        result = convert_estimator(model, sample, allow_divergent=True)
    check = result.check
    assert check.ok is None and not check.checked
    assert check.rows == 0
    assert check.unchecked.startswith("no sample row could be compared: 20 of 20 rows left out")
    assert "'f1'" in check.unchecked
    assert check.summary().startswith("not checked: no sample row could be compared")
    assert any(n.startswith("NOT CHECKED") for n in result.notes)


def test_a_bundle_with_no_comparable_row_is_recorded_unchecked(tmp_path, capsys) -> None:
    from sklearn.datasets import load_iris

    from cli_support import run
    from onnxbridge import train_bundle

    good, _ = train_bundle("iris", "LogisticRegression(max_iter=500)", tmp_path / "good")
    X, y = load_iris(return_X_y=True, as_frame=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    holdout = pd.read_parquet(good.holdout_path)
    for i, name in enumerate(X.columns):  # every row misses one value, no column all
        holdout.loc[holdout.index[i :: len(X.columns)], name] = np.nan
    card = {k: v for k, v in good.card.items() if k != "files"}
    bundle = Bundle.create(tmp_path / "b", card=card, estimator=model, holdout=holdout)
    before = bundle.card_path.read_bytes()
    code, out, err = run(capsys, "convert", bundle.path)
    assert code == 2
    assert "convert refused: nothing could be compared with scikit-learn" in err
    assert "\n" not in err.strip()
    assert not bundle.onnx_path.exists() and bundle.card_path.read_bytes() == before
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        code, out, err = run(capsys, "convert", bundle.path, "--allow-divergent")
    assert code == 0, err
    assert "NOT checked (--allow-divergent): no sample row could be compared" in out
    written = json.loads(bundle.card_path.read_text())
    assert written["conversion"]["checked"] is False
    assert written["conversion"]["check"]["ok"] is None
    assert written["conversion"]["check"]["unchecked"].startswith("no sample row could be compared")


def test_a_sample_file_gives_its_complete_rows_first(tmp_path, capsys) -> None:
    """The first 100 rows of a --sample file miss a value the model refuses; rows after them
    are complete: convert compares those."""
    from cli_support import run
    from onnxbridge import save_estimator

    X, y = _numbers(300, 3)
    model = LogisticRegression().fit(X, y)
    sample = X.copy()
    sample.loc[sample.index[:100], "f0"] = np.nan
    sample.to_csv(tmp_path / "sample.csv", index=False)
    save_estimator(model, tmp_path / "m.skops")
    code, out, err = run(
        capsys, "convert", tmp_path / "m.skops", "--sample", tmp_path / "sample.csv"
    )
    assert code == 0, err
    assert re.search(r"checked: 0 of \d+ rows differ from scikit-learn \(100 sample", out), out


# ----------------------------------------------- a prefix that fails while naming the step
class _Shifter(Shifter):
    """A wrong converter's transformer that, asked whether it is fitted, cannot say."""

    def __sklearn_is_fitted__(self):
        raise NotImplementedError("fitted state lives elsewhere")


def test_a_prefix_failing_with_any_error_is_recorded_not_raised() -> None:
    register_wrong_converter(_Shifter)
    X, y = _numbers(200, 3)
    model = Pipeline([("shift", _Shifter()), ("model", LogisticRegression())]).fit(X, y)
    with pytest.raises(ConversionError) as caught:
        convert_estimator(model, X.head(40))
    message = str(caught.value)
    assert "convert refused" in message and "\n" not in message
    assert "from step 1 on the prefixes could not be checked" in message
    with pytest.warns(UserWarning, match="NOT CHECKED"):
        result = convert_estimator(model, X.head(40), allow_divergent=True)
    prefix = result.check.diverging_step["prefixes"][0]
    assert prefix["checked"] is False
    assert "fitted state lives elsewhere" in prefix["error"]


def test_the_few_columns_taking_a_missing_value_are_found_among_many() -> None:
    X, y = _numbers(200, 40)
    imputed = ["f3", "f10", "f11", "f12", "f33"]
    prep = ColumnTransformer([("imp", SimpleImputer(), imputed)], remainder=StandardScaler())
    model = make_pipeline(prep, LogisticRegression()).fit(X, y)
    result = convert_estimator(model, X.head(30))
    by_column = result.metadata.missing_by_column
    assert [c for c, v in by_column.items() if v == "accepted"] == imputed
    assert result.check.probe_rows["missing"] == len(imputed)


def test_a_conversion_without_the_missing_value_policy_refuses_missing_values() -> None:
    """Without asking scikit-learn, nothing is known: predict must refuse rows with NaN."""
    from onnxbridge import Predictor
    from onnxbridge.convert._core import convert_unchecked
    from onnxbridge.errors import SchemaMismatchError

    X, y = _numbers(100, 3)
    model = LogisticRegression().fit(X, y)
    result = convert_unchecked(model, X.head(20), missing_policy=False)
    assert result.metadata.missing_values == "refused"
    rows = X.head(2).copy()
    rows.loc[rows.index[0], "f1"] = np.nan
    with pytest.raises(SchemaMismatchError, match="missing values"):
        Predictor(result.model.SerializeToString()).predict(rows)
