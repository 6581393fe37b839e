"""Mixed-type tables: numbers, integers, booleans, text with missing values, fed as they are."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from onnxbridge import DataError, Predictor, convert_bundle, train_bundle, validate_bundle
from onnxbridge.data import normalize_features
from onnxbridge.errors import SchemaMismatchError


def _table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "age years": rng.uniform(18, 80, n).round(1),
            "rooms": rng.randint(1, 6, n),
            "city": rng.choice(["Paris", "Lyon", "Zürich", "Köln"], n).astype(object),
            "has garden": (rng.rand(n) > 0.5).astype(object),
            "income": rng.lognormal(10, 1, n),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "age years"] = np.nan
    frame.loc[rng.rand(n) < 0.1, "city"] = None
    frame.loc[rng.rand(n) < 0.1, "has garden"] = None
    score = frame["rooms"] + (frame["city"] == "Lyon") * 2 + frame["age years"].fillna(40) / 30
    frame["churn"] = np.where(score > 4.5, "yes", "no")
    return frame


@pytest.fixture(scope="module")
def mixed_csv(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("mixed") / "customers.csv"
    _table().to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "spec",
    [
        "RandomForestClassifier(n_estimators=20, random_state=0)",
        "LogisticRegression()",
        "HistGradientBoostingClassifier(max_iter=20)",
    ],
)
def test_train_convert_predict_validate(mixed_csv, tmp_path, spec: str) -> None:
    bundle, result = train_bundle(
        str(mixed_csv), spec, tmp_path / "b", target="churn", preprocess="auto"
    )
    conversion = convert_bundle(bundle)
    inputs = {i["columns"][0]: i["dtype"] for i in conversion.metadata.inputs}
    # Trees behind the ColumnTransformer are probed at their thresholds (carried back to the
    # input columns): the forest compares float32 values and keeps float32; HistGradientBoosting
    # compares float64 values, rows on its thresholds flip in float32 and it gets float64.
    number = "float64" if conversion.precision == "double" else "float32"
    expected = "double" if spec.startswith("HistGradientBoosting") else "float"
    assert conversion.precision == expected, conversion.notes
    if spec != "LogisticRegression()":
        assert "at split thresholds" in conversion.notes[0], conversion.notes
    assert inputs == {
        "age years": number,
        "rooms": number,
        "city": "string",
        "has garden": number,
        "income": number,
    }
    assert validate_bundle(bundle).verdict == "EQUIVALENT"
    # The raw table as a user has it: NaN and None included, the target column too.
    raw = _table(seed=1)
    predicted = Predictor(bundle.onnx_path).predict(raw)
    expected = result.estimator.predict(normalize_features(raw.drop(columns=["churn"])))
    assert (predicted.labels == expected).all()
    np.testing.assert_allclose(
        predicted.probabilities,
        result.estimator.predict_proba(normalize_features(raw.drop(columns=["churn"]))),
        atol=1e-5,
    )


def test_unseen_category_and_records(mixed_csv, tmp_path) -> None:
    bundle, result = train_bundle(
        str(mixed_csv), "LogisticRegression()", tmp_path / "b", target="churn", preprocess="auto"
    )
    convert_bundle(bundle)
    records = [
        {"age years": 30.0, "rooms": 2, "city": "Tōkyō", "has garden": True, "income": 1e4},
        {"age years": None, "rooms": 5, "city": None, "has garden": None, "income": 5e4},
        # An empty string is a missing value for onnxbridge, on both sides.
        {"age years": 50.0, "rooms": 3, "city": "", "has garden": False, "income": 3e4},
    ]
    predicted = Predictor(bundle.onnx_path).predict(records)
    normalized = normalize_features(pd.DataFrame(records))
    assert normalized["city"].isna().tolist() == [False, True, True]
    expected = result.estimator.predict_proba(normalized)
    np.testing.assert_allclose(predicted.probabilities, expected, atol=1e-5)


def test_records_may_mix_booleans_and_numbers_in_a_boolean_column(mixed_csv, tmp_path) -> None:
    # JSON rows often say true in one row and 0 in the next; both are the same boolean.
    bundle, _ = train_bundle(
        str(mixed_csv), "LogisticRegression()", tmp_path / "b", target="churn", preprocess="auto"
    )
    convert_bundle(bundle)
    row = {"age years": 30.0, "rooms": 2, "city": "Lyon", "income": 1e4}
    mixed = [{**row, "has garden": True}, {**row, "has garden": 0}, {**row, "has garden": None}]
    plain = [{**row, "has garden": 1.0}, {**row, "has garden": 0.0}, {**row, "has garden": None}]
    predictor = Predictor(bundle.onnx_path)
    np.testing.assert_array_equal(
        predictor.predict(mixed).probabilities, predictor.predict(plain).probabilities
    )


def test_text_in_a_numeric_column_is_named(mixed_csv, tmp_path) -> None:
    bundle, _ = train_bundle(
        str(mixed_csv), "LogisticRegression()", tmp_path / "b", target="churn", preprocess="auto"
    )
    convert_bundle(bundle)
    bad = _table(n=5).drop(columns=["churn"])
    bad["rooms"] = ["two", 1, 2, 3, 4]
    with pytest.raises(SchemaMismatchError, match=r"column 'rooms' must hold numbers.*'two'"):
        Predictor(bundle.onnx_path).predict(bad)


def test_without_preprocess_text_columns_are_refused_with_the_fix(mixed_csv, tmp_path) -> None:
    with pytest.raises(DataError, match=r"'city'.*are not numeric; pass preprocess='auto'"):
        train_bundle(str(mixed_csv), "LogisticRegression()", tmp_path / "b", target="churn")


def test_dates_and_nested_values_are_named(tmp_path) -> None:
    frame = _table(n=50)
    frame["signed"] = pd.date_range("2024-01-01", periods=50)
    frame["tags"] = [["a", "b"]] * 50
    path = tmp_path / "dated.parquet"
    frame.to_parquet(path)
    with pytest.raises(DataError, match=r"columns 'signed' \(datetime64.*'tags'.*drop them"):
        train_bundle(
            str(path), "LogisticRegression()", tmp_path / "b", target="churn", preprocess="auto"
        )


def test_unknown_preprocess_mode(mixed_csv, tmp_path) -> None:
    with pytest.raises(DataError, match=r"preprocess='magic' is not supported; use one of none"):
        train_bundle(
            str(mixed_csv),
            "LogisticRegression()",
            tmp_path / "b",
            target="churn",
            preprocess="magic",
        )


def test_values_the_inputs_cannot_take_are_refused_by_row_and_column(mixed_csv, tmp_path) -> None:
    bundle, _ = train_bundle(
        str(mixed_csv), "LogisticRegression()", tmp_path / "b", target="churn", preprocess="auto"
    )
    convert_bundle(bundle)  # one graph input per column: float32 numbers, strings
    predictor = Predictor(bundle.onnx_path)
    rows = _table(5).drop(columns="churn")
    rows["age years"] = rows["age years"].fillna(40.0)
    assert len(predictor.predict(rows)) == 5
    rows.loc[3, "income"] = 1e300
    with pytest.raises(SchemaMismatchError, match=r"row 4, column 'income': 1e\+300 is out of"):
        predictor.predict(rows)
    rows.loc[3, "income"] = -np.inf
    with pytest.raises(SchemaMismatchError, match=r"row 4, column 'income': -inf is not a finite"):
        predictor.predict(rows)
