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
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

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


def test_blocks_of_a_many_class_booster_keep_every_columns_base_score() -> None:
    # ai.onnx.ml 3, one round per class: a block of one tree writes one class's column, and
    # ONNX Runtime adds a base score only to the columns an operator's leaves write.
    X, y = make_classification(
        n_samples=2000, n_features=8, n_informative=5, n_classes=3, random_state=1
    )
    boosting = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0)
    boosting.fit(X[:1000], y[:1000])
    model = convert_estimator(
        boosting, _frame(X[:5]), precision="float", ml_opset=3, tree_block_nodes=0
    ).model.SerializeToString()
    blocked = block_tree_ensembles(model, 1)
    assert blocked is not None and len(_tree_ops(blocked)) == 9
    name = _session(model).get_inputs()[0].name
    feeds = {name: X[1000:].astype(np.float32)}
    plain, split = _session(model).run(None, feeds), _session(blocked).run(None, feeds)
    np.testing.assert_array_equal(split[0], plain[0])
    np.testing.assert_allclose(split[1], plain[1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(split[1], boosting.predict_proba(X[1000:]), atol=1e-5)


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


# ai.onnx.ml opset 5 TreeEnsemble -----------------------------------------------------------------


@dataclass(frozen=True)
class V5Tree:
    """One tree of a TreeEnsemble: a fitted scikit-learn ``tree_``, the target its leaves add
    to, the factor on its leaf values and the scikit-learn output they are taken from."""

    tree: object
    target: int = 0
    scale: float = 1.0
    column: int = 0


def _leaf_values(t: V5Tree, round_to: float | None) -> np.ndarray:
    values = t.tree.value[:, t.column, 0] * t.scale  # type: ignore[attr-defined]
    return values if round_to is None else np.round(values / round_to) * round_to


def _thresholds(threshold: np.ndarray, dtype: type) -> np.ndarray:
    """scikit-learn compares float32 values with float64 thresholds: in float32, the largest
    float32 at or below the threshold gives the same comparisons."""
    if dtype is np.float64:
        return threshold
    down = threshold.astype(np.float32)
    return np.where(down > threshold, np.nextafter(down, np.float32(-np.inf)), down)


def _v5_arrays(trees: list[V5Tree], dtype: type, round_to: float | None) -> dict[str, np.ndarray]:
    """The node and leaf arrays of ``trees``, each tree's splits and leaves contiguous."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("feat", "split", "t", "f", "tl", "fl")}
    roots, targets, weights = [], [], []
    n_nodes = n_leaves = 0
    for t in trees:
        left, right = t.tree.children_left, t.tree.children_right  # type: ignore[attr-defined]
        is_leaf = left == -1
        position = np.where(is_leaf, np.cumsum(is_leaf) - 1, np.cumsum(~is_leaf) - 1)
        position = position + np.where(is_leaf, n_leaves, n_nodes)
        splits = np.flatnonzero(~is_leaf)
        if splits.size == 0:  # a single leaf: one entry whose two branches name it
            splits, left, right = np.array([0]), np.array([0]), np.array([0])
        roots.append(n_nodes)
        parts["feat"].append(np.maximum(t.tree.feature[splits], 0))  # type: ignore[attr-defined]
        thresholds = t.tree.threshold[splits]  # type: ignore[attr-defined]
        parts["split"].append(_thresholds(thresholds, dtype).astype(dtype))
        parts["t"].append(position[left[splits]])
        parts["f"].append(position[right[splits]])
        parts["tl"].append(is_leaf[left[splits]].astype(np.int64))
        parts["fl"].append(is_leaf[right[splits]].astype(np.int64))
        weights.append(_leaf_values(t, round_to)[is_leaf])
        targets.append(np.full(int(is_leaf.sum()), t.target))
        n_nodes += len(splits)
        n_leaves += int(is_leaf.sum())
    arrays = {k: np.concatenate(v) for k, v in parts.items()}
    arrays["roots"] = np.array(roots)
    arrays["weights"] = np.concatenate(weights).astype(dtype)
    arrays["targets"] = np.concatenate(targets)
    return arrays


def _scatter(arrays: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The same trees with splits and leaves in random order (no tree contiguous any more)."""
    rng = np.random.default_rng(seed)
    n_nodes, n_leaves = len(arrays["t"]), len(arrays["weights"])
    node_to, leaf_to = rng.permutation(n_nodes), rng.permutation(n_leaves)
    out = dict(arrays)
    for key in ("feat", "split", "t", "f", "tl", "fl"):
        out[key] = np.empty_like(arrays[key])
        out[key][node_to] = arrays[key]
    for side, leaf in (("t", "tl"), ("f", "fl")):
        out[side][node_to] = np.where(
            arrays[leaf] == 1,
            leaf_to[arrays[side]],
            node_to[np.where(arrays[leaf] == 1, 0, arrays[side])],
        )
    for key in ("weights", "targets"):
        out[key] = np.empty_like(arrays[key])
        out[key][leaf_to] = arrays[key]
    out["roots"] = node_to[arrays["roots"]]
    return out


def _front_padding(arrays: dict[str, np.ndarray], at_least: int) -> int:
    """Unused leaves to put first so that no root has a leaf child and a split child with the
    same id (what ONNX Runtime would take for a single-leaf tree)."""
    r = arrays["roots"]
    mixed = arrays["tl"][r] != arrays["fl"][r]
    leaf = np.where(arrays["tl"][r] == 1, arrays["t"][r], arrays["f"][r])[mixed]
    node = np.where(arrays["tl"][r] == 1, arrays["f"][r], arrays["t"][r])[mixed]
    pad = at_least
    while np.any(leaf + pad == node):
        pad += 1
    return pad


def _v5_model(
    trees: list[V5Tree],
    n_features: int,
    dtype: type = np.float32,
    *,
    n_targets: int = 1,
    aggregate: int = 1,
    post_transform: int = 0,
    round_to: float | None = None,
    scatter: int | None = None,
    pad: int = 0,
) -> bytes:
    """``trees`` as one ai.onnx.ml opset-5 TreeEnsemble (SUM by default) reading ``X``.

    ``scatter`` shuffles splits and leaves with that seed; ``pad`` puts at least that many
    unused zero leaves first (more when a root needs them, see :func:`_front_padding`).
    """
    arrays = _v5_arrays(trees, dtype, round_to)
    if scatter is not None:
        arrays = _scatter(arrays, scatter)
    pad = _front_padding(arrays, pad)
    leaf_shift = (arrays["tl"], arrays["fl"])
    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        tree_roots=arrays["roots"].tolist(),
        nodes_featureids=arrays["feat"].tolist(),
        nodes_splits=numpy_helper.from_array(arrays["split"]),
        nodes_modes=numpy_helper.from_array(np.zeros(len(arrays["t"]), dtype=np.uint8)),
        nodes_truenodeids=(arrays["t"] + pad * leaf_shift[0]).tolist(),
        nodes_falsenodeids=(arrays["f"] + pad * leaf_shift[1]).tolist(),
        nodes_trueleafs=arrays["tl"].tolist(),
        nodes_falseleafs=arrays["fl"].tolist(),
        nodes_missing_value_tracks_true=[0] * len(arrays["t"]),
        leaf_targetids=[0] * pad + arrays["targets"].tolist(),
        leaf_weights=numpy_helper.from_array(
            np.concatenate([np.zeros(pad, dtype=dtype), arrays["weights"]])
        ),
        n_targets=n_targets,
        aggregate_function=aggregate,
        post_transform=post_transform,
    )
    elem = TensorProto.FLOAT if dtype is np.float32 else TensorProto.DOUBLE
    graph = helper.make_graph(
        [node],
        "trees",
        [helper.make_tensor_value_info("X", elem, [None, n_features])],
        [helper.make_tensor_value_info("Y", elem, [None, n_targets])],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()


def _v5_blocks(model: bytes) -> list[dict]:
    """The attributes of every TreeEnsemble node of ``model``."""
    from onnxbridge.runtime._rewrites.tree_blocks import attributes_of

    graph = onnx.load_model_from_string(model).graph
    return [attributes_of(n) for n in graph.node if n.op_type == "TreeEnsemble"]


def _assert_roots_readable(model: bytes) -> None:
    """Every block's roots: a single leaf is one entry naming the same leaf twice; any other
    root names two different ids."""
    for attrs in _v5_blocks(model):
        r = attrs["tree_roots"]
        t, f = attrs["nodes_truenodeids"][r], attrs["nodes_falsenodeids"][r]
        single = (attrs["nodes_trueleafs"][r] == 1) & (attrs["nodes_falseleafs"][r] == 1) & (t == f)
        assert np.all(single | (t != f)), (t, f)


def _run(model: bytes, X: np.ndarray) -> np.ndarray:
    return _session(model).run(None, {"X": X})[0]


def _regression_data(targets: int = 1) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(
        n_samples=3000, n_features=8, n_targets=targets, noise=5.0, random_state=0
    )
    return X.astype(np.float32), y  # scikit-learn compares float32 values


def _forest_trees(forest, targets: int, average: bool = False) -> list[V5Tree]:
    """One opset-5 tree per fitted tree and target (a leaf adds to one target only)."""
    scale = 1.0 if average else 1.0 / len(forest.estimators_)
    return [
        V5Tree(e.tree_, target=k, scale=scale, column=k)
        for e in forest.estimators_
        for k in range(targets)
    ]


def _constant_tree(value: float) -> V5Tree:
    """A single-leaf tree of weight ``value``."""
    return V5Tree(DecisionTreeRegressor().fit(np.zeros((2, 1)), [value, value]).tree_)


def _boosting_trees(boosting) -> list[V5Tree]:
    """The initial prediction as a single-leaf tree, then the stages."""
    init = float(boosting.init_.constant_.ravel()[0])
    stages = [V5Tree(e[0].tree_, scale=boosting.learning_rate) for e in boosting.estimators_]
    return [_constant_tree(init), *stages]


@pytest.mark.parametrize(
    ("kind", "dtype", "targets", "scatter"),
    [
        ("forest", np.float32, 1, None),
        ("forest", np.float64, 2, 3),
        ("boosting", np.float32, 1, 5),
        ("boosting", np.float64, 1, None),
    ],
    ids=[
        "forest-float32",
        "forest-float64-2-targets-scattered",
        "boosting-float32-scattered",
        "boosting-float64",
    ],
)
def test_v5_regressor_blocks_give_the_same_values(
    kind: str, dtype: type, targets: int, scatter
) -> None:
    X, y = _regression_data(targets)
    if kind == "forest":
        estimator = RandomForestRegressor(n_estimators=12, max_depth=9, random_state=0)
        trees = _forest_trees(estimator.fit(X[:1500], y[:1500]), targets)
    else:
        estimator = GradientBoostingRegressor(n_estimators=40, max_depth=4, random_state=0)
        trees = _boosting_trees(estimator.fit(X[:1500], y[:1500]))
    plain = _v5_model(trees, X.shape[1], dtype, n_targets=targets, scatter=scatter)
    blocked = block_tree_ensembles(plain, BLOCK)
    assert blocked is not None
    assert len(_v5_blocks(blocked)) > 2
    _assert_roots_readable(blocked)
    rows = X[1500:].astype(dtype)
    expected, got = _run(plain, rows), _run(blocked, rows)
    assert got.dtype == expected.dtype == dtype
    tolerance = 1e-5 if dtype is np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    # The hand-written model is the fitted estimator (float32 sums: a little looser).
    predicted = estimator.predict(X[1500:]).reshape(len(rows), targets)
    np.testing.assert_allclose(
        expected, predicted, rtol=1e-4 if dtype is np.float32 else 1e-9, atol=1e-3
    )


def _shapes(X: np.ndarray) -> list[V5Tree]:
    """Trees of every shape a root may have: a single leaf, two leaves, a leaf on one side and
    a split on the other (each way round), deeper trees."""
    rng = np.random.default_rng(0)
    x = X[:, 0]
    left_pure = np.where(x <= 0, 1.0, np.where(x <= 1, 2.0, 3.0))
    right_pure = np.where(x > 0, 1.0, np.where(x <= -1, 2.0, 3.0))
    fitted = [
        DecisionTreeRegressor(max_depth=1).fit(X, x),
        DecisionTreeRegressor(max_depth=2).fit(X, left_pure),
        DecisionTreeRegressor(max_depth=2).fit(X, right_pure),
    ]
    shapes = [V5Tree(t.tree_) for t in fitted]
    assert [t.tree.node_count for t in shapes] == [3, 5, 5]  # type: ignore[attr-defined]
    deep = [
        DecisionTreeRegressor(max_depth=5, random_state=i).fit(X, rng.normal(size=len(X)))
        for i in range(6)
    ]
    trees = [_constant_tree(1.5), *shapes, _constant_tree(-0.25), *(V5Tree(t.tree_) for t in deep)]
    return trees + shapes[::-1] + [_constant_tree(4.0)]


def _exact_sum(trees: list[V5Tree], X: np.ndarray, round_to: float) -> np.ndarray:
    """The trees' scores on ``X``, added in float64 (exact for these values)."""
    total = np.zeros(len(X))
    for t in trees:
        total += _leaf_values(t, round_to)[t.tree.apply(X.astype(np.float32))]  # type: ignore[attr-defined]
    return total


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scatter", [None, 11], ids=["in-tree-order", "scattered"])
def test_v5_blocks_are_exact_where_the_order_of_sums_cannot_matter(dtype: type, scatter) -> None:
    X, _ = _regression_data()
    trees = _shapes(X[:1000])
    # Leaf values in quarters: every sum is exact, in any order.
    plain = _v5_model(trees, X.shape[1], dtype, round_to=0.25, scatter=scatter, pad=3)
    for max_nodes in (4, 9, 30):
        blocked = block_tree_ensembles(plain, max_nodes)
        assert blocked is not None
        assert len(_v5_blocks(blocked)) > 2
        _assert_roots_readable(blocked)
        rows = X[1000:].astype(dtype)
        got = _run(blocked, rows)
        np.testing.assert_array_equal(got, _run(plain, rows))
        np.testing.assert_array_equal(got.ravel(), _exact_sum(trees, X[1000:], 0.25).astype(dtype))


def test_v5_blocks_pad_leaves_where_a_root_would_read_as_a_single_leaf() -> None:
    X, _ = _regression_data()
    shapes = _shapes(X[:1000])
    stump, left_pure, deep = shapes[1], shapes[2], shapes[5]
    # Blocks [deep] and [stump, left_pure]: in the second, the leaves of the stump come first, so
    # the left-pure root's leaf child (leaf 2) and its split child (split 2) share an id.
    plain = _v5_model([deep, stump, left_pure], X.shape[1], round_to=0.25)
    blocked = block_tree_ensembles(plain, 8)
    assert blocked is not None
    first, second = _v5_blocks(blocked)
    assert len(first["tree_roots"]) == 1
    assert len(second["tree_roots"]) == 2
    _assert_roots_readable(blocked)
    named = np.concatenate(
        [
            second["nodes_truenodeids"][second["nodes_trueleafs"] == 1],
            second["nodes_falsenodeids"][second["nodes_falseleafs"] == 1],
        ]
    )
    unused = np.setdiff1d(np.arange(len(second["leaf_weights"])), named)
    assert len(unused) > 0 and np.all(second["leaf_weights"][unused] == 0)
    rows = X[1000:]
    np.testing.assert_array_equal(_run(blocked, rows), _run(plain, rows))


def test_v5_average_blocks_divide_by_every_tree() -> None:
    X, y = _regression_data()
    forest = RandomForestRegressor(n_estimators=12, max_depth=8, random_state=0).fit(
        X[:1500], y[:1500]
    )
    trees = _forest_trees(forest, 1, average=True)
    plain = _v5_model(trees, X.shape[1], aggregate=0)
    blocked = block_tree_ensembles(plain, BLOCK)
    assert blocked is not None
    assert len(_v5_blocks(blocked)) > 2
    rows = X[1500:]
    np.testing.assert_allclose(_run(blocked, rows), _run(plain, rows), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(
        _run(plain, rows).ravel(), forest.predict(rows), rtol=1e-4, atol=1e-3
    )
    # Leaf values in quarters: the sums are exact, and the one division the same.
    exact = _v5_model(trees, X.shape[1], aggregate=0, round_to=0.25)
    blocked = block_tree_ensembles(exact, BLOCK)
    assert blocked is not None
    np.testing.assert_array_equal(_run(blocked, rows), _run(exact, rows))


def _with_membership(model: bytes) -> bytes:
    """``model`` with its first split a set-membership test of the same outcome on its data."""
    proto = onnx.load_model_from_string(model)
    node = proto.graph.node[0]
    for a in node.attribute:
        if a.name == "nodes_modes":
            modes = numpy_helper.to_array(a.t).copy()
            modes[0] = 6
            a.t.CopyFrom(numpy_helper.from_array(modes, name=""))
    node.attribute.append(
        helper.make_attribute(
            "membership_values", numpy_helper.from_array(np.array([0.0, np.nan], dtype=np.float32))
        )
    )
    return proto.SerializeToString()


def test_v5_operators_whose_result_would_change_or_small_are_left_alone() -> None:
    X, y = _regression_data()
    forest = RandomForestRegressor(n_estimators=6, max_depth=6, random_state=0).fit(
        X[:1000], y[:1000]
    )
    trees = _forest_trees(forest, 1)
    plain = _v5_model(trees, X.shape[1])
    assert block_tree_ensembles(plain, DEFAULT_TREE_BLOCK_NODES) is None  # one block
    assert block_tree_ensembles(plain, 1) is not None  # one tree per block
    assert block_tree_ensembles(_v5_model(trees, X.shape[1], post_transform=2), 1) is None
    assert block_tree_ensembles(_v5_model(trees, X.shape[1], aggregate=3), 1) is None  # MAX
    membership = _with_membership(plain)
    _run(membership, X[:5])  # a valid model
    assert block_tree_ensembles(membership, 1) is None


def test_a_predictor_runs_large_calls_on_v5_blocks() -> None:
    X, y = _regression_data()
    forest = RandomForestRegressor(n_estimators=20, random_state=0).fit(X[:2000], y[:2000])
    model = _v5_model(_forest_trees(forest, 1), X.shape[1])
    assert sum(t.tree_.node_count for t in forest.estimators_) > DEFAULT_TREE_BLOCK_NODES
    predictor = Predictor(model, intra_op_num_threads=1)
    assert predictor.settings_for(2000).tree_block_nodes == ONE_THREAD_TREE_BLOCK_NODES
    # The large call ran on a second session, the one with blocks.
    assert predictor.session_for(2000) is not predictor.session_for(1)
    rows = np.ascontiguousarray(X[np.arange(2000) % len(X)])
    large = predictor.run({"X": rows})[0]
    np.testing.assert_allclose(large, _run(model, rows), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(large.ravel(), forest.predict(rows), rtol=1e-4, atol=1e-3)
    # A forest the blocks would not keep (a logistic on the sum) runs on one session.
    squashed = _v5_model(_forest_trees(forest, 1), X.shape[1], post_transform=2)
    kept = Predictor(squashed, intra_op_num_threads=1)
    assert kept.session_for(2000) is kept.session_for(1)


def _tiny_v5(
    roots: list[int], splits: list[tuple[float, int, int, int, int]], weights: list[float]
) -> bytes:
    """A TreeEnsemble on one feature from ``(threshold, true id, false id, true is a leaf,
    false is a leaf)`` per split."""
    threshold, true_ids, false_ids, true_leafs, false_leafs = (
        list(c) for c in zip(*splits, strict=True)
    )
    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        tree_roots=roots,
        nodes_featureids=[0] * len(splits),
        nodes_splits=numpy_helper.from_array(np.array(threshold, dtype=np.float32)),
        nodes_modes=numpy_helper.from_array(np.zeros(len(splits), dtype=np.uint8)),
        nodes_truenodeids=true_ids,
        nodes_falsenodeids=false_ids,
        nodes_trueleafs=true_leafs,
        nodes_falseleafs=false_leafs,
        leaf_targetids=[0] * len(weights),
        leaf_weights=numpy_helper.from_array(np.array(weights, dtype=np.float32)),
        n_targets=1,
    )
    graph = helper.make_graph(
        [node],
        "tiny",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10).SerializeToString()


def test_v5_leaves_named_by_several_trees_go_to_each_block_and_shared_splits_stay() -> None:
    X = np.array([[-2.0], [0.0], [0.7], [2.0], [5.0]], dtype=np.float32)
    # Three stumps whose false branches all end in leaf 1; splits 1 and 3: no root reaches them.
    shared_leaf = _tiny_v5(
        [0, 2, 4],
        [
            (0.5, 0, 1, 1, 1),
            (9.0, 3, 3, 1, 1),
            (1.5, 2, 1, 1, 1),
            (0.0, 0, 0, 1, 1),
            (-1.0, 3, 1, 1, 1),
        ],
        [1.0, 10.0, 100.0, 1000.0],
    )
    blocked = block_tree_ensembles(shared_leaf, 3)
    assert blocked is not None
    assert [len(b["tree_roots"]) for b in _v5_blocks(blocked)] == [1, 1, 1]
    np.testing.assert_array_equal(_run(blocked, X), _run(shared_leaf, X))
    # Two trees whose roots lead to the same split: no blocks could hold it once per tree.
    shared_split = _tiny_v5(
        [0, 1],
        [(0.5, 0, 2, 1, 0), (1.5, 1, 2, 1, 0), (3.0, 2, 3, 1, 1)],
        [1.0, 10.0, 100.0, 1000.0],
    )
    _run(shared_split, X)  # a model ONNX Runtime runs
    assert block_tree_ensembles(shared_split, 1) is None
