"""Large calls cut into row slices run side by side (RowSplitSession): the unsplit results."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression

from onnxbridge import Predictor, convert_estimator
from onnxbridge.errors import SessionSettingsError
from onnxbridge.runtime._router import (
    ROW_SPLIT_MIN_PART,
    RowSplitSession,
    open_ort_session,
    split_parts,
)
from onnxbridge.runtime._settings import SessionSettings, TuningSpec
from tuning_support import store_spec

ONE_THREAD = SessionSettings(intra_op_num_threads=1, allow_spinning=False)


@pytest.fixture(scope="module")
def forest_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    X, y = make_classification(
        n_samples=4000, n_features=12, n_classes=3, n_informative=6, random_state=0
    )
    forest = RandomForestClassifier(n_estimators=20, random_state=0).fit(X[:2000], y[:2000])
    return convert_estimator(forest, X[:50]).save(tmp_path_factory.mktemp("split") / "rf.onnx")


def _rows(n: int, width: int = 12) -> np.ndarray:
    return np.random.RandomState(n).normal(size=(n, width)).astype(np.float32)


@pytest.mark.parametrize("rows", [1, ROW_SPLIT_MIN_PART * 2 - 1, ROW_SPLIT_MIN_PART * 2, 10_007])
@pytest.mark.parametrize("blocks", [0, 600])
def test_split_calls_give_the_unsplit_results_bit_for_bit(
    forest_path: Path, rows: int, blocks: int
) -> None:
    settings = SessionSettings(
        intra_op_num_threads=1, allow_spinning=False, tree_block_nodes=blocks
    )
    plain = open_ort_session(forest_path, settings)
    split = open_ort_session(forest_path, SessionSettings(**{**settings.to_dict(), "row_split": 2}))
    assert isinstance(split, RowSplitSession) and not isinstance(plain, RowSplitSession)
    feeds = {"input": _rows(rows)}
    expected, got = plain.run(None, feeds), split.run(None, feeds)
    assert len(got) == len(expected)
    for name, a, b in zip(["label", "probabilities"], got, expected, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    # The session's own methods are there too (the bound path binds through them).
    assert [o.name for o in split.get_outputs()] == ["label", "probabilities"]


def test_small_calls_keep_the_sessions_threads_and_parts_run_on_one(forest_path: Path) -> None:
    two = SessionSettings(intra_op_num_threads=2, allow_spinning=False)
    split = open_ort_session(forest_path, SessionSettings(**{**two.to_dict(), "row_split": 2}))
    assert isinstance(split, RowSplitSession) and split.part_session is not split.session
    small, large = {"input": _rows(100)}, {"input": _rows(6000)}
    for got, want in (
        (split.run(None, small), open_ort_session(forest_path, two).run(None, small)),
        (split.run(None, large), open_ort_session(forest_path, ONE_THREAD).run(None, large)),
    ):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_calls_with_too_few_rows_per_part_are_not_split(forest_path: Path) -> None:
    split = open_ort_session(forest_path, SessionSettings(intra_op_num_threads=1, row_split=2))
    seen: list[int] = []
    inner = split.session
    assert split.part_session is inner  # one intra-op thread already: no twin

    class Counting:
        def run(self, names, feeds, options=None):
            seen.append(len(feeds["input"]))
            return inner.run(names, feeds, options)

    split.session = split.part_session = Counting()
    split.run(None, {"input": _rows(ROW_SPLIT_MIN_PART * 2 - 1)})
    assert seen == [ROW_SPLIT_MIN_PART * 2 - 1]
    seen.clear()
    split.run(None, {"input": _rows(5000)})
    assert sorted(seen) == [2500, 2500]


def test_zipmap_outputs_are_joined_in_row_order(tmp_path: Path) -> None:
    X, y = make_classification(n_samples=3000, n_features=5, random_state=1)
    model = LogisticRegression(max_iter=500).fit(X, y)
    path = convert_estimator(model, X[:20], zipmap=True).save(tmp_path / "zipmap.onnx")
    feeds = {"input": X.astype(np.float32)}
    plain = open_ort_session(path, ONE_THREAD).run(None, feeds)
    split = open_ort_session(path, SessionSettings(intra_op_num_threads=1, row_split=2))
    got = split.run(None, feeds)
    assert isinstance(got[1], list) and len(got[1]) == len(X)
    assert got[1] == plain[1]
    np.testing.assert_array_equal(got[0], plain[0])


def test_predictor_with_split_rows_matches_and_runs_from_many_threads(tmp_path: Path) -> None:
    X, y = make_regression(n_samples=6000, n_features=8, random_state=2)
    model = RandomForestRegressor(n_estimators=10, random_state=0).fit(X[:3000], y[:3000])
    path = convert_estimator(model, X[:20]).save(tmp_path / "rfr.onnx")
    split = Predictor(path, settings=SessionSettings(intra_op_num_threads=1, row_split=2))
    plain = Predictor(path, settings=ONE_THREAD)
    expected = plain.predict(X).values
    errors: list[str] = []

    def worker() -> None:
        for _ in range(3):
            if not np.array_equal(split.predict(X).values, expected):
                errors.append("differs")

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert split.settings_for(len(X)).label().endswith("rows split ×2")
    # The calls went through the split (which starts its pool of part threads on its first
    # split call), not straight to the session it wraps.
    assert isinstance(split.session_for(len(X)), RowSplitSession)
    assert any(t.name.startswith("onnxbridge-rows") for t in threading.enumerate())


def test_explicit_threads_turn_a_tuned_split_off(forest_path: Path, tmp_path: Path) -> None:
    tuned = SessionSettings(intra_op_num_threads=1, allow_spinning=False, row_split=2)
    spec = TuningSpec(latency=ONE_THREAD, throughput=tuned, latency_max_rows=1)
    path = store_spec(forest_path, spec, tmp_path / "tuned.onnx")
    assert isinstance(Predictor(path).session_for(10_000), RowSplitSession)
    # The caller says how many threads a call gets: no split on top of them.
    explicit = Predictor(path, intra_op_num_threads=1)
    assert explicit.settings_for(10_000).row_split == 0
    assert not isinstance(explicit.session_for(10_000), RowSplitSession)


def test_bad_row_split_is_refused_and_clamped_to_the_cores() -> None:
    with pytest.raises(
        SessionSettingsError, match=r"row_split must be an integer >= 0 \(0: no split\), got -2"
    ):
        SessionSettings(row_split=-2)
    assert SessionSettings(row_split=8).clamped(cores=2).row_split == 2


def test_a_call_too_small_for_two_parts_runs_and_reports_unsplit(forest_path: Path) -> None:
    two = SessionSettings(intra_op_num_threads=2, allow_spinning=False, row_split=2)
    predictor = Predictor(forest_path, settings=two)
    small, large = 2 * ROW_SPLIT_MIN_PART - 1, 2 * ROW_SPLIT_MIN_PART
    assert split_parts(2, small) == 1 and split_parts(2, large) == 2
    # What a call really runs with: no split below two parts, and its session is the one the
    # split session hands such calls to.
    assert predictor.settings_for(small) == replace(two, row_split=0)
    assert predictor.settings_for(large) == two
    split = predictor.session_for(large)
    assert isinstance(split, RowSplitSession)
    assert predictor.session_for(small) is split.session
    X = _rows(small)
    np.testing.assert_array_equal(
        predictor.predict(X).probabilities,
        Predictor(forest_path, settings=replace(two, row_split=0)).predict(X).probabilities,
    )
