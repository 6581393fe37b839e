"""The bound fast path gives exactly what the plain session.run path gives, per thread."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import LogisticRegression

from onnxbridge import Bundle, Predictor, convert_estimator
from onnxbridge.errors import SchemaMismatchError
from onnxbridge.runtime._fastpath import DEFAULT_MAX_ROWS, BoundRunner


def _plain(predictor: Predictor, X: np.ndarray) -> list[np.ndarray]:
    return predictor.session_for(len(X)).run(None, {"input": X.astype(np.float32)})


@pytest.fixture
def iris_predictor(iris_bundle: Bundle) -> Predictor:
    return Predictor(iris_bundle.onnx_path)


@pytest.mark.parametrize("rows", [1, 3, DEFAULT_MAX_ROWS, DEFAULT_MAX_ROWS + 1, 1000])
def test_small_and_large_calls_match_session_run(iris_predictor: Predictor, rows: int) -> None:
    X = np.random.RandomState(0).uniform(0, 8, size=(rows, 4)).astype(np.float32)
    labels, probabilities = _plain(iris_predictor, X)
    result = iris_predictor.predict(X)
    np.testing.assert_array_equal(result.labels, labels)
    np.testing.assert_array_equal(result.probabilities, probabilities)
    assert result.classes == [0, 1, 2]
    # The bound path serves calls up to DEFAULT_MAX_ROWS rows, with the plain path's results.
    runner = BoundRunner(iris_predictor.session_for(rows), "input", np.float32, 4)
    bound = runner.try_run(X)
    assert (bound is not None) == (rows <= DEFAULT_MAX_ROWS)
    if bound is not None:
        np.testing.assert_array_equal(bound[1], probabilities)


def test_results_are_the_callers_own(iris_predictor: Predictor) -> None:
    """The bound path copies its output buffers out: a later call never changes a result."""
    a = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    b = np.array([[6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    first = iris_predictor.predict(a)
    kept = first.probabilities.copy()
    second = iris_predictor.predict(b)
    # The second call reuses the bound buffers; the first result must not change with them.
    np.testing.assert_array_equal(first.probabilities, kept)
    assert first.labels[0] == 0 and second.labels[0] == 2
    first.probabilities[:] = -1
    np.testing.assert_array_equal(iris_predictor.predict(a).probabilities, kept)


@pytest.mark.parametrize("hold", ["view", "frame", "labels only"])
def test_anything_built_on_a_result_keeps_it_unchanged(
    iris_predictor: Predictor, hold: str
) -> None:
    a = np.array([[5.1, 3.5, 1.4, 0.2]], dtype=np.float32)
    b = np.array([[6.7, 3.0, 5.2, 2.3]], dtype=np.float32)
    result = iris_predictor.predict(a)
    expected = result.probabilities.copy()
    if hold == "view":
        kept = result.probabilities[0]
    elif hold == "frame":
        kept = result.to_frame()[["proba_0", "proba_1", "proba_2"]]
    else:
        kept = result.labels
        expected = result.labels.copy()
    del result
    for _ in range(3):
        iris_predictor.predict(b)
    np.testing.assert_array_equal(np.asarray(kept).reshape(expected.shape), expected)


def test_casts_rows_and_1d_input_like_the_plain_path(iris_predictor: Predictor) -> None:
    X = load_iris().data[:5]
    as_float64 = iris_predictor.predict(X)
    as_float32 = iris_predictor.predict(X.astype(np.float32))
    np.testing.assert_array_equal(as_float64.probabilities, as_float32.probabilities)
    one = iris_predictor.predict(X[0])
    np.testing.assert_array_equal(one.probabilities, as_float32.probabilities[:1])
    as_int = iris_predictor.predict(X.round().astype(np.int64))
    np.testing.assert_array_equal(as_int.labels, _plain(iris_predictor, X.round())[0])


def test_bad_arrays_still_raise_the_plain_paths_errors(iris_predictor: Predictor) -> None:
    with pytest.raises(SchemaMismatchError, match=r"data has 3 columns but the model expects 4"):
        iris_predictor.predict(np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(SchemaMismatchError, match=r"cannot cast the data to tensor\(float\)"):
        iris_predictor.predict(np.array([["a", "b", "c", "d"]]))


def test_missing_values_are_refused_for_models_that_refuse_them(tmp_path: Path) -> None:
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    path = convert_estimator(model, X[:20]).save(tmp_path / "lr.onnx")
    predictor = Predictor(path)
    row = X[:1].astype(np.float32).copy()
    predictor.predict(row)  # binds the one-row buffers
    row[0, 2] = np.nan
    with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
        predictor.predict(row)
    inf_row = np.array([[np.inf, -np.inf, 1.0, 1.0]], dtype=np.float32)
    # inf - inf sums to NaN: not a missing value, but not a value a model can score either.
    with pytest.raises(SchemaMismatchError, match=r"row 1, column 'x0': inf is not a finite"):
        predictor.predict(inf_row)
    allowed = predictor.predict(row, allow_missing=True)
    assert len(allowed) == 1


def test_regressor_values_through_the_bound_path(tmp_path: Path) -> None:
    X, y = load_diabetes(return_X_y=True)
    model = GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X, y)
    path = convert_estimator(model, X[:20]).save(tmp_path / "gbr.onnx")
    predictor = Predictor(path)
    for rows in (1, 7):
        values = predictor.predict(X[:rows]).values
        assert values.shape == (rows,)
        np.testing.assert_allclose(values, model.predict(X[:rows]), rtol=1e-5, atol=1e-3)


def test_threads_get_their_own_buffers(iris_predictor: Predictor) -> None:
    rows = np.random.RandomState(1).uniform(0, 8, size=(64, 4)).astype(np.float32)
    # One-row plain runs: a 64-row call may sum the trees in another order (last-bit changes).
    expected = [_plain(iris_predictor, rows[k : k + 1])[1][0] for k in range(len(rows))]
    errors: list[str] = []

    def worker(offset: int) -> None:
        for i in range(300):
            k = (offset + i) % len(rows)
            got = iris_predictor.predict(rows[k : k + 1]).probabilities
            if not np.array_equal(got[0], expected[k]):
                errors.append(f"thread {offset} row {k}: {got[0]} != {expected[k]}")

    threads = [threading.Thread(target=worker, args=(t * 7,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_zipmap_models_take_the_plain_path(tmp_path: Path) -> None:
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    path = convert_estimator(model, X[:20], zipmap=True).save(tmp_path / "zipmap.onnx")
    predictor = Predictor(path)
    result = predictor.predict(X[:2])
    np.testing.assert_allclose(result.probabilities, model.predict_proba(X[:2]), atol=1e-5)
    runner = BoundRunner(predictor.session, "input", np.float32, 4)
    assert runner.try_run(X[:2].astype(np.float32)) is None
    assert runner.disabled


def test_runner_refuses_what_it_cannot_serve(iris_predictor: Predictor) -> None:
    runner = BoundRunner(iris_predictor.session, "input", np.float32, 4, max_rows=2)
    assert runner.try_run([[1.0, 2.0, 3.0, 4.0]]) is None  # not an ndarray
    assert runner.try_run(np.zeros((3, 4), dtype=np.float32)) is None  # more than max_rows
    assert runner.try_run(np.zeros((1, 5), dtype=np.float32)) is None  # wrong width
    assert runner.try_run(np.zeros((0, 4), dtype=np.float32)) is None  # no rows
    assert runner.try_run(np.array([["a"] * 4])) is None  # not numeric
    outputs = runner.try_run(np.zeros((2, 4), dtype=np.float32))
    assert outputs is not None and outputs[1].shape == (2, 3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_small_nan_check_is_exact(dtype: type) -> None:
    from onnxbridge.runtime._fastpath import small_has_nan

    finfo = np.finfo(dtype)
    specials = [np.inf, -np.inf, finfo.max, -finfo.max, finfo.tiny, 0.0, -0.0, 1.0]
    rng = np.random.RandomState(0)
    for size in (1, 2, 28, 280, 2800, 8192):
        for trial in range(20):
            values = rng.standard_normal(size).astype(dtype)
            # Infinities and values whose squares overflow, never NaN on their own …
            picks = rng.randint(0, size, size=min(size, 5))
            values[picks] = rng.choice(specials, size=len(picks))
            assert small_has_nan(values.reshape(-1, 1)) is False
            # … and one NaN anywhere is always found, among them too.
            if trial % 2:
                values[rng.randint(0, size)] = np.nan
                assert small_has_nan(values) is True
            assert small_has_nan(values) == bool(np.isnan(values).any())
    assert small_has_nan(np.array([[np.inf, -np.inf]], dtype=dtype)) is False
    assert small_has_nan(np.zeros((0, 3), dtype=dtype)) is False


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_nan_check_is_exact_on_large_and_strided_arrays(dtype: type) -> None:
    """has_nan: a dot product on small contiguous float32 / float64 arrays, the minimum on the
    rest — both exact with infinities and overflowing squares around."""
    from onnxbridge.runtime._fastpath import has_nan

    finfo = np.finfo(dtype)
    rng = np.random.RandomState(1)
    for size in (4_000, 8_192, 20_000, 200_000):
        values = rng.standard_normal(size).astype(dtype)
        values[rng.randint(0, size, size=6)] = [np.inf, -np.inf, finfo.max, -finfo.max, 0, 1]
        pairs = values.reshape(-1, 2)
        for view in (pairs, pairs[:, 1], pairs[::3]):  # contiguous, strided columns and rows
            assert has_nan(view) is False
        spot = rng.randint(0, size)
        values[spot] = np.nan
        for view in (pairs, pairs[:, spot % 2], pairs[spot // 2 :: 1 + spot % 3]):
            assert has_nan(view) is True
            assert has_nan(view) == bool(np.isnan(view).any())
    assert has_nan(np.zeros((0, 2), dtype=dtype)) is False
    # One value is read as a Python float: the same answers.
    for value in (np.nan, np.inf, -np.inf, finfo.max, 0.0, 1.0):
        one = np.full((1, 1), value, dtype=dtype)
        assert has_nan(one) is bool(np.isnan(value))
