"""Native categorical splits: HistGradientBoosting fitted on category columns, converted exactly.

Every model is a real fitted model converted by onnxbridge and run in a real ONNX Runtime
session (through :class:`onnxbridge.Predictor`); the source model's own ``predict`` /
``predict_proba`` on rows it was not fitted on -- every known category, categories it never
saw, missing values -- is the reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from cli_support import assert_one_line_error, run
from onnxbridge import Predictor, convert_estimator, save_estimator, validate_model
from onnxbridge.errors import ConversionError

CITIES = ["Bonn", "Lima", "Oslo", "Pune"]
GRADES = [-7, 1, 3, 300, 1000]  # negative and >= 256: codes, not raw values, reach the trees


def _people(n: int, seed: int) -> pd.DataFrame:
    """Numbers (float32-representable, so float precision is exact too) and two category
    columns, text and integer, both with missing values."""
    rng = np.random.RandomState(seed)
    city = rng.choice([*CITIES, None], n)
    grade = rng.choice(np.array([*GRADES, -1], dtype=np.int64), n).astype(object)
    grade[grade == -1] = None
    return pd.DataFrame(
        {
            "income": rng.normal(size=n).astype(np.float32).astype(np.float64),
            "city": pd.Categorical(city, categories=CITIES),
            "grade": pd.Categorical(grade, categories=GRADES),
        }
    )


def _labels(frame: pd.DataFrame) -> np.ndarray:
    """Three text classes that depend on both category columns and on their missing values."""
    grade = frame["grade"].astype(float)
    score = (
        frame["city"].isin(["Lima", "Pune"]).to_numpy() * 1.0
        + (frame["income"] > 0).to_numpy()
        + frame["city"].isna().to_numpy() * 1.5
        - (grade == 1000).to_numpy() * 2.0
        + grade.isna().to_numpy()
    )
    return np.array(["low", "mid", "high"])[np.digitize(score, [0.5, 1.5])]


def _held_out(n: int = 300) -> pd.DataFrame:
    """Unseen rows: every known category, missing values, and categories never seen in fit."""
    frame = _people(n, seed=1)
    frame["city"] = frame["city"].cat.add_categories(["Rome"])
    frame["grade"] = frame["grade"].cat.add_categories([12345])
    frame.loc[0 : len(CITIES) - 1, "city"] = CITIES
    frame.loc[0 : len(GRADES) - 1, "grade"] = GRADES
    frame.loc[10:19, "city"] = "Rome"
    frame.loc[20:29, "grade"] = 12345
    frame.loc[30:34, ["city", "grade"]] = np.nan
    return frame


@pytest.fixture(scope="module")
def classifier() -> HistGradientBoostingClassifier:
    train = _people(800, seed=0)
    model = HistGradientBoostingClassifier(max_iter=15, random_state=0)
    return model.fit(train, _labels(train))


def _outputs(result, X) -> dict[str, np.ndarray]:
    predictor = Predictor(result.model.SerializeToString())
    answer = predictor.predict(X, allow_missing=True)
    return {
        "label": None if answer.labels is None else np.asarray(answer.labels),
        "probabilities": None
        if answer.probabilities is None
        else np.asarray(answer.probabilities, dtype=np.float64),
        "value": None if answer.values is None else np.asarray(answer.values, dtype=np.float64),
    }


@pytest.mark.parametrize("precision", ["float", "double"])
def test_category_columns_from_dtype_convert_exactly(classifier, precision: str) -> None:
    assert classifier.is_categorical_.tolist() == [False, True, True]
    test = _held_out()
    result = convert_estimator(classifier, _people(50, seed=0), precision=precision)
    assert [i["dtype"] for i in result.metadata.inputs][1:] == ["string", "string"]
    got = _outputs(result, test)
    np.testing.assert_array_equal(got["label"], classifier.predict(test))
    np.testing.assert_allclose(
        got["probabilities"], classifier.predict_proba(test), rtol=0, atol=1e-5
    )


def test_unseen_categories_and_missing_values_are_routed_as_scikit_learn_routes_them(
    classifier,
) -> None:
    test = _held_out()
    unseen = test.iloc[10:30]
    result = convert_estimator(classifier, _people(50, seed=0), precision="double")
    got = _outputs(result, unseen)
    expected = classifier.predict_proba(unseen)
    np.testing.assert_allclose(got["probabilities"], expected, rtol=0, atol=1e-12)
    # The rows really exercise the routing: an unseen value differs from a known one.
    known = unseen.copy()
    known["city"] = known["city"].astype(object).where(known["city"] != "Rome", "Lima")
    assert not np.allclose(classifier.predict_proba(known), expected)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_categorical_features_given_by_index_on_integer_columns(precision: str) -> None:
    rng = np.random.RandomState(0)

    def rows(n: int, seed: int) -> np.ndarray:
        r = np.random.RandomState(seed)
        X = np.c_[
            r.normal(size=n).astype(np.float32),
            r.choice([-5, 0, 3, 300, 1000, 7], n),
            r.normal(size=n).astype(np.float32),
            r.choice([1, 2, 9], n),
        ].astype(np.float64)
        X[r.rand(n) < 0.1, 1] = np.nan
        return X

    X = rows(600, 0)
    y = np.isin(X[:, 1], [300, -5]) * 2.0 + X[:, 0] + np.isnan(X[:, 1]) * 1.5 + (X[:, 3] == 2)
    y += rng.normal(scale=0.1, size=len(y))
    model = HistGradientBoostingRegressor(max_iter=15, random_state=0, categorical_features=[1, 3])
    model.fit(X, y)
    test = rows(300, 1)
    test[:20, 1] = 12345.0  # never seen
    test[20:30, 1] = -1.0
    test[30:40, 3] = 4.0
    test[40:46, 1] = [-5, 0, 3, 300, 1000, 7]  # every known category
    result = convert_estimator(model, X[:50], precision=precision)
    got = _outputs(result, test)
    np.testing.assert_allclose(got["value"].ravel(), model.predict(test), rtol=1e-5, atol=1e-5)


def test_numeric_categories_convert_with_ai_onnx_ml_1() -> None:
    X = np.c_[np.arange(300) % 5 * 100.0, np.arange(300) % 7].astype(np.float64)
    y = (X[:, 0] == 200) * 1.0 + (X[:, 1] == 3)
    model = HistGradientBoostingRegressor(max_iter=5, categorical_features=[0]).fit(X, y)
    result = convert_estimator(model, X[:20], precision="float", ml_opset=1)
    test = np.c_[np.r_[np.arange(10) * 100.0, np.nan], np.arange(11)]
    got = _outputs(result, test)
    np.testing.assert_allclose(got["value"].ravel(), model.predict(test), rtol=1e-5, atol=1e-5)


def test_numeric_categories_below_opset_11_are_refused_with_the_opset_to_use() -> None:
    X = np.c_[np.arange(300) % 5 * 100.0, np.arange(300) % 7].astype(np.float64)
    model = HistGradientBoostingRegressor(max_iter=5, categorical_features=[0])
    model.fit(X, (X[:, 0] == 200) * 1.0)
    with pytest.raises(ConversionError, match=r"needs opset 11 or later.*target is 10.*opset=11"):
        convert_estimator(model, X[:20], precision="float", opset=10)


def test_auto_precision_probes_the_numeric_splits_of_a_categorical_model() -> None:
    rng = np.random.RandomState(0)
    X = np.c_[rng.choice([2, 4, 8, 16], 500), rng.normal(size=500) * 1e6].astype(np.float64)
    y = (X[:, 0] == 4) + (X[:, 1] > 0)
    model = HistGradientBoostingClassifier(max_iter=5, categorical_features=[0], random_state=0)
    model.fit(X, y)
    result = convert_estimator(model, X[:30])
    note = " ".join(result.notes)
    assert "at split thresholds" in note, note
    test = np.c_[rng.choice([2, 4, 8, 16, 5], 200), rng.normal(size=200) * 1e6]
    got = _outputs(result, test)
    np.testing.assert_array_equal(got["label"], model.predict(test))


def test_validate_calls_a_category_model_equivalent(classifier, tmp_path: Path) -> None:
    path = convert_estimator(classifier, _people(50, seed=0)).save(tmp_path / "model.onnx")
    report = validate_model(path, classifier, _held_out())
    assert report.verdict == "EQUIVALENT", report.verdict


def test_a_model_with_an_empty_text_category_is_refused() -> None:
    frame = pd.DataFrame(
        {"colour": pd.Categorical(["", "red", "blue"] * 40), "x": np.arange(120.0)}
    )
    y = (frame["colour"] == "").to_numpy().astype(int)
    model = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(frame, y)
    with pytest.raises(ConversionError, match=r"empty or repeated text.*refit"):
        convert_estimator(model, frame.head(10), precision="double")


def test_cli_converts_and_validates_a_skops_category_model_without_trust(
    classifier, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_path = tmp_path / "model.skops"
    save_estimator(classifier, model_path)
    _people(100, seed=0).to_parquet(tmp_path / "sample.parquet")
    _held_out().to_parquet(tmp_path / "holdout.parquet")
    onnx_path = tmp_path / "model.onnx"
    code, out, err = run(
        capsys,
        "convert",
        model_path,
        "--sample",
        tmp_path / "sample.parquet",
        "--out",
        onnx_path,
    )
    assert code == 0, err
    assert "city: string[N,1]" in out
    code, out, err = run(
        capsys,
        "validate",
        onnx_path,
        "--reference",
        model_path,
        "--data",
        tmp_path / "holdout.parquet",
    )
    assert code == 0, out + err
    assert "verdict: EQUIVALENT" in out


def test_cli_refuses_numeric_categories_below_opset_11_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X = pd.DataFrame({"code": np.arange(300) % 5 * 100, "x": np.arange(300) % 7 / 2})
    model = HistGradientBoostingRegressor(max_iter=5, categorical_features=["code"])
    model.fit(X, (X["code"] == 200) * 1.0)
    save_estimator(model, tmp_path / "model.skops")
    X.head(20).to_csv(tmp_path / "sample.csv", index=False)
    out_path = tmp_path / "model.onnx"
    code, _, err = run(
        capsys,
        "convert",
        tmp_path / "model.skops",
        "--sample",
        tmp_path / "sample.csv",
        "--out",
        out_path,
        "--opset",
        10,
    )
    assert_one_line_error(code, err, r"needs opset 11 or later.*target is 10")
    assert not out_path.exists()


@pytest.mark.parametrize("library", ["hgb", "lightgbm", "xgboost"])
def test_integer_categories_given_as_floats_are_the_same_categories(library: str) -> None:
    """A CSV column of integer categories with a gap arrives as floats: 3.0 is category 3."""
    rng = np.random.RandomState(0)
    size = rng.choice([1, 2, 3, 5, 8], 400)
    num = rng.normal(size=400)
    X = pd.DataFrame({"size": pd.Categorical(size), "num": num})
    y = ((size == 3) | (num > 1)).astype(int)
    if library == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(max_iter=5).fit(X, y)
    elif library == "lightgbm":
        from lightgbm import LGBMClassifier

        model = LGBMClassifier(n_estimators=5, min_data_per_group=5, verbose=-1).fit(X, y)
    else:
        from xgboost import XGBClassifier

        model = XGBClassifier(n_estimators=5, enable_categorical=True).fit(X, y)
    predictor = Predictor(convert_estimator(model, X.head(50)).model.SerializeToString())
    rows = pd.DataFrame({"size": [3.0, np.nan, 3.0, 5.0], "num": [0.0, 0.0, 2.0, 0.0]})
    as_categories = rows.astype({"size": pd.CategoricalDtype(X["size"].cat.categories)})
    np.testing.assert_allclose(
        predictor.predict(rows).probabilities,
        model.predict_proba(as_categories),
        atol=1e-5,
    )
