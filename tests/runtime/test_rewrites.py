"""The passes' common interface (runtime/rewrites/__init__.py): a pass that fails, or whose
graph ONNX Runtime refuses, is logged with its reason and the graph runs as it is."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

from onnxbridge import Predictor, convert_estimator
from onnxbridge.runtime._rewrites import Rewrite, apply_rewrite, passes_for
from onnxbridge.runtime._rewrites import tree_blocks as tree_blocks_module
from onnxbridge.runtime._rewrites.linear_dot import LINEAR_DOT
from onnxbridge.runtime._rewrites.tree_blocks import ONE_THREAD_TREE_BLOCK_NODES, tree_blocks
from onnxbridge.runtime._settings import SessionSettings


def _frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


@pytest.fixture(scope="module")
def forest(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[bytes, RandomForestClassifier, np.ndarray]:
    X, y = make_classification(n_samples=3000, n_features=8, random_state=3)
    model = RandomForestClassifier(n_estimators=60, random_state=0).fit(X[:1500], y[:1500])
    onnx_model = convert_estimator(model, _frame(X[:5]), precision="float").model
    return onnx_model.SerializeToString(), model, X[1500:]


def _fresh(model: bytes, tag: str, tmp_path: Path) -> Path:
    """``model`` with its own doc string, so that no pass result of another test is reused."""
    proto = onnx.load_model_from_string(model)
    proto.doc_string = tag
    path = tmp_path / f"{tag}.onnx"
    path.write_bytes(proto.SerializeToString())
    return path


def test_a_pass_that_fails_is_logged_and_changes_nothing(forest, caplog) -> None:
    model = forest[0]

    def broken(_: bytes) -> bytes:
        raise ValueError("a pass bug\nwith a second line")

    caplog.set_level(logging.WARNING, logger="onnxbridge.runtime")
    assert apply_rewrite(model, Rewrite("broken-pass", lambda _: True, broken)) is None
    [record] = [r for r in caplog.records if r.name == "onnxbridge.runtime"]
    assert record.levelno == logging.WARNING
    assert "broken-pass" in record.getMessage() and "a pass bug" in record.getMessage()
    assert "second line" not in record.getMessage()
    # A pass that does not apply is not run at all.
    assert apply_rewrite(model, Rewrite("skipped", lambda _: False, broken)) is None


def test_a_predictor_whose_pass_fails_logs_it_and_predicts_right(
    forest, tmp_path: Path, monkeypatch, caplog
) -> None:
    model, sk_model, X = forest
    path = _fresh(model, "fails", tmp_path)

    def broken(model: bytes, max_nodes: int) -> bytes:
        raise ValueError("a rewrite bug")

    monkeypatch.setattr(tree_blocks_module, "block_tree_ensembles", broken)
    caplog.set_level(logging.WARNING, logger="onnxbridge.runtime")
    predictor = Predictor(path, intra_op_num_threads=1)
    result = predictor.predict(_frame(X))  # 1 500 rows: trees in blocks were asked for
    np.testing.assert_array_equal(result.labels, sk_model.predict(X))
    messages = [r.getMessage() for r in caplog.records if r.name == "onnxbridge.runtime"]
    assert any(
        f"tree_blocks({ONE_THREAD_TREE_BLOCK_NODES})" in m and "a rewrite bug" in m
        for m in messages
    ), messages
    # The pass changed nothing: large calls run the graph as it is, on the small calls' session.
    assert predictor.session_for(len(X)) is predictor.session_for(1)


def test_a_rewrite_onnx_runtime_refuses_is_logged_and_the_graph_runs(
    forest, tmp_path: Path, monkeypatch, caplog
) -> None:
    model, sk_model, X = forest
    path = _fresh(model, "refused", tmp_path)
    monkeypatch.setattr(
        tree_blocks_module, "block_tree_ensembles", lambda model, max_nodes: b"not an onnx model"
    )
    caplog.set_level(logging.WARNING, logger="onnxbridge.runtime")
    predictor = Predictor(path, intra_op_num_threads=1)
    result = predictor.predict(_frame(X))
    np.testing.assert_array_equal(result.labels, sk_model.predict(X))
    messages = [r.getMessage() for r in caplog.records if r.name == "onnxbridge.runtime"]
    assert any("ONNX Runtime refused the graph rewritten by tree_blocks" in m for m in messages)


def test_settings_name_their_passes_in_order() -> None:
    both = SessionSettings(tree_block_nodes=500, linear_gemv=True)
    assert [p.name for p in passes_for(both)] == ["tree_blocks(500)", "linear_dot"]
    assert passes_for(SessionSettings()) == []
    # The cheap test keeps a pass from parsing models it has nothing to do in.
    assert not LINEAR_DOT.applies_to(b"TreeEnsembleClassifier")
    assert not tree_blocks(500).applies_to(b"LinearRegressor")


def test_settings_for_a_call_whose_rewrite_was_refused_show_the_graph_that_runs(
    forest, tmp_path: Path, monkeypatch, caplog
) -> None:
    model, sk_model, X = forest
    path = _fresh(model, "refused-settings", tmp_path)
    monkeypatch.setattr(
        tree_blocks_module, "block_tree_ensembles", lambda model, max_nodes: b"not an onnx model"
    )
    caplog.set_level(logging.WARNING, logger="onnxbridge.runtime")
    blocked = SessionSettings(1, allow_spinning=False, tree_block_nodes=ONE_THREAD_TREE_BLOCK_NODES)
    predictor = Predictor(path, settings=blocked)
    assert predictor.settings_for(len(X)) == SessionSettings(1, allow_spinning=False)
    messages = [r.getMessage() for r in caplog.records if r.name == "onnxbridge.runtime"]
    assert (
        sum("ONNX Runtime refused the graph rewritten by tree_blocks" in m for m in messages) == 1
    )
    np.testing.assert_array_equal(predictor.predict(_frame(X)).labels, sk_model.predict(X))
