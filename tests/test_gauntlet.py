"""The models people bring, on real-like tables: train or fit -> convert -> validate -> predict.

The tables are what real data looks like: duplicate rows (some with different labels), text
columns with missing values, integer-valued numbers (many equal distances), text targets, and
pandas ``category`` columns. Every model family must come out EQUIVALENT, and ``Predictor`` on
the raw rows must give the source model's own answers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cli_support import assert_one_line_error, run
from onnxbridge import (
    Predictor,
    convert_bundle,
    convert_estimator,
    load_estimator,
    save_estimator,
    train_bundle,
    validate_bundle,
    validate_model,
)

CITIES = ["Paris", "Lyon", "Zürich", "Köln", "Nice", "Bern"]
JOBS = [f"job {i}" for i in range(12)]


def people(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """A table of people: numbers, text with gaps, booleans, a yes/no target, duplicates."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "age": rng.randint(18, 80, n),
            "hours": rng.choice([20.0, 32.0, 38.5, 40.0, 45.0], n),
            "city": rng.choice(CITIES, n).astype(object),
            "job": rng.choice(JOBS, n).astype(object),
            "married": rng.rand(n) < 0.4,
        }
    )
    frame.loc[rng.rand(n) < 0.1, "hours"] = np.nan
    frame.loc[rng.rand(n) < 0.08, "city"] = None
    score = (
        (frame["age"] - 40) / 15
        + frame["city"].isin(["Paris", "Zürich"]) * 1.2
        + frame["job"].isin(JOBS[:4]) * 0.8
        + frame["hours"].fillna(35) / 40
        + rng.normal(0, 0.5, n)
    )
    frame["churn"] = np.where(score > 1.2, "yes", "no")
    frame["wage"] = (20 + frame["age"] * 0.7 + frame["job"].str[-1].astype(int) * 3).round(1)
    # Real tables repeat rows; some repeats carry the other label.
    repeats = frame.sample(n // 4, replace=True, random_state=seed)
    flip = rng.rand(len(repeats)) < 0.3
    repeats.loc[flip, "churn"] = np.where(repeats.loc[flip, "churn"] == "yes", "no", "yes")
    return pd.concat([frame, repeats], ignore_index=True)


@pytest.fixture(scope="module")
def people_csv(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("gauntlet") / "people.csv"
    people().drop(columns=["wage"]).to_csv(path, index=False)
    return path


def _assert_same_answers(onnx_path, estimator, rows: pd.DataFrame) -> None:
    """ONNX Runtime's labels on raw rows are the source model's."""
    predicted = Predictor(onnx_path).predict(rows)
    expected = estimator.predict(rows)
    assert predicted.labels is not None
    assert list(predicted.labels) == list(expected)


@pytest.mark.parametrize(
    "spec",
    [
        # Parameters as the libraries' own docs write them (aliases, **kwargs, quiet flags).
        "LGBMClassifier(n_estimators=30, verbose=-1, min_data_in_leaf=5, max_bin=63, "
        "colsample_bytree=0.8)",
        "XGBClassifier(n_estimators=20, max_depth=3, eval_metric='logloss', tree_method='hist')",
        "CatBoostClassifier(iterations=30, depth=4, l2_leaf_reg=3, random_seed=0)",
        "KNeighborsClassifier(n_neighbors=5)",
        "KNeighborsClassifier(n_neighbors=4, weights='distance')",
    ],
)
def test_text_target_and_booster_parameters(people_csv, tmp_path, spec: str) -> None:
    bundle, _ = train_bundle(
        str(people_csv), spec, tmp_path / "b", target="churn", preprocess="auto"
    )
    convert_bundle(bundle)
    report = validate_bundle(bundle, html=False)
    assert report.verdict == "EQUIVALENT", report.diagnoses
    estimator = load_estimator(bundle.model_path)
    rows = people(200, seed=1).drop(columns=["churn", "wage"])
    _assert_same_answers(bundle.onnx_path, estimator, rows)
    assert set(Predictor(bundle.onnx_path).predict(rows).labels) <= {"yes", "no"}


def _category_frame(n: int, seed: int) -> pd.DataFrame:
    frame = people(n, seed).drop(columns=["wage"])
    for name in ("city", "job"):
        frame[name] = pd.Categorical(frame[name], categories=CITIES if name == "city" else JOBS)
    return frame


def _native(kind: str):
    if kind == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(
            max_iter=30, categorical_features="from_dtype", random_state=0
        )
    if kind == "lightgbm":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(n_estimators=30, min_data_per_group=5, cat_smooth=1, verbose=-1)
    if kind == "xgboost":
        from xgboost import XGBClassifier

        return XGBClassifier(
            n_estimators=20, max_depth=4, enable_categorical=True, tree_method="hist"
        )
    from catboost import CatBoostClassifier

    return CatBoostClassifier(
        iterations=30,
        depth=4,
        cat_features=["city", "job"],
        verbose=False,
        allow_writing_files=False,
        random_seed=0,
    )


def _ascii(frame: pd.DataFrame) -> pd.DataFrame:
    """XGBoost 3.2 keeps non-ASCII category text damaged: its tables use ASCII names."""
    spelled = {"Zürich": "Zurich", "Köln": "Koeln"}
    frame = frame.copy()
    frame["city"] = frame["city"].cat.rename_categories(lambda c: spelled.get(c, c))
    return frame


@pytest.mark.parametrize("kind", ["hgb", "lightgbm", "xgboost", "catboost"])
def test_native_categorical_model_brought_as_skops(capsys, tmp_path, kind: str) -> None:
    frame = _category_frame(400, seed=0)
    if kind == "xgboost":
        frame = _ascii(frame)
    X, y = frame.drop(columns=["churn"]), (frame["churn"] == "yes").astype(int)
    if kind == "catboost":  # CatBoost takes text categories, not pandas categories
        X = X.astype({"city": object, "job": object}).fillna({"city": "missing"})
    model = _native(kind).fit(X, y)
    save_estimator(model, tmp_path / "model.skops")
    # New rows: categories never seen in training, missing ones, every known one.
    rows = _category_frame(200, seed=1).drop(columns=["churn"])
    if kind == "xgboost":
        rows = _ascii(rows)
    rows.loc[::7, "city"] = None
    rows["city"] = rows["city"].astype(object)
    rows.loc[3::11, "city"] = "Genève"
    rows["churn"] = 0
    rows.to_csv(tmp_path / "rows.csv", index=False)
    X.head(50).assign(churn=y.head(50)).to_csv(tmp_path / "sample.csv", index=False)

    code, out, err = run(
        capsys,
        "convert",
        tmp_path / "model.skops",
        "--sample",
        tmp_path / "sample.csv",
        "--target",
        "churn",
        "--out",
        tmp_path / "model.onnx",
    )
    assert code == 0, err
    code, out, err = run(
        capsys,
        "validate",
        tmp_path / "model.onnx",
        "--reference",
        tmp_path / "model.skops",
        "--data",
        tmp_path / "rows.csv",
        "--target",
        "churn",
    )
    assert code == 0, out + err
    assert "verdict: EQUIVALENT" in out


def _duplicated_numbers(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """load_wine rounded to integers, with repeated rows carrying other labels."""
    from sklearn.datasets import load_wine

    data = load_wine(as_frame=True)
    X = data.data.round(0)
    y = data.target.to_numpy()
    rng = np.random.RandomState(seed)
    pick = rng.choice(len(X), 80)
    X = pd.concat([X, X.iloc[pick]], ignore_index=True)
    y = np.concatenate([y, rng.randint(0, 3, len(pick))])
    order = rng.permutation(len(X))
    X, y = X.iloc[order].reset_index(drop=True), y[order]
    values = X.sum(axis=1).to_numpy() / 100
    return X, y, values


@pytest.mark.parametrize("algorithm", ["auto", "brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_neighbours_with_ties(tmp_path, algorithm: str, task: str) -> None:
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    X, y, values = _duplicated_numbers()
    train, held = slice(0, 180), slice(180, None)
    if task == "classifier":
        model = KNeighborsClassifier(n_neighbors=5, algorithm=algorithm).fit(X[train], y[train])
    else:
        model = KNeighborsRegressor(n_neighbors=5, algorithm=algorithm).fit(X[train], values[train])
    result = convert_estimator(model, X[train].head(20))
    path = result.save(tmp_path / "knn.onnx")
    report = validate_model(path, model, X[held])
    assert report.verdict == "EQUIVALENT", report.diagnoses
    predicted = Predictor(path).predict(X[held])
    if task == "classifier":
        assert list(predicted.labels) == list(model.predict(X[held]))
    else:
        np.testing.assert_allclose(
            np.ravel(predicted.values), model.predict(X[held]), rtol=1e-6, atol=1e-9
        )


def test_xgboost_damaged_categories_are_refused(capsys, tmp_path) -> None:
    """XGBoost 3.2 keeps non-ASCII categories cut apart ("Zürich" as "Züric"): refused, named."""
    frame = _category_frame(300, seed=0)
    X, y = frame.drop(columns=["churn"]), (frame["churn"] == "yes").astype(int)
    model = _native("xgboost").fit(X, y)
    save_estimator(model, tmp_path / "model.skops")
    X.head(50).to_csv(tmp_path / "sample.csv", index=False)
    code, _, err = run(
        capsys,
        "convert",
        tmp_path / "model.skops",
        "--sample",
        tmp_path / "sample.csv",
        "--out",
        tmp_path / "model.onnx",
    )
    assert_one_line_error(code, err, "categories of column 'city' damaged: they hold non-ASCII")
    assert not (tmp_path / "model.onnx").exists()


def test_xgboost_trained_on_non_ascii_categories_is_refused(capsys, people_csv, tmp_path) -> None:
    code, _, err = run(
        capsys,
        "train",
        "--data",
        people_csv,
        "--target",
        "churn",
        "--model",
        "XGBClassifier(n_estimators=5, enable_categorical=True)",
        "--out",
        tmp_path / "b",
    )
    assert_one_line_error(code, err, "categories of column 'city' damaged: they hold non-ASCII")
    assert not (tmp_path / "b").exists()
