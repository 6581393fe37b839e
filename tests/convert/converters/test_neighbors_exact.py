"""k-neighbours models exact on tied distances: duplicate rows with different labels.

Integer-valued features give many equal distances; the held-out rows are not in the training
set. ONNX Runtime must return scikit-learn's labels, probabilities, values and neighbours for
every search scikit-learn runs (KD tree, ball tree, brute force) and both weightings. With
``algorithm="brute"`` and more than 256 training rows scikit-learn's choice among tied rows
depends on its thread count for small batches, so it is compared on one thread, as documented.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_wine
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from threadpoolctl import threadpool_limits

from onnxbridge import ConversionError, Predictor, convert_estimator, validate_model

ALGORITHMS = ["kd_tree", "ball_tree", "brute"]
WEIGHTS = ["uniform", "distance"]


def _tied_table(seed: int, n: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training rows on a small integer grid (many duplicates, labels at random) and held-out
    query rows on the same grid."""
    rng = np.random.RandomState(seed)
    X = rng.randint(0, 4, size=(n, 3)).astype(np.float64)
    y = rng.randint(0, 3, size=n)
    queries = rng.randint(0, 4, size=(300, 3)).astype(np.float64) + np.array([0.0, 0.0, 0.5])
    return X, y, queries


def _onnx(model: Any, X: np.ndarray, queries: np.ndarray, **kwargs: Any) -> dict[str, np.ndarray]:
    result = convert_estimator(model, X[:20], **kwargs)
    predictor = Predictor(result.model.SerializeToString())
    outputs = predictor.run(predictor.prepare(queries))
    raw = dict(zip([o.name for o in predictor.outputs], outputs, strict=True))
    return {role: np.asarray(raw[name]) for role, name in result.metadata.outputs.items()}


def _sklearn_threads(algorithm: str) -> contextlib.AbstractContextManager[Any]:
    return threadpool_limits(1) if algorithm == "brute" else contextlib.nullcontext()


def _straddling_ties(model: Any, queries: np.ndarray) -> int:
    """Rows whose k-th and (k+1)-th neighbours are equally far (scikit-learn's distances)."""
    k = model.n_neighbors
    distances, _ = model.kneighbors(queries, n_neighbors=k + 1)
    return int((distances[:, k - 1] == distances[:, k]).sum())


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_classifier_keeps_sklearns_tied_neighbours(algorithm: str, weights: str) -> None:
    X, y, queries = _tied_table(0)
    model = KNeighborsClassifier(algorithm=algorithm, weights=weights, leaf_size=10).fit(X, y)
    assert _straddling_ties(model, queries) > 100  # the tie rule decides most rows
    got = _onnx(model, X, queries)
    with _sklearn_threads(algorithm):
        labels, proba = model.predict(queries), model.predict_proba(queries)
    np.testing.assert_array_equal(got["label"], labels, err_msg="label")
    np.testing.assert_allclose(got["probabilities"], proba, rtol=0, atol=1e-9, err_msg="proba")


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_regressor_keeps_sklearns_tied_neighbours(algorithm: str, weights: str) -> None:
    X, y, queries = _tied_table(1)
    target = y * 10.0 + np.random.RandomState(1).rand(len(y))  # duplicates, other targets
    model = KNeighborsRegressor(n_neighbors=4, algorithm=algorithm, weights=weights).fit(X, target)
    assert _straddling_ties(model, queries) > 100
    got = _onnx(model, X, queries)
    with _sklearn_threads(algorithm):
        expected = model.predict(queries)
    np.testing.assert_allclose(got["value"].ravel(), expected, rtol=1e-12, atol=0, err_msg="value")


@pytest.mark.parametrize(("metric", "p"), [("manhattan", 2), ("minkowski", 3)])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_more_neighbours_than_a_leaf_holds(algorithm: str, metric: str, p: int) -> None:
    # k = 50 over leaves of 10 to 20 rows: the search starts from several leaves at once.
    X, y, queries = _tied_table(5, n=400)
    target = y + np.random.RandomState(5).rand(len(y))
    model = KNeighborsRegressor(
        n_neighbors=50, algorithm=algorithm, leaf_size=10, metric=metric, p=p
    ).fit(X, target)
    got = _onnx(model, X, queries)
    with _sklearn_threads(algorithm):
        expected = model.predict(queries)
    np.testing.assert_allclose(got["value"].ravel(), expected, rtol=1e-12, atol=0, err_msg="value")


