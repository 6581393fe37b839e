"""Safe model specs, fitting and metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import BaggingClassifier, RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from onnxbridge.errors import DataError, ModelSpecError
from onnxbridge.train import fit_model, parse_model_spec


def test_parse_estimator_with_literal_arguments() -> None:
    est = parse_model_spec("RandomForestClassifier(n_estimators=10, random_state=42)")
    assert isinstance(est, RandomForestClassifier)
    assert est.n_estimators == 10 and est.random_state == 42


def test_parse_pipeline() -> None:
    est = parse_model_spec("StandardScaler() | LogisticRegression(max_iter=200)")
    assert isinstance(est, Pipeline)
    assert isinstance(est.steps[0][1], StandardScaler)
    assert est.steps[1][1].max_iter == 200


def test_parse_nested_estimator_and_containers() -> None:
    est = parse_model_spec(
        "BaggingClassifier(estimator=DecisionTreeClassifier(max_depth=3), n_estimators=5)"
    )
    assert isinstance(est, BaggingClassifier)
    assert isinstance(est.estimator, DecisionTreeClassifier) and est.estimator.max_depth == 3
    est = parse_model_spec("MLPClassifier(hidden_layer_sizes=(8, 4), alpha=-0.0)")
    assert est.hidden_layer_sizes == (8, 4)


def test_bare_name_is_default_estimator() -> None:
    assert isinstance(parse_model_spec("RandomForestClassifier"), RandomForestClassifier)


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("RandomForestClasifier()", r"unknown estimator 'RandomForestClasifier'.*did you mean"),
        ("RandomForestClassifier(n_estimator=10)", r"has no parameter 'n_estimator'.*n_estimators"),
        (
            "RandomForestClassifier(n_estimators=__import__('os'))",
            r"unknown estimator '__import__'",
        ),
        ("RandomForestClassifier(n_estimators=x)", r"not a literal"),
        ("os.system('ls')", r"cannot read \"os.system"),
        ("RandomForestClassifier(", r"cannot parse model="),
        ("", r"model='' is empty"),
        ("RandomForestClassifier(**{'n_estimators': 3})", r"'\*\*' is not allowed"),
    ],
)
def test_bad_specs_are_refused_without_eval(spec: str, pattern: str) -> None:
    with pytest.raises(ModelSpecError, match=pattern):
        parse_model_spec(spec)


def test_fit_classifier_reports_accuracy() -> None:
    result = fit_model("iris", "RandomForestClassifier(n_estimators=10, random_state=42)")
    assert result.task == "classification"
    assert result.metrics == {"accuracy": 1.0}
    assert result.classes == [0, 1, 2]


def test_fit_regressor_reports_r2() -> None:
    result = fit_model("diabetes", "LinearRegression()")
    assert result.task == "regression"
    assert 0.3 < result.metrics["r2"] < 0.7
    assert result.classes is None


def test_fit_csv_with_string_labels(classification_csv: Path) -> None:
    result = fit_model(str(classification_csv), "LogisticRegression()", target="segment")
    assert result.classes == ["churn", "stay", "upgrade"]
    assert result.metrics["accuracy"] > 0.8


def test_transformer_is_not_trainable() -> None:
    with pytest.raises(ModelSpecError, match=r"StandardScaler is neither a classifier nor"):
        fit_model("iris", "StandardScaler()")


def test_classifier_on_continuous_target(regression_csv: Path) -> None:
    with pytest.raises(
        ModelSpecError, match=r"'price' holds non-integer numbers .* use a regressor"
    ):
        fit_model(str(regression_csv), "LogisticRegression()", target="price")


def test_invalid_parameter_value_is_wrapped() -> None:
    with pytest.raises(ModelSpecError, match=r"fitting .* failed: .*n_estimators"):
        fit_model("iris", "RandomForestClassifier(n_estimators=-3)")


def test_non_numeric_features_are_named(tmp_path: Path) -> None:
    path = tmp_path / "mixed.csv"
    path.write_text("colour,size,y\nred,1,0\nblue,2,1\nred,3,0\nblue,4,1\n")
    with pytest.raises(DataError, match=r"feature columns 'colour' are not numeric"):
        fit_model(str(path), "LogisticRegression()", target="y", test_size=0.5)


def _category_table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame(
        {
            "x": rng.rand(n),
            "city": rng.choice(["Paris", "Lyon", "Bern", "Nice"], n).astype(object),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "city"] = None
    frame["y"] = np.where(frame["x"] + frame["city"].isin(["Paris", "Bern"]) > 0.9, "a", "b")
    return frame


def test_models_with_native_categories_fit_on_text_columns(tmp_path) -> None:
    path = tmp_path / "t.csv"
    _category_table().to_csv(path, index=False)
    # Before, text columns without --preprocess auto were refused for every model.
    result = fit_model(str(path), "HistGradientBoostingClassifier(max_iter=10)", target="y")
    assert list(result.estimator.is_categorical_) == [False, True]
    assert result.metrics["accuracy"] > 0.8
    with pytest.raises(DataError, match="not numeric; pass preprocess='auto'"):
        fit_model(
            str(path),
            "HistGradientBoostingClassifier(max_iter=10, categorical_features=None)",
            target="y",
        )


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_source_frame_gives_boosters_their_categories(library: str) -> None:
    from onnxbridge.train import native_categories, source_frame

    frame = _category_table()
    X, y = frame[["x", "city"]].astype({"city": "category"}), (frame["y"] == "a").astype(int)
    if library == "lightgbm":
        from lightgbm import LGBMClassifier

        model = LGBMClassifier(n_estimators=10, min_data_per_group=5, verbose=-1).fit(X, y)
    else:
        from xgboost import XGBClassifier

        model = XGBClassifier(n_estimators=10, enable_categorical=True).fit(X, y)
    assert sorted(native_categories(model)["city"]) == ["Bern", "Lyon", "Nice", "Paris"]
    rows = _category_table(40, seed=1)[["x", "city"]]  # text, as a CSV file gives it
    rows.loc[0, "city"] = "Genève"  # never seen
    with pytest.raises(ValueError):
        model.predict_proba(rows)
    got = model.predict_proba(source_frame(model, rows))
    as_missing = rows.copy()
    as_missing.loc[0, "city"] = None
    expected = model.predict_proba(as_missing.astype({"city": "category"}))
    np.testing.assert_array_equal(got[1:], expected[1:])
    np.testing.assert_array_equal(got[0], model.predict_proba(source_frame(model, as_missing))[0])


def test_catboost_on_boolean_target_with_an_integer_category_column_with_gaps(tmp_path) -> None:
    """CatBoost with cat_features behind the label encoding a boolean target needs: the
    integer column (floats with NaN in a CSV) and the unlisted text column reach CatBoost as
    text, and train -> convert -> validate is EQUIVALENT."""
    from onnxbridge import convert_bundle, train_bundle, validate_bundle

    rng = np.random.RandomState(5)
    n = 300
    frame = pd.DataFrame(
        {
            "grade": rng.randint(0, 4, n).astype(float),
            "city": rng.choice(["Paris", "Lyon", "Nice", "Bern"], n).astype(object),
            "x": rng.normal(size=n),
        }
    )
    frame.loc[rng.rand(n) < 0.1, "grade"] = np.nan
    frame.loc[rng.rand(n) < 0.1, "city"] = None
    frame["flag"] = (frame["grade"].fillna(5) % 2 == 1) ^ (frame["x"] > 0.3)
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    spec = (
        "CatBoostClassifier(iterations=15, depth=3, max_ctr_complexity=1, cat_features=['grade'])"
    )
    bundle, result = train_bundle(str(path), spec, tmp_path / "bundle", target="flag")
    assert sorted(result.categories) == ["city", "grade"]
    assert sorted(result.categories["grade"]) == [0.0, 1.0, 2.0, 3.0]
    convert_bundle(bundle)
    report = validate_bundle(bundle, html=False)
    assert report.verdict == "EQUIVALENT", report.diagnoses


def test_too_many_categories_for_histgradientboosting_say_what_to_do(tmp_path) -> None:
    rng = np.random.RandomState(0)
    frame = pd.DataFrame({"x": rng.rand(600), "id": [f"customer {i}" for i in range(600)]})
    frame["y"] = np.where(frame["x"] > 0.5, "a", "b")
    frame.to_csv(tmp_path / "ids.csv", index=False)
    with pytest.raises(DataError, match=r"text column 'id' has \d+ distinct values, but .*255"):
        fit_model(str(tmp_path / "ids.csv"), "HistGradientBoostingClassifier()", target="y")
