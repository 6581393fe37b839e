"""Predictor runs the settings stored in the model: latency settings for small calls,
throughput settings for large ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onnxbridge import Bundle, Predictor
from onnxbridge.errors import SessionSettingsError
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from tuning_support import store_spec

LATENCY = SessionSettings(intra_op_num_threads=1, allow_spinning=True)
THROUGHPUT = SessionSettings(
    intra_op_num_threads=2, allow_spinning=False, graph_optimization_level="extended"
)


@pytest.fixture
def tuned_model(iris_bundle: Bundle) -> Path:
    spec = TuningSpec(latency=LATENCY, throughput=THROUGHPUT, latency_max_rows=16)
    store_spec(iris_bundle.onnx_path, spec)
    return iris_bundle.onnx_path


def _spinning(session) -> str:
    return session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")


def test_regime_follows_the_batch_size(tuned_model: Path) -> None:
    predictor = Predictor(tuned_model)
    assert predictor.tuning is not None and predictor.tuning.latency_max_rows == 16
    assert predictor.settings_for(1) == LATENCY
    assert predictor.settings_for(16) == LATENCY
    assert predictor.settings_for(17) == THROUGHPUT.clamped()
    small, large = predictor.session_for(1), predictor.session_for(17)
    assert small is not large
    assert predictor.session is small
    # The sessions ONNX Runtime opened carry the stored settings.
    assert small.get_session_options().intra_op_num_threads == 1
    assert _spinning(small) == "1"
    assert (
        large.get_session_options().intra_op_num_threads
        == THROUGHPUT.clamped().intra_op_num_threads
    )
    assert _spinning(large) == "0"
    X = np.random.RandomState(0).uniform(0, 8, size=(40, 4)).astype(np.float32)
    untuned = Predictor(tuned_model, tuned=False)
    assert untuned.tuning is None and untuned.session_for(1) is untuned.session_for(40)
    for rows in (1, 16, 17, 40):
        np.testing.assert_array_equal(
            predictor.predict(X[:rows]).labels, untuned.predict(X[:rows]).labels
        )
        np.testing.assert_allclose(
            predictor.predict(X[:rows]).probabilities,
            untuned.predict(X[:rows]).probabilities,
            atol=1e-6,
        )


def test_run_on_prepared_feeds_picks_the_session_too(tuned_model: Path) -> None:
    predictor = Predictor(tuned_model)
    X = np.random.RandomState(1).uniform(0, 8, size=(100, 4))
    outputs = predictor.run(predictor.prepare(X))
    assert outputs[1].shape == (100, 3)
    # A 100-row call is a throughput call: it ran on that session, with those settings.
    assert predictor.settings_for(100) == THROUGHPUT.clamped()
    assert predictor.session_for(100) is not predictor.session_for(1)
    expected = predictor.session_for(100).run(None, predictor.prepare(X))
    np.testing.assert_array_equal(outputs[1], expected[1])


def test_explicit_settings_win_over_tuned_ones(tuned_model: Path) -> None:
    pinned = Predictor(tuned_model, settings=SessionSettings(intra_op_num_threads=1))
    assert pinned.tuning is None
    assert pinned.session_for(1) is pinned.session_for(10_000)
    assert pinned.settings_for(10_000) == SessionSettings(intra_op_num_threads=1)
    assert Predictor(tuned_model, tuned=False).tuning is None
    # A keyword argument replaces its field in both regimes; the rest stays tuned.
    one_thread = Predictor(tuned_model, intra_op_num_threads=1)
    assert one_thread.settings_for(1) == LATENCY
    assert one_thread.settings_for(17) == SessionSettings(
        intra_op_num_threads=1, allow_spinning=False, graph_optimization_level="extended"
    )
    assert one_thread.session_for(17).get_session_options().intra_op_num_threads == 1
    no_spin = Predictor(tuned_model, allow_spinning=False)
    assert _spinning(no_spin.session_for(1)) == "0"
    assert no_spin.settings_for(1).intra_op_num_threads == 1


def test_a_damaged_entry_is_a_clear_error(iris_bundle: Bundle) -> None:
    store_spec(iris_bundle.onnx_path, '{"latency": {"threads": 3}, "throughput": {}}')
    with pytest.raises(SessionSettingsError, match=r"unknown session setting\(s\) threads"):
        Predictor(iris_bundle.onnx_path)
    # Asked to ignore the stored settings, the model still loads.
    assert len(Predictor(iris_bundle.onnx_path, tuned=False).predict(np.ones((1, 4)))) == 1