@pytest.mark.parametrize("metric", ["euclidean", "manhattan", "chebyshev"])
def test_nearest_neighbours_and_distances_are_sklearns(metric: str) -> None:
    # Real-valued features with duplicated rows: distances must be the same float64 numbers.
    X, _ = load_wine(return_X_y=True)
    train = np.vstack([X[:120], X[:60:3]])
    queries = np.vstack([X[120:], X[:30]])  # unseen rows, and rows at distance 0
    model = NearestNeighbors(n_neighbors=4, metric=metric).fit(train)
    got = _onnx(model, train, queries)
    distances, indices = model.kneighbors(queries)
    np.testing.assert_array_equal(got["distances"], distances, err_msg="distances")
    for row, (ours, theirs) in enumerate(zip(got["indices"], indices, strict=True)):
        assert set(ours) == set(theirs), f"row {row}: neighbours {ours} != {theirs}"


def test_float_input_still_ranks_in_double_and_old_opset() -> None:
    X, y, queries = _tied_table(2, n=300)
    model = KNeighborsClassifier(n_neighbors=7).fit(X, y)
    result = convert_estimator(model, X[:20])
    assert result.precision == "double"
    assert any("neighbours model" in note for note in result.notes)
    got = _onnx(model, X, queries, opset=15, precision="float")
    np.testing.assert_array_equal(got["label"], model.predict(queries))
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(queries), atol=1e-6)


def test_many_rows_go_through_in_blocks() -> None:
    # More query rows than one block holds, and a number that is not a multiple of it.
    X, y, _ = _tied_table(3, n=4000)
    queries = np.random.RandomState(3).randint(0, 4, size=(2501, 3)).astype(np.float64)
    model = KNeighborsClassifier().fit(X, y)
    got = _onnx(model, X, queries)
    assert got["label"].shape == (2501,)
    np.testing.assert_array_equal(got["label"], model.predict(queries))
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(queries), atol=1e-9)


def _duplicated_wine() -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame]:
    """Wine with 90 rows repeated under other labels, shuffled; 190 rows to fit, the rest
    held out."""
    X, y = load_wine(return_X_y=True, as_frame=True)
    rng = np.random.RandomState(0)
    repeated = rng.choice(len(X), 90)
    frame = pd.concat([X, X.iloc[repeated]], ignore_index=True)
    target = np.concatenate([y.to_numpy(), rng.permutation(y.to_numpy())[repeated]])
    order = rng.permutation(len(frame))
    frame, target = frame.iloc[order].reset_index(drop=True), target[order]
    return frame.iloc[:190], target[:190], frame.iloc[190:].reset_index(drop=True)


def test_validate_calls_a_real_table_with_duplicates_equivalent(tmp_path: Path) -> None:
    train, target, holdout = _duplicated_wine()
    model = KNeighborsClassifier().fit(train, target)
    path = tmp_path / "knn.onnx"
    convert_estimator(model, train.head(50)).save(path)
    report = validate_model(path, model, holdout)
    assert report.verdict == "EQUIVALENT", [d.summary for d in report.diagnoses]
    # Both ONNX runtimes ran it on every probe set (onnx.reference included).
    for name, info in report.runtimes.items():
        assert info.get("available", True) and not info.get("failed_on"), (name, info)


def test_diagnosis_names_ties_in_neighbour_distances(tmp_path: Path) -> None:
    # A graph that keeps the lowest training index among tied rows (skl2onnx's rule).
    train, target, holdout = _duplicated_wine()
    model = KNeighborsClassifier().fit(train, target)
    index_order = KNeighborsClassifier(algorithm="brute").fit(train, target)
    path = tmp_path / "index_order.onnx"
    convert_estimator(index_order, train.head(50)).save(path)
    report = validate_model(path, model, holdout)
    assert report.verdict == "DIVERGENT"
    (diagnosis,) = [d for d in report.diagnoses if d.kind == "neighbours"]
    assert diagnosis.summary.startswith("ties in neighbour distances")
    assert diagnosis.data["tied_rows"] > 0
    assert "convert the model again" in diagnosis.next_step


def test_callable_weights_and_multi_output_are_refused() -> None:
    X, y, _ = _tied_table(4, n=100)
    callable_weights = KNeighborsClassifier(weights=lambda d: 1.0 / (1.0 + d)).fit(X, y)
    with pytest.raises(ConversionError, match=r"weights=<function.*use weights='uniform'"):
        convert_estimator(callable_weights, X[:5])
    two_targets = KNeighborsClassifier().fit(X, np.column_stack([y, y[::-1]]))
    with pytest.raises(ConversionError, match=r"several targets|multi-output"):
        convert_estimator(two_targets, X[:5])
    too_many = KNeighborsRegressor(n_neighbors=150).fit(X, y.astype(float))
    with pytest.raises(ConversionError, match=r"n_neighbors=150\) exceeds the 100 training rows"):
        convert_estimator(too_many, X[:5])
