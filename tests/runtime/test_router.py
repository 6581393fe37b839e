"""The router (runtime/_router.py): one rule picks a call's settings, and one switch turns every
speed-up off."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from onnxbridge import Bundle, Predictor, convert_estimator
from onnxbridge.errors import SchemaMismatchError, SessionSettingsError
from onnxbridge.runtime._router import Router
from onnxbridge.runtime._settings import SessionSettings, TuningSpec


@pytest.fixture
def logistic(tmp_path: Path) -> tuple[Path, np.ndarray]:
    X, y = make_classification(n_samples=12_000, n_features=12, random_state=0)
    X = X.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(max_iter=500).fit(X[:2000], y[:2000])
    return convert_estimator(model, X[:20]).save(tmp_path / "lr.onnx"), X


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows", [1, 100, 10_000])
def test_speedups_off_gives_the_defaults_results_on_the_forest(
    iris_bundle: Bundle, rows: int
) -> None:
    X = np.random.RandomState(0).uniform(0, 8, size=(rows, 4)).astype(np.float32)
    plain = Predictor(iris_bundle.onnx_path, speedups=False)
    fast = Predictor(iris_bundle.onnx_path)
    _same(plain.predict(X), fast.predict(X))
    # Exactly what ONNX Runtime gives on its own with onnxbridge's default options.
    options = SessionSettings.onnxbridge_default().to_session_options()
    session = ort.InferenceSession(str(iris_bundle.onnx_path), options)
    labels, probabilities = session.run(None, {"input": X})
    result = plain.predict(X)
    np.testing.assert_array_equal(result.labels, labels)
    np.testing.assert_array_equal(result.probabilities, probabilities)


def test_speedups_off_gives_the_defaults_results_on_a_logistic_regression(logistic) -> None:
    path, X = logistic
    plain = Predictor(path, speedups=False)
    fast = Predictor(path)
    assert fast.settings_for(10_000).linear_gemv  # the default rewrites large calls
    for rows in (1, 100, 10_000):
        _same(plain.predict(X[:rows]), fast.predict(X[:rows]))
    # No rewrite and no split, whatever the size; one session for every call.
    for rows in (1, 300, 10_000):
        settings = plain.settings_for(rows)
        assert settings == SessionSettings.onnxbridge_default()
        assert not settings.linear_gemv and not settings.tree_block_nodes and not settings.row_split
    assert plain.session_for(10_000) is plain.session_for(1)
    assert isinstance(plain.session_for(10_000), ort.InferenceSession)
    # Missing values are refused as ever: the input is checked.
    bad = X[:10_000].copy()
    bad[17, 3] = np.nan
    for predictor in (plain, fast):
        with pytest.raises(SchemaMismatchError, match=r"missing values \(NaN\) in 1 row"):
            predictor.predict(bad)


def test_speedups_off_ignores_tuned_settings(iris_bundle: Bundle, tmp_path: Path) -> None:
    from tuning_support import store_spec

    tuned = SessionSettings(1, allow_spinning=False, row_split=2, tree_block_nodes=500)
    store_spec(
        iris_bundle.onnx_path,
        TuningSpec(latency=SessionSettings(1), throughput=tuned, latency_max_rows=1),
    )
    assert Predictor(iris_bundle.onnx_path).tuning is not None
    plain = Predictor(iris_bundle.onnx_path, speedups=False)
    assert plain.tuning is None
    assert plain.settings_for(10_000) == SessionSettings.onnxbridge_default()
    # Given settings keep ONNX Runtime's own options, without onnxbridge's speed-ups.
    given = Predictor(iris_bundle.onnx_path, settings=tuned, speedups=False)
    assert given.settings_for(10_000) == SessionSettings(1, allow_spinning=False)


def test_the_router_routes_by_rows_once(iris_bundle: Bundle) -> None:
    latency = SessionSettings(1, allow_spinning=False)
    throughput = SessionSettings(1, allow_spinning=False, graph_optimization_level="basic")
    spec = TuningSpec(latency=latency, throughput=throughput, latency_max_rows=8)
    router = Router(iris_bundle.onnx_path, spec)
    assert router.settings_for(8) == latency and router.settings_for(9) == throughput
    assert router.session_for(8) is router.session_for(1)
    assert router.session_for(9) is not router.session_for(8)
    feeds = {"input": np.ones((9, 4), dtype=np.float32)}
    np.testing.assert_array_equal(router.run(feeds)[1], router.session_for(9).run(None, feeds)[1])
    # Batch scoring: one regime whatever the size.
    batch = Router(iris_bundle.onnx_path, spec, regime="throughput")
    assert batch.settings_for(1) == throughput == batch.settings_for(10_000)
    # Given settings, no spec: every call runs with them.
    pinned = Router(iris_bundle.onnx_path, settings=latency)
    assert pinned.settings_for(1) == pinned.settings_for(10_000) == latency


def test_call_runs_small_arrays_on_the_bound_path_and_prepares_the_rest(
    iris_bundle: Bundle,
) -> None:
    router = Router(iris_bundle.onnx_path)
    prepared: list[int] = []

    def prepare(data: np.ndarray) -> dict[str, np.ndarray]:
        prepared.append(len(data))
        return {"input": data}

    for rows in (1, 5, 256, 257, 3000):
        X = np.random.RandomState(rows).uniform(0, 8, size=(rows, 4)).astype(np.float32)
        outputs = router.call(X, prepare)
        expected = router.run({"input": X})
        np.testing.assert_array_equal(outputs[0], expected[0])
        np.testing.assert_allclose(outputs[1], expected[1], rtol=1e-6)
        # Predictor.predict makes this very call: the same outputs, decoded.
        result = Predictor(iris_bundle.onnx_path).predict(X)
        np.testing.assert_array_equal(result.labels, outputs[0])
        np.testing.assert_array_equal(result.probabilities, outputs[1])
    # Arrays the bound path serves never needed feeds; larger ones were prepared.
    assert prepared == [257, 3000]
    # Anything else (a mapping of columns, say) is prepared, then run.
    assert len(router.call({"input": X[:3]}, lambda d: d)[0]) == 3


def test_an_empty_array_is_left_to_the_general_path(iris_bundle: Bundle) -> None:
    empty = np.empty((0, 4), dtype=np.float32)
    prepared: list[np.ndarray] = []

    def prepare(data: np.ndarray) -> dict[str, np.ndarray]:
        prepared.append(data)
        return {"input": data}

    for regime in (None, "throughput"):
        router = Router(iris_bundle.onnx_path, regime=regime)  # type: ignore[arg-type]
        assert len(router.call(empty, prepare)[0]) == 0
    assert len(prepared) == 2  # never the bound path: both calls were prepared
    for regime in (None, "throughput"):
        with pytest.raises(SchemaMismatchError, match="no rows"):
            Predictor(iris_bundle.onnx_path, regime=regime).predict(empty)  # type: ignore[arg-type]


def test_a_predictor_runs_a_given_spec_as_a_model_tuned_to_it(iris_bundle: Bundle) -> None:
    latency = SessionSettings(1, allow_spinning=False)
    throughput = SessionSettings(2, allow_spinning=False, tree_block_nodes=500)
    spec = TuningSpec(latency=latency, throughput=throughput, latency_max_rows=8)
    predictor = Predictor(iris_bundle.onnx_path, tuning=spec)
    assert predictor.tuning == spec
    routed = Router(iris_bundle.onnx_path, spec)
    for rows in (1, 8, 9, 100_000):
        assert predictor.settings_for(rows) == routed.settings_for(rows)
    # Rewrites only on calls large enough, as with a stored spec; not on every call.
    assert predictor.settings_for(9).tree_block_nodes == 0
    with pytest.raises(SessionSettingsError, match="not both"):
        Predictor(iris_bundle.onnx_path, tuning=spec, settings=latency)
