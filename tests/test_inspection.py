"""Tests for onnxbridge._inspection and its rich view, on real models converted with skl2onnx."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from rich.console import Console
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType
from sklearn.datasets import load_iris
from sklearn.ensemble import (
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor

from onnxbridge._cli._inspect_view import render_inspection
from onnxbridge._inspection import (
    ModelSummary,
    TreeEnsembleInfo,
    ValueInfo,
    format_type,
    inspect_model,
)
from onnxbridge.convert._registry import upstream_converters
from onnxbridge.errors import OnnxModelError

INITIAL_TYPES = [("input", FloatTensorType([None, 4]))]
TARGET_OPSET = {"": 15, "ai.onnx.ml": 3}


@pytest.fixture(scope="module")
def iris_train() -> tuple[np.ndarray, np.ndarray]:
    """The reference workflow's training split: Iris, 70/30, random_state=42."""
    X, y = load_iris(return_X_y=True)
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.3, random_state=42)
    return X_train, y_train


@pytest.fixture(scope="module")
def forest(iris_train: tuple[np.ndarray, np.ndarray]) -> RandomForestClassifier:
    X_train, y_train = iris_train
    return RandomForestClassifier(n_estimators=10, random_state=42).fit(X_train, y_train)


@pytest.fixture(scope="module", autouse=True)
def _skl2onnx_own_converters():
    """These tests inspect files as skl2onnx itself writes them, whatever onnxbridge installed
    into skl2onnx's registry earlier in the process."""
    with upstream_converters():
        yield


