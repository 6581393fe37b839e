"""MultiOutputClassifier and ClassifierChain: one label and one probability output per target,
through convert, Predictor, validate and the CLI (predict, validate, score)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import make_multilabel_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import ClassifierChain, MultiOutputClassifier
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC

from cli_support import run
from onnxbridge import (
    ConversionError,
    Predictor,
    convert_estimator,
    save_estimator,
    validate_model,
)
from onnxbridge.validate import Tolerance

X, Y = make_multilabel_classification(n_samples=260, n_features=5, n_classes=3, random_state=0)
COLUMNS = [f"f{i}" for i in range(5)]
FRAME = pd.DataFrame(X, columns=COLUMNS)
FIT, HOLDOUT = FRAME.iloc[:200], FRAME.iloc[200:].reset_index(drop=True)
# Targets with their own class names and counts: what one label tensor cannot hold.
TARGETS = np.column_stack(
    [
        np.where(Y[:, 0] == 1, "yes", "no"),
        np.array(["low", "mid", "high"])[Y[:, 1] + Y[:, 2]],
        np.where(Y[:, 2] == 1, "on", "off"),
    ]
)


def _holdout_with_nan_and_duplicates() -> pd.DataFrame:
    rows = HOLDOUT.copy()
    rows.iloc[3, 1] = np.nan
    rows.iloc[7, [0, 4]] = np.nan
    return pd.concat([rows, rows.iloc[:5]], ignore_index=True)  # duplicated rows too


def _assert_like_sklearn(model, rows: pd.DataFrame, predicted) -> None:
    expected = model.predict(rows)
    assert predicted.labels.shape == expected.shape
    np.testing.assert_array_equal(predicted.labels.astype(str), expected.astype(str))
    probabilities = model.predict_proba(rows)
    for t, part in enumerate(predicted.targets):
        assert list(part.classes) == list(model.classes_[t])
        np.testing.assert_array_equal(part.labels, expected[:, t])
        np.testing.assert_allclose(part.probabilities, probabilities[t], atol=1e-5, rtol=1e-5)


def test_multi_output_classifier_targets_with_their_own_classes() -> None:
    model = make_pipeline(
        SimpleImputer(),
        MultiOutputClassifier(RandomForestClassifier(n_estimators=5, random_state=0)),
    ).fit(FIT, TARGETS[:200])
    result = convert_estimator(model, FIT.head(20))
    assert result.metadata.outputs == {
        f"{role}_{t}": f"{role}_{t}" for t in range(3) for role in ("label", "probabilities")
    }
    assert result.metadata.classes == [["no", "yes"], ["high", "low", "mid"], ["off", "on"]]
    rows = _holdout_with_nan_and_duplicates()
    predicted = Predictor(result.model.SerializeToString()).predict(rows)
    _assert_like_sklearn(model, rows, predicted)
    frame = predicted.to_frame()
    assert list(frame.columns) == [
        "label_0",
        "proba_0_no",
        "proba_0_yes",
        "label_1",
        "proba_1_high",
        "proba_1_low",
        "proba_1_mid",
        "label_2",
        "proba_2_off",
        "proba_2_on",
    ]
    np.testing.assert_array_equal(frame["label_1"], model.predict(rows)[:, 1])


def test_boolean_targets_come_back_as_booleans() -> None:
    model = MultiOutputClassifier(LogisticRegression(max_iter=500)).fit(FIT, Y[:200] == 1)
    result = convert_estimator(model, FIT.head(20), precision="double")
    assert result.metadata.classes == [[False, True]] * 3
    predicted = Predictor(result.model.SerializeToString()).predict(HOLDOUT)
    # ONNX labels are int64: the Predictor gives them the classes' type back, as scikit-learn.
    assert predicted.labels.dtype == np.bool_
    np.testing.assert_array_equal(predicted.labels, model.predict(HOLDOUT))
    for t in range(3):
        np.testing.assert_allclose(
            predicted.targets[t].probabilities, model.predict_proba(HOLDOUT)[t], atol=1e-9
        )


@pytest.mark.parametrize(
    "chain_method", ["predict", "predict_proba", "predict_log_proba", "decision_function"]
)
@pytest.mark.parametrize("precision", ["float", "double"])
def test_classifier_chain(assert_converts, chain_method: str, precision: str) -> None:
    model = ClassifierChain(
        LogisticRegression(max_iter=500), order=[2, 0, 1], chain_method=chain_method
    ).fit(FIT.to_numpy(), Y[:200])
    got = assert_converts(model, HOLDOUT.to_numpy(), precision)
    assert sorted(got) == sorted(f"{r}_{t}" for t in range(3) for r in ("label", "probabilities"))
    # float32 probabilities drift past convert's 1e-5 here; the labels are what is checked.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        converted = convert_estimator(model, X[:20], precision=precision, allow_divergent=True)
    predicted = Predictor(converted.model.SerializeToString())
    labels = predicted.predict(HOLDOUT.to_numpy()).labels
    np.testing.assert_array_equal(labels, model.predict(HOLDOUT.to_numpy()))


def test_chain_of_pipelines_fed_decision_functions() -> None:
    from sklearn.preprocessing import StandardScaler

    model = ClassifierChain(
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
        order=[1, 0, 2],
        chain_method="decision_function",
    ).fit(FIT.to_numpy(), Y[:200])
    result = convert_estimator(model, X[:20], precision="double")
    predicted = Predictor(result.model.SerializeToString()).predict(HOLDOUT.to_numpy())
    np.testing.assert_array_equal(predicted.labels, model.predict(HOLDOUT.to_numpy()))
    positive = model.predict_proba(HOLDOUT.to_numpy())
    for t, part in enumerate(predicted.targets):
        np.testing.assert_allclose(part.probabilities[:, 1], positive[:, t], atol=1e-9)


def test_labels_only_when_the_inner_classifier_has_no_probabilities() -> None:
    model = MultiOutputClassifier(LinearSVC()).fit(FIT, TARGETS[:200])
    result = convert_estimator(model, FIT.head(20))
    assert result.metadata.outputs == {
        "label_0": "label_0",
        "label_1": "label_1",
        "label_2": "label_2",
    }
    predicted = Predictor(result.model.SerializeToString()).predict(HOLDOUT)
    np.testing.assert_array_equal(predicted.labels, model.predict(HOLDOUT))
    assert list(predicted.to_frame().columns) == ["label_0", "label_1", "label_2"]


def test_chains_onnx_cannot_follow_are_refused_clearly() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    scores = ClassifierChain(
        HistGradientBoostingClassifier(max_iter=5), chain_method="decision_function"
    ).fit(FIT.to_numpy(), Y[:200])
    with pytest.raises(
        ConversionError,
        match=r"chain_method='decision_function'\): the decision function of the inner "
        r"HistGradientBoostingClassifier cannot be converted.*chain_method='predict_proba'",
    ):
        convert_estimator(scores, X[:5])
    three = np.column_stack([Y[:, 0], Y[:, 1] + Y[:, 2]])
    multiclass = ClassifierChain(LogisticRegression(max_iter=1000), chain_method="predict_proba")
    multiclass.fit(FIT.to_numpy(), three[:200])
    with pytest.raises(ConversionError, match=r"target 1 has 3 classes; a chain fed probabilities"):
        convert_estimator(multiclass, X[:5])


def test_validate_predict_and_score_a_multi_output_model(tmp_path, capsys) -> None:
    model = MultiOutputClassifier(LogisticRegression(max_iter=500)).fit(FIT, TARGETS[:200])
    onnx_path = convert_estimator(model, FIT.head(20)).save(tmp_path / "model.onnx")
    report = validate_model(onnx_path, model, HOLDOUT)
    assert report.verdict == "EQUIVALENT"
    compared = {c.name for pair in report.probe_sets[0].pairs for c in pair.outputs}
    assert compared == {f"{r}_{t}" for t in range(3) for r in ("label", "probabilities")}

    save_estimator(model, tmp_path / "model.skops")
    HOLDOUT.to_csv(tmp_path / "rows.csv", index=False)
    code, out, err = run(
        capsys,
        "validate",
        onnx_path,
        "--reference",
        tmp_path / "model.skops",
        "--data",
        tmp_path / "rows.csv",
        "--json",
    )
    assert code == 0, err
    assert '"verdict": "EQUIVALENT"' in out

    code, out, err = run(
        capsys, "score", onnx_path, tmp_path / "rows.csv", "-o", tmp_path / "s.parquet"
    )
    assert code == 0, err
    scored = pq.read_table(tmp_path / "s.parquet").to_pandas()
    expected = model.predict(HOLDOUT)
    for t in range(3):
        assert scored[f"label_{t}"].tolist() == expected[:, t].tolist()
    np.testing.assert_allclose(
        scored["proba_1_mid"], model.predict_proba(HOLDOUT)[1][:, 2], atol=1e-5
    )

    # A part with no rows still has every target's columns.
    HOLDOUT.head(0).to_csv(tmp_path / "none.csv", index=False)
    code, _, err = run(
        capsys, "score", onnx_path, tmp_path / "none.csv", "-o", tmp_path / "e.parquet"
    )
    assert code == 0, err
    assert pq.read_table(tmp_path / "e.parquet").column_names == list(scored.columns)


def test_a_tolerance_set_for_probabilities_holds_for_every_target(tmp_path) -> None:
    model = MultiOutputClassifier(LogisticRegression(max_iter=500)).fit(FIT, TARGETS[:200])
    onnx_path = convert_estimator(model, FIT.head(20), precision="float").save(tmp_path / "m.onnx")
    # float32 probabilities never equal scikit-learn's float64 ones to the last bit.
    exact = validate_model(
        onnx_path, model, HOLDOUT, tolerances={"probabilities": Tolerance(0.0, 0.0)}
    )
    assert exact.verdict == "DIVERGENT"
    failed = {c.name for s in exact.probe_sets for p in s.pairs for c in p.outputs if not c.ok}
    assert failed and all(name.startswith("probabilities_") for name in failed)
    assert validate_model(onnx_path, model, HOLDOUT, atol=1e-4, rtol=1e-4).verdict == "EQUIVALENT"
