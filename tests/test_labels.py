"""Labels of any type for every classifier: train -> convert -> predict / validate / score answer
in the data's own labels (text, booleans, integers that are not 0..K-1, floats), also for
libraries that fit only on 0..K-1 (XGBoost) or export only integer and string labels (CatBoost)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io

from cli_support import run
from onnxbridge import (
    Bundle,
    ConversionError,
    Predictor,
    convert_bundle,
    convert_estimator,
    load_estimator,
    train_bundle,
    validate_bundle,
)

TOLERANCE = 1e-5


def _table(target: str, n: int = 240, seed: int = 0) -> pd.DataFrame:
    """Three numeric columns with NaN and duplicated rows, and a target of the kind named."""
    rng = np.random.RandomState(seed)
    X = rng.rand(n, 3)
    X[rng.rand(n) < 0.1, 2] = np.nan
    X[n // 2 : n // 2 + 20] = X[:20]  # duplicates, split between train and test
    score = X[:, 0] - 0.6 * X[:, 1]
    two = (score > 0.0).astype(int)
    three = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    labels = {
        "yes_no": np.array(["no", "yes"], dtype=object)[two],
        "text3": np.array(["low", "mid", "high"], dtype=object)[three],
        "bool": two.astype(bool),
        "int_gaps": np.array([-1, 5, 9])[three],
        "float": np.array([1.0, 2.0])[two],
    }[target]
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["target"] = labels
    return frame


def _assert_same_answers(onnx_path: Path, estimator, X: pd.DataFrame) -> None:
    """ONNX Runtime's labels are the source model's, value and type; probabilities within 1e-5."""
    frame = Predictor(onnx_path).predict(X).to_frame()
    expected = np.asarray(estimator.predict(X)).reshape(-1).tolist()
    got = frame["label"].tolist()
    assert got == expected
    assert [type(v) for v in got] == [type(v) for v in expected]
    proba = frame[[c for c in frame.columns if c.startswith("proba_")]].to_numpy()
    np.testing.assert_allclose(proba, estimator.predict_proba(X), atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize(
    ("spec", "target"),
    [
        ("XGBClassifier(n_estimators=8, max_depth=3)", "yes_no"),
        ("XGBClassifier(n_estimators=8, max_depth=3)", "text3"),
        ("XGBClassifier(n_estimators=8, max_depth=3)", "bool"),
        ("XGBClassifier(n_estimators=8, max_depth=3)", "int_gaps"),
        ("XGBClassifier(n_estimators=8, max_depth=3)", "float"),
        ("CatBoostClassifier(iterations=8, depth=3)", "bool"),
        ("CatBoostClassifier(iterations=8, depth=3)", "float"),
        ("CatBoostClassifier(iterations=8, depth=3)", "text3"),
        ("LGBMClassifier(n_estimators=8, num_leaves=7)", "text3"),
        ("LGBMClassifier(n_estimators=8, num_leaves=7)", "bool"),
        ("HistGradientBoostingClassifier(max_iter=8)", "int_gaps"),
        ("RandomForestClassifier(n_estimators=5, random_state=0)", "float"),
    ],
)
def test_every_classifier_answers_in_the_data_labels(
    tmp_path: Path, monkeypatch, spec: str, target: str
) -> None:
    monkeypatch.chdir(tmp_path)  # CatBoost must not leave catboost_info/ behind
    data = tmp_path / f"{target}.csv"
    _table(target).to_csv(data, index=False)
    bundle, result = train_bundle(str(data), spec, tmp_path / "b", target="target")
    # The card's classes are the data's own labels.
    labels = sorted(pd.read_csv(data)["target"].unique().tolist())
    assert bundle.classes == labels
    assert [type(c) for c in bundle.classes] == [type(c) for c in labels]  # True, not 1
    convert_bundle(bundle)
    assert validate_bundle(bundle).verdict == "EQUIVALENT"
    _assert_same_answers(bundle.onnx_path, result.estimator, result.X_test)
    answered = Predictor(bundle.onnx_path).predict(result.X_test).to_frame()["label"].tolist()
    assert set(answered) <= set(labels) and {type(v) for v in answered} == {type(labels[0])}
    # The bundle's model round-trips through skops without --trust.
    loaded = load_estimator(bundle.model_path)
    assert (
        loaded.predict(result.X_test).tolist() == result.estimator.predict(result.X_test).tolist()
    )


def test_cli_xgboost_on_a_yes_no_column(capsys, tmp_path: Path) -> None:
    data = tmp_path / "churn.csv"
    _table("yes_no").to_csv(data, index=False)
    out = tmp_path / "churn-xgb"
    code, stdout, err = run(
        capsys, "train", "--data", data, "--target", "target", "--model",
        "XGBClassifier(n_estimators=10, max_depth=3)", "--out", out,
    )  # fmt: skip
    assert code == 0, err
    assert "test accuracy: " in stdout
    assert run(capsys, "convert", out)[0] == 0

    predictions = tmp_path / "pred.csv"
    code, _, err = run(
        capsys, "predict", out / "model.onnx", "--data", out / "holdout.parquet", "--out",
        predictions,
    )  # fmt: skip
    assert code == 0, err
    bundle = Bundle.open(out)
    X, _ = bundle.load_holdout()
    source = bundle.load_estimator()
    pred = pd.read_csv(predictions)
    assert pred["label"].tolist() == source.predict(X).tolist()
    assert set(pred["label"]) == {"yes", "no"}
    assert [c for c in pred.columns if c.startswith("proba_")] == ["proba_no", "proba_yes"]

    code, stdout, err = run(capsys, "validate", out)
    assert code == 0, err
    assert "verdict: EQUIVALENT" in stdout

    # score answers in the same labels, from the .onnx file alone.
    rows = tmp_path / "rows.csv"
    X.to_csv(rows, index=False)
    scored_path = tmp_path / "scored.parquet"
    code, _, err = run(capsys, "score", out / "model.onnx", rows, "-o", scored_path)
    assert code == 0, err
    scored = pd.read_parquet(scored_path)
    assert scored["label"].tolist() == source.predict(X).tolist()


def test_cli_converts_a_label_encoded_model_brought_from_elsewhere(capsys, tmp_path: Path) -> None:
    from xgboost import XGBClassifier

    from onnxbridge.train import LabelEncodedClassifier

    frame = _table("text3")
    X, y = frame.drop(columns="target"), frame["target"]
    model = LabelEncodedClassifier(XGBClassifier(n_estimators=8, max_depth=3)).fit(X, y)
    path = tmp_path / "model.skops"
    skops.io.dump(model, path)
    sample = tmp_path / "sample.csv"
    X.iloc[:50].to_csv(sample, index=False)
    # No --trust: the wrapper is on the reviewed list.
    code, stdout, err = run(capsys, "convert", path, "--sample", sample, "--json")
    assert code == 0, err
    payload = json.loads(stdout)
    assert payload["outputs"] == {"label": "label", "probabilities": "probabilities"}
    # The float32 check read the inner model's trees through the wrapper.
    assert any("at split thresholds" in note for note in payload["notes"]), payload["notes"]
    rows = _table("text3", n=60, seed=1).drop(columns="target")
    _assert_same_answers(tmp_path / "model.onnx", model, rows)


def test_xgboost_fitted_on_integer_labels_converts_as_before() -> None:
    from xgboost import XGBClassifier

    frame = _table("int_gaps")
    X, y = frame.drop(columns="target"), frame["target"].map({-1: 0, 5: 1, 9: 2})
    model = XGBClassifier(n_estimators=8, max_depth=3).fit(X, y)
    result = convert_estimator(model, X.iloc[:50])
    assert result.metadata.classes == [0, 1, 2]
    predictor = Predictor(result.model.SerializeToString())
    labels = predictor.predict(X).to_frame()["label"].tolist()
    assert labels == model.predict(X).tolist()


@pytest.mark.parametrize(("target", "kind"), [("bool", "boolean"), ("float", "float")])
def test_catboost_fitted_on_bool_or_float_labels_is_refused_clearly(
    tmp_path: Path, monkeypatch, target: str, kind: str
) -> None:
    from catboost import CatBoostClassifier

    monkeypatch.chdir(tmp_path)
    frame = _table(target)
    X, y = frame.drop(columns="target"), frame["target"]
    model = CatBoostClassifier(iterations=5, verbose=False, allow_writing_files=False).fit(X, y)
    with pytest.raises(ConversionError) as caught:
        convert_estimator(model, X.iloc[:20])
    message = str(caught.value)
    assert f"CatBoostClassifier fitted on {kind} labels" in message
    assert "LabelEncodedClassifier" in message and "\n" not in message
