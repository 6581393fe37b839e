"""The tree-blocks pass (runtime/rewrites/tree_blocks.py): large tree ensembles split into
blocks of trees for large batches give the same results as the graph as it is."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
from onnx import TensorProto, helper
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)

from onnxbridge import Predictor, convert_estimator
from onnxbridge.errors import SessionSettingsError
from onnxbridge.runtime._rewrites.tree_blocks import (
    DEFAULT_TREE_BLOCK_NODES,
    ONE_THREAD_TREE_BLOCK_NODES,
    block_tree_ensembles,
)
from onnxbridge.runtime._router import MULTI_THREAD_BLOCK_MIN_ROWS, blocks_from_rows
from onnxbridge.runtime._settings import SessionSettings, available_cores
from tuning_support import store_spec

BLOCK = 600  # small blocks, so that test-sized forests are split into several


def _frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


def _session(model: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _tree_ops(model: bytes) -> list[str]:
    return [n.op_type for n in onnx.load_model_from_string(model).graph.node if "Tree" in n.op_type]


def _both(estimator, X: np.ndarray) -> tuple[list, list, bytes]:
    model = convert_estimator(estimator, _frame(X[:5]), precision="float").model
    plain = model.SerializeToString()
    blocked = block_tree_ensembles(plain, BLOCK)
    assert blocked is not None
    assert len(_tree_ops(blocked)) > 2, _tree_ops(blocked)
    name = _session(plain).get_inputs()[0].name
    feeds = {name: X.astype(np.float32)}
    return _session(plain).run(None, feeds), _session(blocked).run(None, feeds), blocked


@pytest.mark.parametrize("n_classes", [2, 4])
def test_forest_classifier_blocks_give_the_same_labels_and_probabilities(n_classes: int) -> None:
    X, y = make_classification(
        n_samples=3000, n_features=10, n_informative=6, n_classes=n_classes, random_state=0
    )
    names = np.array(["ant", "bee", "cat", "dog"])[:n_classes]
    forest = RandomForestClassifier(n_estimators=30, random_state=0).fit(X[:1500], names[y[:1500]])
    plain, blocked, _ = _both(forest, X[1500:])
    np.testing.assert_array_equal(blocked[0], plain[0])
    np.testing.assert_allclose(blocked[1], plain[1], rtol=0, atol=1e-6)
    # Fully grown trees have pure leaves: the sums are exact, so ties between classes (an even
    # split of the votes) stay ties and resolve like scikit-learn's argmax.
    expected = forest.predict_proba(X[1500:])
    ties = np.sum(np.isclose(expected.max(axis=1), np.sort(expected, axis=1)[:, -2]))
    assert ties > 0
    np.testing.assert_array_equal(blocked[0], forest.predict(X[1500:]))


@pytest.mark.parametrize(
    "estimator",
    [
        RandomForestRegressor(n_estimators=20, random_state=0),
        ExtraTreesRegressor(n_estimators=20, random_state=0),
    ],
    ids=["random-forest", "extra-trees"],
)
def test_forest_regressor_blocks_give_the_same_values(estimator) -> None:
    X, y = make_regression(n_samples=2000, n_features=8, noise=5.0, random_state=0)
    estimator.fit(X[:1000], y[:1000])
    plain, blocked, _ = _both(estimator, X[1000:])
    np.testing.assert_allclose(blocked[0], plain[0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(blocked[0].ravel(), estimator.predict(X[1000:]), rtol=1e-4)


def test_boosting_blocks_keep_the_base_score_once() -> None:
    X, y = make_classification(n_samples=2000, n_features=8, random_state=1)
    boosting = GradientBoostingClassifier(n_estimators=60, max_depth=4, random_state=0)
    boosting.fit(X[:1000], y[:1000])
    plain, blocked, _ = _both(boosting, X[1000:])
    np.testing.assert_array_equal(blocked[0], plain[0])
    np.testing.assert_allclose(blocked[1], plain[1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(blocked[1], boosting.predict_proba(X[1000:]), atol=1e-5)


def test_small_ensembles_and_other_models_are_left_alone() -> None:
    X, y = make_classification(n_samples=500, n_features=6, random_state=0)
    small = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    model = convert_estimator(small, _frame(X[:5]), precision="float").model.SerializeToString()
    assert block_tree_ensembles(model, DEFAULT_TREE_BLOCK_NODES) is None
    assert block_tree_ensembles(model, 1) is not None  # one tree per block


def _classifier_graph(label_is_output: bool, post_transform: str) -> bytes:
    """Two one-split trees on x[0]; the classifier's own label output may be a graph output."""
    node = helper.make_node(
        "TreeEnsembleClassifier",
        ["X"],
        ["label", "scores"],
        domain="ai.onnx.ml",
        nodes_treeids=[0, 0, 0, 1, 1, 1],
        nodes_nodeids=[0, 1, 2, 0, 1, 2],
        nodes_featureids=[0, 0, 0, 0, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"] * 2,
        nodes_values=[0.5, 0, 0, 1.5, 0, 0],
        nodes_truenodeids=[1, 0, 0, 1, 0, 0],
        nodes_falsenodeids=[2, 0, 0, 2, 0, 0],
        class_treeids=[0, 0, 0, 0, 1, 1, 1, 1],
        class_nodeids=[1, 1, 2, 2, 1, 1, 2, 2],
        class_ids=[0, 1] * 4,
        class_weights=[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
        classlabels_int64s=[0, 1],
        post_transform=post_transform,
    )
    outputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [None, 2])]
    if label_is_output:
        outputs.insert(0, helper.make_tensor_value_info("label", TensorProto.INT64, [None]))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])], outputs
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def test_operators_whose_result_would_change_are_left_alone() -> None:
    # ONNX Runtime's label of a TreeEnsembleClassifier follows its own binary rules, and a
    # post-transform (softmax, logistic) does not add up over blocks.
    assert block_tree_ensembles(_classifier_graph(True, "NONE"), 1) is None
    assert block_tree_ensembles(_classifier_graph(False, "SOFTMAX"), 1) is None
    blocked = block_tree_ensembles(_classifier_graph(False, "NONE"), 1)
    assert blocked is not None
    X = np.array([[0.0], [1.0], [2.0]], dtype=np.float32)
    np.testing.assert_array_equal(
        _session(blocked).run(["scores"], {"X": X})[0],
        _session(_classifier_graph(False, "NONE")).run(["scores"], {"X": X})[0],
    )


