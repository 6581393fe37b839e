"""What validate compares on the held-out rows a user passes.

A text column of digits (zip codes) comes back from a CSV file as numbers: validate hands
scikit-learn the same text ONNX Runtime gets, so the held-out rows are compared instead of being
refused. When scikit-learn refuses every held-out row anyway, the report says the verdict rests
on the generated probe sets only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from onnxbridge import convert_estimator, validate_model


@pytest.fixture(scope="module")
def zip_model(tmp_path_factory):
    rng = np.random.default_rng(0)
    n = 300
    X = pd.DataFrame(
        {"zip": rng.choice(["10", "20", "30"], n).astype(object), "x": rng.normal(size=n)}
    )
    y = (X["x"] + (X["zip"] == "20") > 0.5).astype(int)
    prep = ColumnTransformer(
        [("zip", OneHotEncoder(handle_unknown="error"), ["zip"])], remainder="passthrough"
    )
    model = make_pipeline(prep, LogisticRegression()).fit(X, y)
    folder = tmp_path_factory.mktemp("zip")
    path = convert_estimator(model, X.head(100)).save(folder / "zip.onnx")
    data = folder / "held_out.csv"
    X.to_csv(data, index=False)
    assert pd.read_csv(data)["zip"].dtype.kind == "i"  # the file reads the codes as numbers
    return path, model, data


def test_a_text_column_read_as_numbers_is_compared_as_text(zip_model) -> None:
    path, model, data = zip_model
    report = validate_model(path, model, data, probes=["holdout", "range", "batch"])
    holdout = next(p for p in report.probe_sets if p.name == "holdout")
    assert holdout.skipped is None and holdout.n_rows == 300 and holdout.n_refused == 0
    assert all(p.ok for p in holdout.pairs)
    assert report.verdict == "EQUIVALENT" and report.warnings == []


def test_held_out_rows_scikit_learn_refuses_are_a_warning(tmp_path) -> None:
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = (X["a"] > 0).astype(int)
    model = LogisticRegression().fit(X, y)
    path = convert_estimator(model, X.head(50)).save(tmp_path / "m.onnx")
    held_out = X.assign(b=np.nan)  # LogisticRegression refuses NaN: every row
    report = validate_model(path, model, held_out, probes=["holdout", "range"])
    (warning,) = report.warnings
    assert warning.startswith("no held-out row was compared: scikit-learn refused every row")
    assert "the verdict rests on the generated probe sets only" in warning
    assert "warnings" in report.to_dict() and report.to_dict()["warnings"] == [warning]


@pytest.mark.parametrize("source_takes_inf", [False, True], ids=["both-refuse", "onnx-refuses"])
def test_rows_the_onnx_inputs_cannot_take_are_left_out_not_a_divergence(
    tmp_path, source_takes_inf: bool
) -> None:
    # ±inf: predict refuses such a row in one line; scikit-learn refuses it too (a forest) or
    # scores it (histogram boosting). Neither is a wrong answer of the ONNX model.
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    y = (X["a"] + X["b"] > 0).astype(int)
    model = (
        HistGradientBoostingClassifier(max_iter=10, random_state=0)
        if source_takes_inf
        else RandomForestClassifier(n_estimators=5, random_state=0)
    ).fit(X, y)
    path = convert_estimator(model, X.head(50)).save(tmp_path / "m.onnx")
    held_out = X.copy()
    held_out.loc[[3, 40, 41], "b"] = [np.inf, -np.inf, np.inf]
    report = validate_model(path, model, held_out, probes=["holdout", "range"])
    assert report.verdict == "EQUIVALENT", report.to_dict()
    holdout = report.to_dict()["probe_sets"][0]
    assert holdout["name"] == "holdout"
    assert holdout["n_unscoreable"] == 3 and holdout["n_rows"] == len(X) - 3
    assert "column 'b': inf is not a finite number" in holdout["unscoreable"]
    assert any(
        w.startswith("holdout: 3 rows left out: the ONNX model's inputs") for w in report.warnings
    )