@pytest.fixture(scope="module")
def forest_path(forest: RandomForestClassifier, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference model: the Iris forest without ZipMap."""
    onx = convert_sklearn(
        forest,
        initial_types=INITIAL_TYPES,
        options={id(forest): {"zipmap": False}},
        target_opset=TARGET_OPSET,
    )
    path = tmp_path_factory.mktemp("models") / "rf.onnx"
    onnx.save(onx, path)
    return path


@pytest.fixture(scope="module")
def forest_summary(forest_path: Path) -> ModelSummary:
    return inspect_model(forest_path)


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, path)
    return path


# --- the reference forest -------------------------------------------------------------------


def test_file_facts(forest_path: Path, forest_summary: ModelSummary) -> None:
    data = forest_path.read_bytes()
    assert forest_summary.path == str(forest_path)
    assert forest_summary.file_size_bytes == len(data)
    assert forest_summary.sha256 == hashlib.sha256(data).hexdigest()


def test_valid_and_loads(forest_summary: ModelSummary) -> None:
    assert forest_summary.valid is True
    assert forest_summary.checker_message is None
    assert forest_summary.loads_in_onnxruntime is True
    assert forest_summary.onnxruntime_error is None


def test_producer_and_versions(forest_summary: ModelSummary) -> None:
    import skl2onnx

    assert forest_summary.producer_name == "skl2onnx"
    assert forest_summary.producer_version == skl2onnx.__version__
    assert forest_summary.ir_version > 0
    assert forest_summary.model_version == 0
    assert forest_summary.doc_string is None


def test_opsets_are_deduplicated(forest_path: Path, forest_summary: ModelSummary) -> None:
    raw_domains = [opset.domain for opset in onnx.load(forest_path).opset_import]
    # skl2onnx imports the default domain twice; the summary lists it once, as "ai.onnx".
    assert raw_domains.count("") == 2
    assert forest_summary.opsets == {"ai.onnx": 15, "ai.onnx.ml": 1}
    assert list(forest_summary.opsets) == ["ai.onnx", "ai.onnx.ml"]


def test_input_and_output_types(forest_summary: ModelSummary) -> None:
    assert forest_summary.inputs == [ValueInfo(name="input", type="float32[N,4]")]
    assert forest_summary.outputs == [
        ValueInfo(name="label", type="int64[N]"),
        ValueInfo(name="probabilities", type="float32[N,3]"),
    ]


def test_operator_counts(forest_summary: ModelSummary) -> None:
    assert forest_summary.operators == {"ai.onnx.ml.TreeEnsembleClassifier": 1}
    assert forest_summary.node_count == 1
    assert forest_summary.metadata == {}


def test_tree_ensemble_matches_sklearn(
    forest: RandomForestClassifier, forest_summary: ModelSummary
) -> None:
    trees = [estimator.tree_ for estimator in forest.estimators_]
    assert forest_summary.tree_ensembles == [
        TreeEnsembleInfo(
            node_name="TreeEnsembleClassifier",
            op_type="ai.onnx.ml.TreeEnsembleClassifier",
            n_trees=forest.n_estimators,
            n_nodes=sum(tree.node_count for tree in trees),
            n_leaves=sum(tree.n_leaves for tree in trees),
            max_depth=max(tree.max_depth for tree in trees),
            n_targets=3,
            post_transform="NONE",
            aggregate_function=None,
        )
    ]
    # The known answer for the reference forest, so a silent change on both sides shows up.
    (info,) = forest_summary.tree_ensembles
    assert (info.n_nodes, info.n_leaves, info.max_depth) == (160, 85, 6)


def test_to_dict_round_trips_through_json(forest_summary: ModelSummary) -> None:
    as_dict = forest_summary.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert list(as_dict) == [
        "path",
        "file_size_bytes",
        "sha256",
        "valid",
        "checker_message",
        "loads_in_onnxruntime",
        "onnxruntime_error",
        "ir_version",
        "producer_name",
        "producer_version",
        "model_version",
        "doc_string",
        "graph_name",
        "opsets",
        "inputs",
        "outputs",
        "node_count",
        "operators",
        "metadata",
        "tree_ensembles",
        "external_data",
    ]
    assert as_dict["external_data"] == {}
    assert as_dict["inputs"] == [{"name": "input", "type": "float32[N,4]"}]
    assert as_dict["tree_ensembles"][0]["n_trees"] == 10


# --- other models ---------------------------------------------------------------------------


def test_zipmap_output_is_a_sequence_of_maps(
    forest: RandomForestClassifier, tmp_path: Path
) -> None:
    onx = convert_sklearn(forest, initial_types=INITIAL_TYPES, target_opset=TARGET_OPSET)
    summary = inspect_model(_save(onx, tmp_path / "rf_zipmap.onnx"))

    assert summary.outputs == [
        ValueInfo(name="output_label", type="int64[N]"),
        ValueInfo(name="output_probability", type="seq(map(int64,float32))"),
    ]
    assert summary.operators == {
        "Cast": 1,
        "ai.onnx.ml.TreeEnsembleClassifier": 1,
        "ai.onnx.ml.ZipMap": 1,
    }
    assert summary.node_count == 3
    assert summary.loads_in_onnxruntime is True


def test_scaler_logistic_pipeline_operators(
    iris_train: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    X_train, y_train = iris_train
    pipeline = make_pipeline(StandardScaler(), LogisticRegression()).fit(X_train, y_train)
    onx = convert_sklearn(
        pipeline,
        initial_types=INITIAL_TYPES,
        options={id(pipeline): {"zipmap": False}},
        target_opset=TARGET_OPSET,
    )
    summary = inspect_model(_save(onx, tmp_path / "scaler_lr.onnx"))

    assert summary.operators == {
        "ai.onnx.ml.LinearClassifier": 1,
        "ai.onnx.ml.Normalizer": 1,
        "ai.onnx.ml.Scaler": 1,
    }
    assert summary.node_count == 3
    assert summary.tree_ensembles == []
    assert summary.valid is True
    assert summary.loads_in_onnxruntime is True


def test_gradient_boosting_counts_one_tree_per_class_and_stage(
    iris_train: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    X_train, y_train = iris_train
    gbc = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X_train, y_train)
    onx = convert_sklearn(
        gbc,
        initial_types=INITIAL_TYPES,
        options={id(gbc): {"zipmap": False}},
        target_opset=TARGET_OPSET,
    )
    summary = inspect_model(_save(onx, tmp_path / "gbc.onnx"))
    trees = [estimator.tree_ for estimator in gbc.estimators_.ravel()]

    (info,) = summary.tree_ensembles
    assert info.n_trees == 15 == len(trees)
    assert info.n_nodes == sum(tree.node_count for tree in trees)
    assert info.n_leaves == sum(tree.n_leaves for tree in trees)
    assert info.max_depth == max(tree.max_depth for tree in trees)
    assert info.post_transform == "SOFTMAX"


def test_root_only_trees_have_depth_zero(
    iris_train: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    X_train, _ = iris_train
    # A constant target leaves every tree as a single leaf.
    forest = RandomForestRegressor(n_estimators=3, random_state=0).fit(
        X_train, np.full(len(X_train), 2.5)
    )
    assert [estimator.tree_.node_count for estimator in forest.estimators_] == [1, 1, 1]
    onx = convert_sklearn(forest, initial_types=INITIAL_TYPES, target_opset=TARGET_OPSET)
    summary = inspect_model(_save(onx, tmp_path / "constant.onnx"))

    (info,) = summary.tree_ensembles
    assert (info.n_trees, info.n_nodes, info.n_leaves, info.max_depth) == (3, 3, 3, 0)
    assert info.op_type == "ai.onnx.ml.TreeEnsembleRegressor"
    assert info.n_targets == 1
    # skl2onnx averages by scaling the leaf weights by 1/n_trees and summing.
    assert info.aggregate_function == "SUM"


def test_tree_attributes_stored_as_tensors(forest: RandomForestClassifier, tmp_path: Path) -> None:
    onx = convert_sklearn(
        forest,
        initial_types=INITIAL_TYPES,
        options={id(forest): {"zipmap": False}},
        target_opset=TARGET_OPSET,
    )
    node = onx.graph.node[0]
    for name in ("nodes_treeids", "nodes_nodeids", "nodes_truenodeids", "nodes_falsenodeids"):
        (attr,) = [a for a in node.attribute if a.name == name]
        values = np.array(attr.ints, dtype=np.int64)
        node.attribute.remove(attr)
        node.attribute.append(
            helper.make_attribute(f"{name}_as_tensor", numpy_helper.from_array(values))
        )
    summary = inspect_model(_save(onx, tmp_path / "as_tensor.onnx"))

    # The operator's schema has no such attributes: the checker says so, the summary still counts.
    assert summary.valid is False
    assert "nodes_treeids_as_tensor" in (summary.checker_message or "")
    (info,) = summary.tree_ensembles
    trees = [estimator.tree_ for estimator in forest.estimators_]
    assert info.n_trees == 10
    assert info.n_nodes == sum(tree.node_count for tree in trees)
    assert info.max_depth == max(tree.max_depth for tree in trees)


def _tree_ensemble_v5(trees: list) -> onnx.ModelProto:
    """Write scikit-learn regression trees as one ai.onnx.ml opset-5 TreeEnsemble (average)."""
    features: list[int] = []
    splits: list[float] = []
    true_ids: list[int] = []
    false_ids: list[int] = []
    true_leafs: list[int] = []
    false_leafs: list[int] = []
    roots: list[int] = []
    leaf_weights: list[float] = []
    for tree in trees:
        is_leaf = tree.children_left == -1
        leaf_index = {}
        for i in np.flatnonzero(is_leaf):
            leaf_index[i] = len(leaf_weights)
            leaf_weights.append(float(tree.value[i, 0, 0]))
        roots.append(len(features))
        if tree.node_count == 1:
            # The operator's encoding of a single-leaf tree: one split, both branches to the leaf.
            features.append(0)
            splits.append(0.0)
            true_ids.append(leaf_index[0])
            false_ids.append(leaf_index[0])
            true_leafs.append(1)
            false_leafs.append(1)
            continue
        splits_here = np.flatnonzero(~is_leaf)
        split_index = {node: len(features) + k for k, node in enumerate(splits_here)}
        for node in splits_here:
            features.append(int(tree.feature[node]))
            splits.append(float(tree.threshold[node]))
            for child, ids, leafs in (
                (tree.children_left[node], true_ids, true_leafs),
                (tree.children_right[node], false_ids, false_leafs),
            ):
                leafs.append(int(is_leaf[child]))
                ids.append(leaf_index[child] if is_leaf[child] else split_index[child])
    node = helper.make_node(
        "TreeEnsemble",
        ["input"],
        ["variable"],
        domain="ai.onnx.ml",
        nodes_featureids=features,
        nodes_splits=numpy_helper.from_array(np.array(splits, dtype=np.float64)),
        nodes_modes=numpy_helper.from_array(np.zeros(len(features), dtype=np.uint8)),
        nodes_truenodeids=true_ids,
        nodes_falsenodeids=false_ids,
        nodes_trueleafs=true_leafs,
        nodes_falseleafs=false_leafs,
        leaf_targetids=[0] * len(leaf_weights),
        leaf_weights=numpy_helper.from_array(np.array(leaf_weights, dtype=np.float64)),
        tree_roots=roots,
        n_targets=1,
        aggregate_function=0,  # AVERAGE
        post_transform=0,  # NONE
    )
    graph = helper.make_graph(
        [node],
        "forest",
        [helper.make_tensor_value_info("input", TensorProto.DOUBLE, ["batch", 4])],
        [helper.make_tensor_value_info("variable", TensorProto.DOUBLE, ["batch", 1])],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    )


def test_tree_ensemble_opset5_matches_sklearn(
    iris_train: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    X_train, y_train = iris_train
    forest = RandomForestRegressor(n_estimators=4, random_state=0).fit(X_train, y_train)
    leaf_only = DecisionTreeRegressor(random_state=0).fit(X_train, np.full(len(X_train), 2.5))
    estimators = [*forest.estimators_, leaf_only]
    trees = [estimator.tree_ for estimator in estimators]
    path = _save(_tree_ensemble_v5(trees), tmp_path / "v5.onnx")

    # The hand-written graph is the forest: ONNX Runtime gives scikit-learn's predictions.
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (predicted,) = session.run(None, {"input": X_train})
    expected = np.mean([estimator.predict(X_train) for estimator in estimators], axis=0)
    np.testing.assert_allclose(predicted[:, 0], expected, rtol=0, atol=1e-12)

    summary = inspect_model(path)
    assert summary.valid is True
    assert summary.loads_in_onnxruntime is True
    assert summary.opsets == {"ai.onnx": 21, "ai.onnx.ml": 5}
    assert summary.inputs == [ValueInfo(name="input", type="float64[batch,4]")]
    assert summary.tree_ensembles == [
        TreeEnsembleInfo(
            node_name="",
            op_type="ai.onnx.ml.TreeEnsemble",
            n_trees=5,
            n_nodes=sum(tree.node_count for tree in trees),
            n_leaves=sum(tree.n_leaves for tree in trees),
            max_depth=max(tree.max_depth for tree in trees),
            n_targets=1,
            post_transform="NONE",
            aggregate_function="AVERAGE",
        )
    ]


def test_subgraph_nodes_are_counted(tmp_path: Path) -> None:
    def branch(name: str, op_type: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node(op_type, ["x"], [f"{name}_y"])],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [3])],
        )

    node = helper.make_node(
        "If",
        ["cond"],
        ["y"],
        then_branch=branch("then", "Neg"),
        else_branch=branch("else", "Abs"),
    )
    graph = helper.make_graph(
        [node],
        "with_if",
        [
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    summary = inspect_model(_save(model, tmp_path / "if.onnx"))

    assert summary.node_count == 3
    assert summary.operators == {"Abs": 1, "If": 1, "Neg": 1}
    assert summary.inputs == [
        ValueInfo(name="cond", type="bool[]"),
        ValueInfo(name="x", type="float32[3]"),
    ]
    assert summary.loads_in_onnxruntime is True


def test_metadata_and_doc_string(forest_path: Path, tmp_path: Path) -> None:
    model = onnx.load(forest_path)
    schema = {"features": ["a", "b", "c", "d"], "classes": [0, 1, 2]}
    helper.set_model_props(model, {"onnxbridge.schema": json.dumps(schema, indent=2), "k": "v"})
    model.doc_string = "Iris forest"
    model.model_version = 3
    summary = inspect_model(_save(model, tmp_path / "meta.onnx"))

    assert summary.metadata == {"onnxbridge.schema": json.dumps(schema, indent=2), "k": "v"}
    assert summary.doc_string == "Iris forest"
    assert summary.model_version == 3


@pytest.mark.parametrize(
    ("type_proto", "expected"),
    [
        (helper.make_tensor_type_proto(TensorProto.FLOAT, [None, 4]), "float32[N,4]"),
        (helper.make_tensor_type_proto(TensorProto.DOUBLE, ["batch", 4]), "float64[batch,4]"),
        (helper.make_tensor_type_proto(TensorProto.STRING, [None, 1]), "string[N,1]"),
        (helper.make_tensor_type_proto(TensorProto.INT64, []), "int64[]"),
        (helper.make_tensor_type_proto(TensorProto.FLOAT, None), "float32"),
        (helper.make_tensor_type_proto(TensorProto.UNDEFINED, None), "?"),
        (
            helper.make_sequence_type_proto(
                helper.make_map_type_proto(
                    TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, None)
                )
            ),
            "seq(map(string,float32))",
        ),
        (
            helper.make_optional_type_proto(
                helper.make_tensor_type_proto(TensorProto.BOOL, [None])
            ),
            "optional(bool[N])",
        ),
        (helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, [2, 3]), "sparse(float32[2,3])"),
        (onnx.TypeProto(), "?"),
    ],
)
def test_format_type(type_proto: onnx.TypeProto, expected: str) -> None:
    assert format_type(type_proto) == expected


# --- invalid but parseable: summarised, not raised --------------------------------------------


def test_unknown_operator_is_reported_not_raised(forest_path: Path, tmp_path: Path) -> None:
    model = onnx.load(forest_path)
    model.graph.node[0].op_type = "NoSuchOp"
    summary = inspect_model(_save(model, tmp_path / "bad_op.onnx"))

    assert summary.valid is False
    assert "No Op registered for NoSuchOp" in (summary.checker_message or "")
    assert "\n" not in (summary.checker_message or "")
    assert summary.loads_in_onnxruntime is False
    assert "INVALID_GRAPH" in (summary.onnxruntime_error or "")
    assert "\n" not in (summary.onnxruntime_error or "")
    assert summary.operators == {"ai.onnx.ml.NoSuchOp": 1}


def test_float64_tree_graph_checks_but_does_not_load(
    iris_train: tuple[np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    X_train, y_train = iris_train
    forest = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0)
    forest.fit(X_train, y_train)
    onx = convert_sklearn(
        forest,
        initial_types=[("input", DoubleTensorType([None, 4]))],
        target_opset=TARGET_OPSET,
    )
    summary = inspect_model(_save(onx, tmp_path / "rf64.onnx"))

    # skl2onnx's float64 tree graphs pass the checker but ORT rejects them.
    assert summary.valid is True
    assert summary.loads_in_onnxruntime is False
    assert "does not match expected type" in (summary.onnxruntime_error or "")
    assert summary.inputs == [ValueInfo(name="input", type="float64[N,4]")]
    (info,) = summary.tree_ensembles
    assert info.max_depth == 3
    assert info.n_nodes == sum(e.tree_.node_count for e in forest.estimators_)


# --- not an ONNX model: OnnxModelError --------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OnnxModelError, match=r"nope\.onnx'.*no such file; check the path"):
        inspect_model(tmp_path / "nope.onnx")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(OnnxModelError, match=r"is a directory, not a file; pass .*\.onnx file"):
        inspect_model(tmp_path)


def test_file_over_2_gib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.onnx"
    with path.open("wb") as fh:
        fh.truncate(3 * 2**30)  # sparse: no disk used
    with pytest.raises(
        OnnxModelError, match=r"huge\.onnx': it is 3221225472 bytes, over the 2147483647 bytes"
    ) as info:
        inspect_model(path)
    assert "external data" in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(OnnxModelError, match=r"empty\.onnx'.*the file is empty \(0 bytes\)"):
        inspect_model(path)


def test_truncated_file(forest_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "truncated.onnx"
    path.write_bytes(forest_path.read_bytes()[:3000])
    with pytest.raises(
        OnnxModelError, match=r"truncated\.onnx' \(3000 bytes\) is not an ONNX model"
    ) as info:
        inspect_model(path)
    assert "protobuf parse failed" in str(info.value)
    assert "onnxbridge convert" in str(info.value)
    assert info.value.__cause__ is not None


def test_csv_file(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("sepal_length,sepal_width\n5.1,3.5\n4.9,3.0\n")
    with pytest.raises(OnnxModelError, match=r"data\.csv'.*is not an ONNX model") as info:
        inspect_model(path)
    assert "\n" not in str(info.value)


def test_protobuf_without_onnx_fields(tmp_path: Path) -> None:
    path = tmp_path / "other.onnx"
    # Field 100, varint 1: valid protobuf, but nothing an ONNX ModelProto knows.
    path.write_bytes(b"\xa0\x06\x01")
    with pytest.raises(OnnxModelError, match="no IR version, opset or graph"):
        inspect_model(path)


def test_unreadable_tree_attributes(forest_path: Path, tmp_path: Path) -> None:
    model = onnx.load(forest_path)
    node = model.graph.node[0]
    (attr,) = [a for a in node.attribute if a.name == "nodes_treeids"]
    node.attribute.remove(attr)
    node.attribute.append(helper.make_attribute("nodes_treeids", ["a", "b"]))
    path = _save(model, tmp_path / "garbled.onnx")
    with pytest.raises(
        OnnxModelError, match=r"TreeEnsembleClassifier node .* tree attributes cannot be read"
    ):
        inspect_model(path)


# --- the rich view ---------------------------------------------------------------------------


def _render(summary: ModelSummary) -> str:
    buffer = io.StringIO()
    render_inspection(summary, Console(file=buffer, width=100))
    return buffer.getvalue()


def test_render_shows_key_facts(forest_summary: ModelSummary) -> None:
    text = _render(forest_summary)
    for expected in (
        "rf.onnx",
        forest_summary.sha256,
        "skl2onnx",
        "ai.onnx 15, ai.onnx.ml 1",
        "float32[N,4]",
        "int64[N]",
        "float32[N,3]",
        "probabilities",
        "ai.onnx.ml.TreeEnsembleClassifier",
    ):
        assert expected in text, expected
    rows = [line.split() for line in text.splitlines()]
    assert ["ai.onnx.ml.TreeEnsembleClassifier", "1"] in rows  # operators table
    # The tree ensembles table: two-line headers, the operator without its domain.
    assert ["Max", "Post-"] in rows
    assert ["Operator", "Trees", "Nodes", "Leaves", "depth", "Targets", "transform"] in rows
    assert ["TreeEnsembleClassifier", "10", "160", "85", "6", "3", "NONE"] in rows
    assert max(len(line) for line in text.splitlines()) <= 100


def test_render_invalid_model_and_metadata(forest_path: Path, tmp_path: Path) -> None:
    model = onnx.load(forest_path)
    model.graph.node[0].op_type = "NoSuchOp"
    schema = {"features": ["a", "b"], "classes": [0, 1, 2]}
    helper.set_model_props(
        model, {"onnxbridge.schema": json.dumps(schema, indent=2), "long": "x" * 1000}
    )
    model.doc_string = "Iris [forest]"
    text = _render(inspect_model(_save(model, tmp_path / "bad.onnx")))

    assert "no — No Op registered for NoSuchOp" in text
    assert "INVALID_GRAPH" in text
    # JSON metadata is re-printed on one line; long values are cut with an ellipsis.
    assert '{"features": ["a", "b"], "classes": [0, 1, 2]}' in text
    squashed = "".join(text.split())
    assert "x" * 299 + "…" in squashed
    assert "x" * 300 not in squashed
    # Text from the file is not parsed as rich markup.
    assert "Iris [forest]" in text