@dataclass(frozen=True)
class BigForest:
    """A converted forest large enough to be split at the default block size (read-only)."""

    path: Path
    forest: RandomForestClassifier
    X: np.ndarray


@pytest.fixture(scope="module")
def big_forest(tmp_path_factory: pytest.TempPathFactory) -> BigForest:
    X, y = make_classification(n_samples=4000, n_features=10, random_state=0)
    forest = RandomForestClassifier(n_estimators=100, random_state=0).fit(X[:2000], y[:2000])
    nodes = sum(t.tree_.node_count for t in forest.estimators_)
    assert nodes > DEFAULT_TREE_BLOCK_NODES, nodes  # large enough to be split
    path = tmp_path_factory.mktemp("big-forest") / "forest.onnx"
    path.write_bytes(
        convert_estimator(forest, _frame(X[:5]), precision="float").model.SerializeToString()
    )
    return BigForest(path, forest, X)


def test_untuned_predictor_blocks_only_large_calls(big_forest: BigForest) -> None:
    path, forest, X = big_forest.path, big_forest.forest, big_forest.X
    predictor = Predictor(path, intra_op_num_threads=1)
    assert predictor.settings_for(256).tree_block_nodes == 0
    # One thread per operator: the smaller blocks.
    assert predictor.settings_for(257).tree_block_nodes == ONE_THREAD_TREE_BLOCK_NODES
    # With several intra-op threads, blocks start at larger calls and are larger.
    threaded = Predictor(path, intra_op_num_threads=2)
    assert threaded.settings_for(MULTI_THREAD_BLOCK_MIN_ROWS - 1).tree_block_nodes == 0
    assert (
        threaded.settings_for(MULTI_THREAD_BLOCK_MIN_ROWS).tree_block_nodes
        == DEFAULT_TREE_BLOCK_NODES
    )
    large = predictor.predict(_frame(X[2000:]))
    plain = Predictor(path, settings=SessionSettings.onnxbridge_default()).predict(_frame(X[2000:]))
    assert plain is not None and large is not None
    np.testing.assert_array_equal(large.labels, plain.labels)
    np.testing.assert_allclose(large.probabilities, plain.probabilities, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(large.labels, forest.predict(X[2000:]))
    # The large call ran on a second session, the one with blocks.
    assert predictor.session_for(2000) is not predictor.session_for(1)


def test_a_model_without_trees_keeps_one_session(tmp_path) -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(n_samples=600, n_features=5, random_state=0)
    path = tmp_path / "linear.onnx"
    model = LogisticRegression().fit(X, y)
    path.write_bytes(convert_estimator(model, _frame(X[:5])).model.SerializeToString())
    predictor = Predictor(path)
    predictor.predict(_frame(X))
    assert predictor.session_for(600) is predictor.session_for(1)


def test_a_bad_block_size_is_refused() -> None:
    with pytest.raises(SessionSettingsError, match="tree_block_nodes must be an integer >= 0"):
        SessionSettings(tree_block_nodes=-1)


def test_open_sessions_opens_the_throughput_session_up_front(big_forest: BigForest) -> None:
    predictor = Predictor(big_forest.path, intra_op_num_threads=1)
    predictor.open_sessions()
    large = predictor.session_for(2000)
    assert large is not predictor.session_for(1)
    assert large is predictor.session_for(300)  # every call above 256 rows runs on it


def test_the_throughput_regime_serves_every_call_with_one_session(big_forest: BigForest) -> None:
    path, forest, X = big_forest.path, big_forest.forest, big_forest.X
    batch = Predictor(path, regime="throughput")
    # One thread per core: the smaller blocks on a one-core machine.
    expected = DEFAULT_TREE_BLOCK_NODES if available_cores() > 1 else ONE_THREAD_TREE_BLOCK_NODES
    assert batch.settings_for(1).tree_block_nodes == expected
    assert batch.session_for(1) is batch.session_for(5000)
    np.testing.assert_array_equal(batch.predict(X[2000:2003]).labels, forest.predict(X[2000:2003]))
    with pytest.raises(SessionSettingsError, match="regime must be None or 'throughput'"):
        Predictor(path, regime="latency")


def test_tuned_blocks_serve_large_calls_only(big_forest: BigForest, tmp_path: Path) -> None:
    import shutil

    from onnxbridge.runtime._settings import TuningSpec

    path = tmp_path / "tuned.onnx"
    shutil.copyfile(big_forest.path, path)
    blocked = SessionSettings(2, allow_spinning=False, tree_block_nodes=DEFAULT_TREE_BLOCK_NODES)
    spec = TuningSpec(
        latency=SessionSettings(1, allow_spinning=False), throughput=blocked, latency_max_rows=10
    )
    store_spec(path, spec)
    # 4096 rows with two threads (257 on a one-core machine, where they clamp to one).
    FROM_ROWS = blocks_from_rows(blocked.clamped())

    predictor = Predictor(path)
    # Above the boundary but below the rows blocks pay on: the throughput settings, unblocked.
    assert predictor.settings_for(100) == replace(blocked.clamped(), tree_block_nodes=0)
    assert predictor.settings_for(FROM_ROWS - 1).tree_block_nodes == 0
    assert predictor.settings_for(FROM_ROWS).tree_block_nodes == DEFAULT_TREE_BLOCK_NODES
    assert predictor.session_for(100) is not predictor.session_for(FROM_ROWS)
    forest, X = big_forest.forest, big_forest.X
    for rows in (100, FROM_ROWS):
        part = X[np.arange(rows) % len(X)]
        np.testing.assert_array_equal(predictor.predict(part).labels, forest.predict(part))
    # A first call too large for the bound path does not bind the later small calls to the
    # blocked session: they give exactly what the session of small calls gives.
    fresh = Predictor(path)
    large = X[np.arange(FROM_ROWS) % len(X)]
    np.testing.assert_array_equal(fresh.predict(large).labels, forest.predict(large))
    small = X[:100].astype(np.float32)
    expected = fresh.session_for(100).run(None, fresh.prepare(small))
    got = fresh.predict(small)
    np.testing.assert_array_equal(got.labels, expected[0])
    np.testing.assert_array_equal(got.probabilities, expected[1])
    # Batch scoring runs one session whatever the size: blocked for every call.
    batch = Predictor(path, regime="throughput")
    assert batch.settings_for(100).tree_block_nodes == DEFAULT_TREE_BLOCK_NODES
    assert batch.session_for(100) is batch.session_for(FROM_ROWS)


def test_tune_tries_blocks_sized_for_each_candidates_threads_per_operator() -> None:
    from onnxbridge.tune import Variants, stage_two_candidates

    winner = SessionSettings(2, allow_spinning=True)
    blocked = [
        v for v in stage_two_candidates(winner, 2, Variants.TREE_BLOCKS) if v.tree_block_nodes
    ]
    # Two threads per operator: the larger blocks; one thread per block side by side, or per
    # part of the rows: the smaller ones.
    assert blocked == [
        replace(winner, tree_block_nodes=DEFAULT_TREE_BLOCK_NODES),
        replace(
            winner,
            intra_op_num_threads=1,
            execution_mode="parallel",
            inter_op_num_threads=2,
            tree_block_nodes=ONE_THREAD_TREE_BLOCK_NODES,
        ),
        replace(winner, row_split=2, tree_block_nodes=ONE_THREAD_TREE_BLOCK_NODES),
    ]
    one = SessionSettings(1, allow_spinning=False)
    assert [v.tree_block_nodes for v in stage_two_candidates(one, 1, Variants.TREE_BLOCKS)] == [
        0,
        0,
        0,
        0,
        ONE_THREAD_TREE_BLOCK_NODES,
    ]
