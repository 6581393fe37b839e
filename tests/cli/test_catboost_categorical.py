"""CatBoost with ``cat_features`` through the command line: a model brought as skops converts from
its training rows, and ``train`` fits, converts and validates one on a CSV with missing text.

CatBoost keeps its categories only as hashes, so the graph knows the categories found in
``--sample`` (or, for a bundle, the training categories ``train`` records in the card).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import Bundle, Predictor, load_estimator
from onnxbridge.bundle import save_estimator

CITIES = ["Paris", "Lyon", "Köln", "Zürich", "Nice", "Bern", "Metz", "Brest"]
JOBS = ["clerk", "nurse", "baker", "pilot"]


def _people(n: int, seed: int) -> pd.DataFrame:
    """Text columns with gaps, a number with gaps, a yes/no target."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "city": rng.choice(CITIES, n).astype(object),
            "age": rng.randint(18, 80, n).astype(float),
            "job": rng.choice(JOBS, n).astype(object),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "city"] = None
    frame.loc[rng.rand(n) < 0.08, "job"] = None
    frame.loc[rng.rand(n) < 0.05, "age"] = np.nan
    score = (
        frame["city"].isin(["Paris", "Köln"]) * 1.5
        + (frame["job"] == "pilot") * 1.0
        + frame["age"].fillna(40) / 40
        + frame["city"].isna() * 0.8
        + rng.normal(0, 0.4, n)
    )
    frame["churn"] = np.where(score > 1.6, "yes", "no")
    return frame


def _new_rows() -> pd.DataFrame:
    """Every known city and job, unseen ones, missing ones, duplicates."""
    rows = _people(120, seed=1)
    rows.loc[::9, "city"] = "Genève"
    rows.loc[4::13, "job"] = "astronaut"
    rows.loc[2::11, "city"] = None
    return pd.concat([rows, rows.head(10)], ignore_index=True)


_PARAMS = {
    "iterations": 20,
    "depth": 4,
    "max_ctr_complexity": 1,
    "random_seed": 0,
    "verbose": 0,
    "thread_count": 1,
    "allow_writing_files": False,
}


def test_catboost_brought_as_skops_converts_from_its_training_rows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from catboost import CatBoostClassifier

    train = _people(400, seed=0)
    X = train.drop(columns=["churn"]).fillna({"city": "", "job": ""})  # CatBoost refuses NaN
    model = CatBoostClassifier(**_PARAMS, cat_features=["city", "job"]).fit(X, train["churn"])
    save_estimator(model, tmp_path / "model.skops")
    train.to_csv(tmp_path / "training.csv", index=False)
    train[train["city"].isin(CITIES[:4])].to_csv(tmp_path / "few.csv", index=False)
    _new_rows().to_csv(tmp_path / "rows.csv", index=False)

    # A sample without every city: refused, saying what to pass; nothing written.
    code, _, err = run(
        capsys, "convert", tmp_path / "model.skops", "--sample", tmp_path / "few.csv",
        "--target", "churn", "--out", tmp_path / "model.onnx",
    )  # fmt: skip
    assert_one_line_error(
        code, err, r"miss \d+ of the categories .*give --sample the rows that hold every category "
        r"of column 'city' \(the training rows"
    )  # fmt: skip
    assert not (tmp_path / "model.onnx").exists()

    code, out, err = run(
        capsys, "convert", tmp_path / "model.skops", "--sample", tmp_path / "training.csv",
        "--target", "churn", "--out", tmp_path / "model.onnx",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(
        capsys, "validate", tmp_path / "model.onnx", "--reference", tmp_path / "model.skops",
        "--data", tmp_path / "rows.csv", "--target", "churn",
    )  # fmt: skip
    assert code == 0, out + err
    assert "verdict: EQUIVALENT" in out
    rows = _new_rows().drop(columns=["churn"])
    predicted = Predictor(tmp_path / "model.onnx").predict(rows)
    expected = model.predict(rows.fillna({"city": "", "job": ""}))
    assert list(predicted.labels) == list(expected)


def test_train_convert_validate_catboost_with_missing_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """cat_features names one of the two text columns; the other joins it. The held-out rows
    miss a city the model was fitted on: the card's training categories reach the converter."""
    from sklearn.model_selection import train_test_split

    data = _people(400, seed=2)
    # A rare city, only in rows of the training side of train's split (seed 42, 30 % held out).
    fit_rows, _ = train_test_split(np.arange(len(data)), test_size=0.3, random_state=42)
    data.loc[fit_rows[:3], "city"] = "Oslo"
    data.to_csv(tmp_path / "people.csv", index=False)
    spec = "CatBoostClassifier(iterations=20, depth=4, max_ctr_complexity=1, cat_features=['city'])"
    code, out, err = run(
        capsys, "train", "--data", tmp_path / "people.csv", "--target", "churn",
        "--model", spec, "--out", tmp_path / "bundle",
    )  # fmt: skip
    assert code == 0, err
    bundle = Bundle.open(tmp_path / "bundle")
    holdout, _ = bundle.load_holdout()
    card = json.loads((tmp_path / "bundle" / "card.json").read_text(encoding="utf-8"))
    assert "Oslo" in card["categories"]["city"]
    assert "Oslo" not in set(holdout["city"].dropna())
    assert sorted(card["categories"]["job"]) == sorted(JOBS)

    code, out, err = run(capsys, "convert", tmp_path / "bundle")
    assert code == 0, err
    code, out, err = run(capsys, "validate", tmp_path / "bundle")
    assert code == 0, out + err
    assert "verdict: EQUIVALENT" in out
    # Raw rows with "Oslo", unseen and missing text answer as the fitted model does.
    rows = pd.concat([_new_rows(), data.loc[fit_rows[:3]]], ignore_index=True)
    rows = rows.drop(columns=["churn"])
    model = load_estimator(bundle.model_path)
    predicted = Predictor(bundle.onnx_path).predict(rows)
    expected = model.predict(rows.fillna({"city": "", "job": ""}))
    assert list(predicted.labels) == list(np.asarray(expected).ravel())
