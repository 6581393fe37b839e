"""SVC, NuSVC, SVR, NuSVR and OneClassSVM: exact in float64, scores laid out like
scikit-learn's, probabilities as LIBSVM couples them; checked through the CLI, validate_model,
the .onnx file and a real ONNX Runtime session."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from sklearn.datasets import (
    load_breast_cancer,
    load_iris,
    load_wine,
    make_classification,
    make_multilabel_classification,
)
from sklearn.linear_model import PassiveAggressiveClassifier, Perceptron, SGDClassifier
from sklearn.multiclass import OneVsOneClassifier
from sklearn.multioutput import ClassifierChain
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR, LinearSVC, NuSVC, NuSVR, OneClassSVM

from cli_support import run
from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError
from onnxbridge.validate import validate_model


def _probability(**params: object) -> dict[str, object]:
    return {"probability": True, "random_state": 0, **params}


@pytest.fixture(autouse=True)
def _quiet() -> None:
    # scikit-learn 1.9 deprecates SVC(probability=True); fitting one warns.
    warnings.filterwarnings("ignore", category=FutureWarning)


def _breast_cancer(text_labels: bool) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    if text_labels:
        y = np.where(y == 1, "benign", "malignant")
    return X, y


def _session(result: object, path: Path) -> ort.InferenceSession:
    result.save(path)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_cli_binary_svc_bundle_validates_equivalent(capsys, tmp_path: Path) -> None:
    bundle = tmp_path / "svc"
    code, _, err = run(
        capsys, "train", "--data", "breast_cancer", "--model", "SVC()", "--out", bundle
    )
    assert code == 0, err
    code, _, err = run(capsys, "convert", bundle)
    assert code == 0, err
    code, out, err = run(capsys, "validate", bundle, "--runtimes", "sklearn,onnxruntime")
    assert code == 0, out + err
    assert "verdict: EQUIVALENT" in out
    for probe in ("holdout", "range", "edge", "batch"):
        row = next(line for line in out.splitlines() if line.strip("│ ").startswith(probe))
        assert "OK" in row and "big-diff" not in row, row


@pytest.mark.parametrize("text_labels", [False, True], ids=["int-labels", "text-labels"])
@pytest.mark.parametrize(
    "make",
    [lambda: SVC(), lambda: NuSVC(nu=0.3), lambda: SVC(kernel="linear")],
    ids=["SVC", "NuSVC", "SVC-linear"],
)
def test_binary_without_probability_validates_equivalent(
    tmp_path: Path, make, text_labels: bool
) -> None:
    X, y = _breast_cancer(text_labels)
    model = make().fit(X[:400], y[:400])
    path = convert_estimator(model, X[:50]).save(tmp_path / "model.onnx")
    report = validate_model(path, model, X[400:], runtimes=("sklearn", "onnxruntime"))
    assert report.verdict == "EQUIVALENT", report.verdict


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_pipeline(StandardScaler(), OneVsOneClassifier(LinearSVC())),
        lambda: OneVsOneClassifier(SVC()),
        lambda: make_pipeline(StandardScaler(), SGDClassifier(random_state=0)),
        lambda: make_pipeline(StandardScaler(), Perceptron(random_state=0)),
        lambda: make_pipeline(StandardScaler(), PassiveAggressiveClassifier(random_state=0)),
    ],
    ids=["OvO-LinearSVC", "OvO-SVC", "SGDClassifier", "Perceptron", "PassiveAggressive"],
)
def test_other_binary_decision_scores_validate_equivalent(tmp_path: Path, make) -> None:
    # Every binary classifier scored by decision_function: column c is class c's score
    # (OneVsOneClassifier's two columns are votes plus confidences: [1 - d, d]).
    X, y = _breast_cancer(text_labels=False)
    model = make().fit(X[:400], y[:400])
    path = convert_estimator(model, X[:50]).save(tmp_path / "model.onnx")
    report = validate_model(path, model, X[400:], runtimes=("sklearn", "onnxruntime"))
    assert report.verdict == "EQUIVALENT", report.verdict


def test_chain_fed_svc_decision_functions_validates_equivalent(tmp_path: Path) -> None:
    # Each link feeds the next its decision function d, read from the SVC graph's last column.
    X, Y = make_multilabel_classification(n_samples=200, n_features=6, n_classes=3, random_state=0)
    model = ClassifierChain(SVC(), chain_method="decision_function", order=[0, 1, 2])
    model.fit(X[:150], Y[:150])
    path = convert_estimator(model, X[:20]).save(tmp_path / "model.onnx")
    report = validate_model(path, model, X[150:], runtimes=("sklearn", "onnxruntime"))
    assert report.verdict == "EQUIVALENT", report.verdict


def test_binary_scores_are_minus_d_then_d(tmp_path: Path) -> None:
    X, y = _breast_cancer(text_labels=True)
    model = SVC().fit(X, y)
    result = convert_estimator(model, X[:50], precision="double")
    assert result.metadata.outputs == {"label": "label", "scores": "probabilities"}
    session = _session(result, tmp_path / "model.onnx")
    labels, scores = session.run(None, {"input": X})
    d = model.decision_function(X)
    assert scores.shape == (len(X), 2)
    np.testing.assert_allclose(scores[:, 1], d, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(scores[:, 0], -d, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(labels, model.predict(X))
    # Column c is class c's score: the label is the class of the larger column.
    np.testing.assert_array_equal(labels, model.classes_[scores.argmax(axis=1)])


def test_wine_double_precision_is_exact_and_batch_independent(tmp_path: Path) -> None:
    # Unscaled columns (proline ~ 1000): float32 support vectors move the probabilities.
    X, y = load_wine(return_X_y=True)
    model = SVC(**_probability(kernel="linear")).fit(X[::2], y[::2])
    holdout = X[1::2]
    result = convert_estimator(model, X[:50], precision="double")
    session = _session(result, tmp_path / "model.onnx")
    labels, proba = session.run(None, {"input": holdout})
    np.testing.assert_array_equal(labels, model.predict(holdout))
    np.testing.assert_allclose(proba, model.predict_proba(holdout), rtol=1e-7, atol=1e-9)
    one_by_one = np.vstack([session.run(None, {"input": row[None]})[1] for row in holdout])
    # The same to the last bits or two (matrix products block a batch's rows differently).
    np.testing.assert_allclose(one_by_one, proba, rtol=1e-12, atol=1e-15)
    report = validate_model(tmp_path / "model.onnx", model, holdout)
    assert report.verdict == "EQUIVALENT", report.verdict


def _unscaled(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=150,
        n_features=6,
        n_informative=4,
        n_redundant=0,
        n_classes=n_classes,
        random_state=1,
    )
    # Unscaled columns, as users' data often is (LIBSVM's linear kernel then needs a small C
    # to converge quickly).
    return X * np.array([1, 3, 10, 30, 0.1, 100.0]) + 50.0, y


@pytest.mark.parametrize(
    ("estimator", "n_classes"),
    [
        (SVC(kernel="linear", C=1e-3), 4),
        (SVC(gamma="auto"), 4),
        (SVC(kernel="poly", degree=3, coef0=1.0), 3),
        (SVC(kernel="sigmoid", gamma=1e-4), 3),
        (SVC(decision_function_shape="ovo"), 4),
        (SVC(break_ties=True), 4),
        (NuSVC(nu=0.2), 3),
        (SVC(**_probability()), 4),
        (SVC(**_probability(kernel="linear", C=1e-3)), 2),
        (NuSVC(**_probability(nu=0.3)), 3),
    ],
    ids=lambda v: repr(v) if not isinstance(v, int) else f"{v}-classes",
)
def test_classifiers_match_scikit_learn_in_double(assert_converts, estimator, n_classes) -> None:
    X, y = _unscaled(n_classes)
    model = estimator.fit(X, y)
    got = assert_converts(model, X, "double")
    assert set(got) == {"label", "probabilities" if hasattr(model, "predict_proba") else "scores"}


@pytest.mark.parametrize(
    "estimator",
    [SVR(), SVR(kernel="linear", C=1e-2), NuSVR(kernel="poly", degree=2)],
    ids=repr,
)
def test_regressors_match_scikit_learn_in_double(assert_converts, estimator) -> None:
    X, y = _unscaled(2)
    model = estimator.fit(X, X[:, 1] / 10.0 + y)
    assert_converts(model, X, "double")


def test_one_class_svm_labels_and_scores(assert_converts) -> None:
    X, _ = _unscaled(2)
    model = OneClassSVM(nu=0.2, gamma="scale").fit(X)
    got = assert_converts(model, X, "double")
    assert set(np.unique(got["label"])) == {-1, 1}


def test_graph_uses_standard_operators_only() -> None:
    X, y = load_iris(return_X_y=True)
    model = SVC(**_probability()).fit(X, y)
    result = convert_estimator(model, X[:20], precision="double")
    onnx.checker.check_model(result.model)
    assert {node.domain for node in result.model.graph.node} <= {""}


@pytest.mark.parametrize(
    ("kernel", "shown"), [("precomputed", "'precomputed'"), (lambda a, b: a @ b.T, "'<lambda>'")]
)
def test_kernels_without_support_vectors_are_refused(kernel, shown: str) -> None:
    X, y = load_iris(return_X_y=True)
    model = SVC(kernel=kernel).fit(X @ X.T if kernel == "precomputed" else X, y)
    with pytest.raises(ConversionError, match=f"SVC\\(kernel={shown}\\) cannot be converted"):
        convert_estimator(model, X[:5] @ X.T if kernel == "precomputed" else X[:5])


@pytest.mark.parametrize("opset", [9, 13])
def test_older_opsets(tmp_path: Path, opset: int) -> None:
    X, y = load_iris(return_X_y=True)
    model = SVC(**_probability()).fit(X, y)
    result = convert_estimator(model, X[:20], opset=opset, precision="double")
    assert result.metadata.opsets[""] == opset
    labels, proba = _session(result, tmp_path / "model.onnx").run(None, {"input": X})
    np.testing.assert_array_equal(labels, model.predict(X))
    np.testing.assert_allclose(proba, model.predict_proba(X), rtol=1e-9, atol=1e-12)
