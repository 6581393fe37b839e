"""The missing probe set blanks the columns where the source model takes a missing value.

A pipeline that scales its numbers (StandardScaler refuses NaN) and one-hot encodes its text
(OneHotEncoder learns NaN as a category) takes missing text but not missing numbers: validate
probes missing values in the text columns instead of skipping the set.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from onnxbridge import convert_estimator, validate_model


def _table(n: int = 400) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.RandomState(3)
    frame = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "income": rng.lognormal(10, 1, n),
            "city": rng.choice(["Oslo", "Rome", "Lima", None], n, p=[0.4, 0.3, 0.2, 0.1]),
            "job": rng.choice(["a", "b", "c"], n).astype(object),
        }
    )
    target = pd.Series(np.where(frame["city"].isna() | (frame["age"] > 45), "yes", "no"))
    return frame, target


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> tuple[str, object, pd.DataFrame]:
    X, y = _table()
    prep = ColumnTransformer(
        [
            ("num", StandardScaler(), ["age", "income"]),
            ("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "job"]),
        ]
    )
    model = make_pipeline(prep, LogisticRegression(max_iter=500)).fit(X[:300], y[:300])
    path = tmp_path_factory.mktemp("missing") / "model.onnx"
    convert_estimator(model, X[:100]).save(path)
    return str(path), model, X[300:].reset_index(drop=True)


def test_missing_set_blanks_only_the_columns_the_model_takes_missing(model_file) -> None:
    path, model, holdout = model_file
    complete = holdout.dropna().reset_index(drop=True)
    report = validate_model(path, model, complete, probes=["missing", "categories"])
    sets = {s.name: s for s in report.probe_sets}
    missing = sets["missing"]
    assert missing.skipped is None
    assert "2 of 4 columns" in missing.description
    assert "refuses missing values in age, income" in missing.description
    assert missing.n_rows > 0 and all(p.ok for p in missing.pairs)
    assert {p.name for p in missing.pairs} == {
        "sklearn~onnxruntime",
        "sklearn~reference",
        "onnxruntime~reference",
    }
    assert "every string column the model takes missing, missing" in sets["categories"].description
    assert report.verdict == "EQUIVALENT"


def test_a_model_refusing_every_column_still_skips_the_set(model_file) -> None:
    X, y = _table()
    X, y = X[X["city"].notna()], y[X["city"].notna()]
    # handle_unknown="error" fitted without NaN: a missing text value is an unknown category.
    prep = ColumnTransformer(
        [
            ("num", StandardScaler(), ["age", "income"]),
            ("cat", OneHotEncoder(handle_unknown="error"), ["city", "job"]),
        ]
    )
    model = make_pipeline(prep, LogisticRegression()).fit(X[:300], y[:300])
    _, _, holdout = model_file
    result = convert_estimator(model, X[:100])
    path = model_file[0].replace("model.onnx", "numbers.onnx")
    result.save(path)
    report = validate_model(path, model, holdout.dropna(), probes=["missing"])
    (missing,) = report.probe_sets
    assert missing.skipped == "the source model refuses missing values (NaN)"
