"""onnxbridge's reference kernels against ONNX Runtime, on real converted models.

Tree ensembles are onnxbridge's conversions; SVMClassifier nodes come from skl2onnx's own
converter (onnxbridge writes SVMs with standard operators), as in files made elsewhere.

``onnx.reference`` cannot run float64 tree ensembles (``*_as_tensor`` attributes) and couples
multiclass SVM probabilities otherwise than ONNX Runtime and scikit-learn; onnxbridge's kernels
(``onnxbridge.validate._reference_ops``) take those nodes. Each test checks that plain
``onnx.reference`` fails (or differs) on the model, that the kernel is the one that runs it, and
that it gives ONNX Runtime's labels exactly and its values within a tight tolerance; the last
ones check that ``validate`` then compares every runtime pair on every probe set.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import catboost
import lightgbm
import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
import xgboost
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from scipy.special import ndtri
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.svm import SVC, NuSVC

from cli_support import run
from onnxbridge import convert_estimator, save_estimator, validate_model
from onnxbridge.convert._registry import upstream_converters
from onnxbridge.validate._reference_ops import (
    SVMClassifier,
    TreeEnsemble,
    TreeEnsembleClassifier,
    TreeEnsembleRegressor,
    reference_kernels,
)

# SVC(probability=True) is deprecated in scikit-learn 1.9 but still fitted and converted
# (skl2onnx reads its deprecated probA_ / probB_).
pytestmark = [
    pytest.mark.filterwarnings("ignore:The `probability` parameter was deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore:Attribute `prob[AB]_` was deprecated:FutureWarning"),
]

ML = "ai.onnx.ml"
COLUMNS = [f"f{i}" for i in range(6)]


def _frame(x: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(x, columns=COLUMNS[: x.shape[1]])


def _with_missing(x: np.ndarray, seed: int = 0) -> np.ndarray:
    x = x.copy()
    x[np.random.RandomState(seed).rand(*x.shape) < 0.15] = np.nan
    return x


def _classes(n: int = 3) -> tuple[np.ndarray, np.ndarray]:
    x, y = make_classification(500, 6, n_informative=4, n_redundant=0, n_classes=n, random_state=0)
    return x, y


def _regression() -> tuple[np.ndarray, np.ndarray]:
    return make_regression(500, 6, n_targets=2, random_state=0)


def _session_outputs(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


def _reference_outputs(
    model: onnx.ModelProto, x: np.ndarray, new_ops: list[Any] | None
) -> list[np.ndarray]:
    evaluator = ReferenceEvaluator(model, new_ops=new_ops)
    return list(evaluator.run(None, {model.graph.input[0].name: x}))


def _assert_same(
    expected: list[np.ndarray], got: list[np.ndarray], *, rtol: float, atol: float
) -> None:
    assert len(expected) == len(got)
    for want, have in zip(expected, got, strict=True):
        want, have = np.asarray(want), np.asarray(have)
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(
                have.astype(np.float64).reshape(want.shape),
                want.astype(np.float64),
                rtol=rtol,
                atol=atol,
            )
        else:
            np.testing.assert_array_equal(have.reshape(want.shape), want)


def _probe_rows(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Held-out rows, the same rows with NaN, and rows placed exactly on every threshold."""
    rows = [x, _with_missing(x)]
    for node in model.graph.node:
        if not node.op_type.startswith("TreeEnsemble"):
            continue
        attrs = {a.name: a for a in node.attribute}
        if "nodes_splits" in attrs:  # ai.onnx.ml 5
            thresholds = numpy_helper.to_array(attrs["nodes_splits"].t)
        elif "nodes_values_as_tensor" in attrs:
            thresholds = numpy_helper.to_array(attrs["nodes_values_as_tensor"].t)
        else:
            thresholds = np.asarray(attrs["nodes_values"].floats)
        features = np.asarray(attrs["nodes_featureids"].ints)
        on = np.repeat(x[:1], len(thresholds), axis=0)
        usable = features < x.shape[1]
        on[np.flatnonzero(usable), features[usable]] = thresholds[usable]
        rows.append(on)
    return np.vstack(rows)


# ------------------------------------------------------------------ float64 tree ensembles
def _rf_multiclass() -> tuple[Any, np.ndarray]:
    x, y = _classes()
    return RandomForestClassifier(8, max_depth=6, random_state=0).fit(_frame(x), y), x


def _gb_binary() -> tuple[Any, np.ndarray]:
    x, y = _classes(2)
    return GradientBoostingClassifier(n_estimators=15, random_state=0).fit(_frame(x), y), x


def _extra_trees() -> tuple[Any, np.ndarray]:
    x, y = _classes()
    return ExtraTreesClassifier(6, max_depth=6, random_state=0).fit(_frame(x), y), x


def _rf_two_targets() -> tuple[Any, np.ndarray]:
    x, y = _regression()
    return RandomForestRegressor(5, max_depth=6, random_state=0).fit(_frame(x), y), x


def _hgb_missing() -> tuple[Any, np.ndarray]:
    x, y = _regression()
    x = _with_missing(x, seed=1)
    model = HistGradientBoostingRegressor(max_iter=15, random_state=0)
    return model.fit(_frame(x), y[:, 0]), x


def _hgb_multiclass_missing() -> tuple[Any, np.ndarray]:
    x, y = _classes()
    x = _with_missing(x, seed=2)
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0)
    return model.fit(_frame(x), y), x


def _lightgbm_missing() -> tuple[Any, np.ndarray]:
    x, y = _classes()
    x = _with_missing(x, seed=3)
    model = lightgbm.LGBMClassifier(n_estimators=10, verbose=-1, random_state=0)
    return model.fit(_frame(x), y), x


def _xgboost_missing() -> tuple[Any, np.ndarray]:
    x, y = _classes(2)
    x = _with_missing(x, seed=4)
    return xgboost.XGBClassifier(n_estimators=10, random_state=0).fit(_frame(x), y), x


def _catboost() -> tuple[Any, np.ndarray]:
    x, y = _regression()
    model = catboost.CatBoostRegressor(iterations=10, verbose=0, random_seed=0)
    return model.fit(_frame(x), y[:, 0]), x


TREE_MODELS: dict[str, Callable[[], tuple[Any, np.ndarray]]] = {
    "random forest, 3 classes": _rf_multiclass,
    "gradient boosting, binary": _gb_binary,
    "extra trees, 3 classes": _extra_trees,
    "random forest, 2 targets": _rf_two_targets,
    "histgradientboosting regressor, NaN routed": _hgb_missing,
    "histgradientboosting, 3 classes, NaN routed": _hgb_multiclass_missing,
    "lightgbm, 3 classes, NaN routed": _lightgbm_missing,
    "xgboost, binary, NaN routed": _xgboost_missing,
    "catboost regressor": _catboost,
}


@pytest.fixture(
    scope="module",
    params=[(name, ml) for name in sorted(TREE_MODELS) for ml in (3, None)],
    ids=lambda p: f"{p[0]}, ml_opset={p[1]}",
)
def double_tree(request: pytest.FixtureRequest) -> tuple[onnx.ModelProto, np.ndarray]:
    name, ml_opset = request.param
    model, x = TREE_MODELS[name]()
    converted = convert_estimator(
        model, _frame(x[:100]), precision="double", ml_opset=ml_opset
    ).model
    return converted, _probe_rows(converted, x[:200])


def test_double_tree_graphs_run_on_the_kernel_as_on_onnx_runtime(double_tree) -> None:
    model, rows = double_tree
    # The converters write float64 thresholds as *_as_tensor attributes (ai.onnx.ml 3) or as
    # the opset-5 TreeEnsemble's nodes_splits tensor.
    trees = [n for n in model.graph.node if n.op_type.startswith("TreeEnsemble")]
    float64 = {"TreeEnsemble": "nodes_splits"}
    assert trees and all(
        any(a.name == float64.get(n.op_type, "nodes_values_as_tensor") for a in n.attribute)
        for n in trees
    )
    kernels = reference_kernels(model)
    if any(n.op_type != "TreeEnsemble" for n in trees):
        with pytest.raises(Exception):  # noqa: B017 - onnx.reference has no kernel for them
            _reference_outputs(model, rows, None)
        assert TreeEnsembleRegressor in kernels
    else:
        assert kernels == [TreeEnsemble]
    _assert_same(
        _session_outputs(model, rows),
        _reference_outputs(model, rows, kernels),
        rtol=1e-9,
        atol=1e-12,
    )


def _only_node(model: onnx.ModelProto, op_type: str) -> onnx.ModelProto:
    """A model of ``model``'s one ``op_type`` node alone, fed the graph's input type."""
    (node,) = [n for n in model.graph.node if n.op_type == op_type]
    node = onnx.NodeProto.FromString(node.SerializeToString())
    elem = model.graph.input[0].type.tensor_type.elem_type
    inputs = [helper.make_tensor_value_info(node.input[0], elem, [None, None])]
    outputs = [
        helper.make_tensor_value_info(
            name,
            TensorProto.FLOAT if position == len(node.output) - 1 else _label_type(node),
            None,
        )
        for position, name in enumerate(node.output)
    ]
    graph = helper.make_graph([node], "only", inputs, outputs)
    only = helper.make_model(graph, opset_imports=list(model.opset_import))
    only.ir_version = model.ir_version
    return only


def _label_type(node: onnx.NodeProto) -> int:
    strings = any(a.name == "classlabels_strings" and a.strings for a in node.attribute)
    return TensorProto.STRING if strings else TensorProto.INT64


def _set(node: onnx.NodeProto, name: str, value: Any) -> None:
    for attribute in list(node.attribute):
        if attribute.name == name:
            node.attribute.remove(attribute)
    node.attribute.append(helper.make_attribute(name, value))


@pytest.fixture(scope="module")
def double_regressor_node() -> tuple[onnx.ModelProto, np.ndarray]:
    model, x = _hgb_missing()
    converted = convert_estimator(model, _frame(x[:100]), precision="double", ml_opset=3).model
    return _only_node(converted, "TreeEnsembleRegressor"), _probe_rows(converted, x[:150])


def _copy(case: tuple[onnx.ModelProto, np.ndarray]) -> tuple[onnx.ModelProto, np.ndarray]:
    model, rows = case
    return onnx.ModelProto.FromString(model.SerializeToString()), rows


@pytest.mark.parametrize(
    "mode", ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
)
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_every_node_mode_and_aggregate_as_onnx_runtime(
    double_regressor_node, mode: str, aggregate: str
) -> None:
    only, rows = _copy(double_regressor_node)
    node = only.graph.node[0]
    modes = [m.decode() for m in next(a for a in node.attribute if a.name == "nodes_modes").strings]
    _set(node, "nodes_modes", [m if m == "LEAF" else mode for m in modes])
    _set(node, "aggregate_function", aggregate)
    targets = next(a.i for a in node.attribute if a.name == "n_targets")
    base = np.linspace(-1.0, 1.0, targets)
    _set(node, "base_values_as_tensor", numpy_helper.from_array(base, name=""))
    if mode == "BRANCH_NEQ":
        # ONNX Runtime sends NaN down the true branch of BRANCH_NEQ whatever
        # nodes_missing_value_tracks_true says (test_nan_at_branch_neq_follows_the_specification).
        rows = rows[~np.isnan(rows).any(axis=1)]
    # The node writes the reached leaf's index per tree: which leaf a row reaches, exactly.
    expected = _session_outputs(only, rows)
    assert expected[0].shape[1] > 1
    _assert_same(expected, _reference_outputs(only, rows, [TreeEnsembleRegressor]), rtol=0, atol=0)


def test_nan_at_branch_neq_follows_the_specification(double_regressor_node) -> None:
    # The specification: NaN takes the true branch where nodes_missing_value_tracks_true is 1,
    # the false one where it is 0. ONNX Runtime takes the true branch of a BRANCH_NEQ node for
    # NaN either way (NaN != t). The same tree written with BRANCH_EQ, children swapped and the
    # missing flags flipped means the same thing, and there ONNX Runtime follows the flags.
    only, rows = _copy(double_regressor_node)
    rows = rows[np.isnan(rows).any(axis=1)]
    neq = onnx.ModelProto.FromString(only.SerializeToString())
    swapped = onnx.ModelProto.FromString(only.SerializeToString())
    node, twin = neq.graph.node[0], swapped.graph.node[0]
    attrs = {a.name: a for a in node.attribute}
    modes = [m.decode() for m in attrs["nodes_modes"].strings]
    tracks = list(attrs["nodes_missing_value_tracks_true"].ints)
    assert 0 in [t for t, m in zip(tracks, modes, strict=True) if m != "LEAF"]
    _set(node, "nodes_modes", [m if m == "LEAF" else "BRANCH_NEQ" for m in modes])
    _set(twin, "nodes_modes", [m if m == "LEAF" else "BRANCH_EQ" for m in modes])
    _set(twin, "nodes_truenodeids", list(attrs["nodes_falsenodeids"].ints))
    _set(twin, "nodes_falsenodeids", list(attrs["nodes_truenodeids"].ints))
    _set(twin, "nodes_missing_value_tracks_true", [1 - t for t in tracks])
    ours = _reference_outputs(neq, rows, [TreeEnsembleRegressor])
    _assert_same(_session_outputs(swapped, rows), ours, rtol=0, atol=0)
    assert not np.array_equal(_session_outputs(neq, rows)[0], ours[0])


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_post_transforms_as_onnx_runtime(double_regressor_node, transform: str) -> None:
    only, rows = _copy(double_regressor_node)
    node = only.graph.node[0]
    _set(node, "post_transform", transform)
    # Leaf indices make scores up to ~30: scale them down so the transforms are not saturated.
    (weights,) = [a for a in node.attribute if a.name == "target_weights"]
    scaled = np.asarray(weights.floats, dtype=np.float64) / 10.0 - 1.0
    node.attribute.remove(weights)
    _set(node, "target_weights_as_tensor", numpy_helper.from_array(scaled, name=""))
    _assert_same(
        _session_outputs(only, rows),
        _reference_outputs(only, rows, [TreeEnsembleRegressor]),
        rtol=1e-6,
        atol=1e-7,
    )


def test_float_graphs_compare_in_float32_as_onnx_runtime() -> None:
    # Features near 1e6, where float32 steps are 0.0625: float32 rows on, and one float32 step
    # either side of, every threshold take ONNX Runtime's branches.
    rng = np.random.RandomState(0)
    x = np.c_[1e6 + rng.rand(400) * 3, rng.rand(400)]
    y = np.sin(x[:, 0] * 7)
    model = HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(_frame(x), y)
    # In float32 the graph differs from scikit-learn on purpose (that is the point of the
    # data: float32 input moves rows across thresholds), so convert would refuse it; this
    # test compares the kernel with ONNX Runtime, not with scikit-learn.
    with pytest.warns(UserWarning, match="NOT CHECKED: the ONNX graph differs"):
        result = convert_estimator(
            model, _frame(x[:50]), precision="float", allow_divergent=True, ml_opset=3
        )
    converted = result.model
    rows = _probe_rows(converted, x[:100])
    rows = np.vstack([rows, np.nextafter(rows, np.inf), np.nextafter(rows, -np.inf)])
    rows = rows.astype(np.float32)
    _assert_same(
        _session_outputs(converted, rows),
        _reference_outputs(converted, rows, [TreeEnsembleRegressor]),
        rtol=1e-6,
        atol=1e-6,
    )


def test_integer_input_compares_in_float32_as_onnx_runtime() -> None:
    # A float graph fed int64 rows near 1e8, where float32 steps are 8: ONNX Runtime compares
    # float32(x) with the float32 thresholds, so integers up to 4 off a threshold take the
    # threshold's branch; a kernel comparing in float64 would take the other one.
    rng = np.random.RandomState(0)
    x = np.c_[1e8 + rng.rand(400) * 300, rng.rand(400)]
    y = (np.sin(x[:, 0] / 7) > 0).astype(int) + (x[:, 1] > 0.5)
    model = RandomForestClassifier(5, random_state=0).fit(_frame(x), y)
    converted = convert_estimator(model, _frame(x[:50]), precision="float").model
    only = _only_node(converted, "TreeEnsembleClassifier")
    only.graph.input[0].type.tensor_type.elem_type = TensorProto.INT64
    on = np.round(_probe_rows(converted, x[:100]))
    on = on[~np.isnan(on).any(axis=1)]
    rows = np.vstack([on + step for step in range(-8, 9)]).astype(np.int64)
    _assert_same(
        _session_outputs(only, rows),
        _reference_outputs(only, rows, [TreeEnsembleClassifier]),
        rtol=0,
        atol=1e-6,
    )


def _as_double_classifier(
    model: onnx.ModelProto, base: list[float] | None = None
) -> onnx.ModelProto:
    """The forest's TreeEnsembleClassifier with float64 attributes, on float64 input."""
    only = _only_node(model, "TreeEnsembleClassifier")
    only.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    for opset in only.opset_import:
        if opset.domain == ML:
            opset.version = 3  # the *_as_tensor attributes
    node = only.graph.node[0]
    for name in ("nodes_values", "class_weights"):
        (attribute,) = [a for a in node.attribute if a.name == name]
        values = np.asarray(attribute.floats, dtype=np.float64)
        node.attribute.remove(attribute)
        node.attribute.append(
            helper.make_attribute(f"{name}_as_tensor", numpy_helper.from_array(values, name=""))
        )
    base = [0.0, 0.5, 0.0] if base is None else base
    _set(node, "base_values_as_tensor", numpy_helper.from_array(np.asarray(base), name=""))
    return only


def test_tree_classifier_with_double_attributes_as_onnx_runtime() -> None:
    model, x = _rf_multiclass()
    converted = convert_estimator(model, _frame(x[:100]), precision="float").model
    only = _as_double_classifier(converted)
    rows = _probe_rows(converted, x[:200]).astype(np.float64)
    with pytest.raises(Exception):  # noqa: B017 - onnx.reference has no kernel for it
        _reference_outputs(only, rows, None)
    kernels = reference_kernels(only)
    assert kernels == [TreeEnsembleClassifier]
    _assert_same(
        _session_outputs(only, rows), _reference_outputs(only, rows, kernels), rtol=0, atol=1e-7
    )


@pytest.mark.parametrize("transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", ["ints", "strings"])
def test_tree_classifier_post_transforms_and_labels_as_onnx_runtime(
    transform: str, labels: str
) -> None:
    model, x = _rf_multiclass()
    converted = convert_estimator(model, _frame(x[:100]), precision="float").model
    only = _as_double_classifier(converted)
    node = only.graph.node[0]
    _set(node, "post_transform", transform)
    if labels == "strings":
        node.attribute.remove(next(a for a in node.attribute if a.name == "classlabels_int64s"))
        _set(node, "classlabels_strings", ["ant", "bee", "cow"])
        only.graph.output[0].type.tensor_type.elem_type = TensorProto.STRING
    rows = _probe_rows(converted, x[:200]).astype(np.float64)
    _assert_same(
        _session_outputs(only, rows),
        _reference_outputs(only, rows, reference_kernels(only)),
        rtol=1e-6,
        atol=1e-7,
    )


def test_binary_tree_classifier_voting_for_one_class_labels_the_top_score() -> None:
    # Leaves that vote for class 0 only: the scores are [s + base_0, base_1], as in ONNX
    # Runtime. The specification's label is the top class; ONNX Runtime labels such an ensemble
    # by the sign of s instead, the other way round.
    x, y = _classes(2)
    model = RandomForestClassifier(5, max_depth=4, random_state=0).fit(_frame(x), y)
    converted = convert_estimator(model, _frame(x[:100]), precision="float").model
    only = _as_double_classifier(converted, base=[0.1, 0.0])
    node = only.graph.node[0]
    attrs = {a.name: a for a in node.attribute}
    first = np.asarray(attrs["class_ids"].ints) == 1
    weights = numpy_helper.to_array(attrs["class_weights_as_tensor"].t)[first] - 0.5
    _set(node, "class_ids", [0] * int(first.sum()))
    _set(node, "class_treeids", np.asarray(attrs["class_treeids"].ints)[first].tolist())
    _set(node, "class_nodeids", np.asarray(attrs["class_nodeids"].ints)[first].tolist())
    _set(node, "class_weights_as_tensor", numpy_helper.from_array(weights, name=""))
    rows = x[:300].astype(np.float64)
    ort_labels, ort_scores = _session_outputs(only, rows)
    labels, scores = _reference_outputs(only, rows, reference_kernels(only))
    np.testing.assert_allclose(scores, ort_scores, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(labels, np.argmax(scores, axis=1))
    assert set(np.unique(labels)) == {0, 1}
    np.testing.assert_array_equal(ort_labels, 1 - labels)


# ---------------------------------------------------------------------------- SVMClassifier
# onnxbridge converts SVMs to standard operators; SVMClassifier nodes come from files made
# elsewhere, so these graphs are skl2onnx's own.
SVMS: dict[str, Callable[[], Any]] = {
    "rbf, probabilities, 3 classes": lambda: SVC(probability=True, random_state=0),
    "linear, probabilities, 3 classes": lambda: SVC(
        kernel="linear", probability=True, random_state=0
    ),
    "poly, probabilities, 4 classes": lambda: SVC(kernel="poly", probability=True, random_state=0),
    "sigmoid, probabilities, 3 classes": lambda: SVC(
        kernel="sigmoid", probability=True, random_state=0
    ),
    "nu, probabilities, 3 classes": lambda: NuSVC(probability=True, random_state=0),
    "rbf, probabilities, binary": lambda: SVC(probability=True, random_state=0),
    "rbf, scores, 3 classes": lambda: SVC(),
    "poly, scores, binary": lambda: SVC(kernel="poly"),
    "rbf, probabilities, binary, text labels": lambda: SVC(probability=True, random_state=0),
    "sigmoid, scores, 4 classes": lambda: SVC(kernel="sigmoid"),
}


def _svm_data(name: str) -> tuple[np.ndarray, np.ndarray]:
    classes = 2 if "binary" in name else 4 if "4 classes" in name else 3
    x, y = _classes(classes)
    return x[:300], y[:300]


def _skl2onnx_svm(model: Any, precision: str, features: int) -> onnx.ModelProto:
    """skl2onnx's graph of a fitted SVC / NuSVC: an SVMClassifier node and its post-processing."""
    tensor = DoubleTensorType if precision == "double" else FloatTensorType
    # onnxbridge installs its SVM converters into skl2onnx: ask for skl2onnx's own.
    with upstream_converters():
        graph = convert_sklearn(
            model,
            initial_types=[("input", tensor([None, features]))],
            options={id(model): {"zipmap": False}},
        )
    assert [n.op_type for n in graph.graph.node].count("SVMClassifier") == 1
    return graph


@pytest.fixture(scope="module", params=sorted(SVMS))
def svm_case(request: pytest.FixtureRequest) -> tuple[str, Any, np.ndarray]:
    x, y = _svm_data(request.param)
    text = "scores" in request.param or "text" in request.param
    labels = np.asarray(["cat", "dog", "emu", "yak"])[y] if text else y
    return request.param, SVMS[request.param]().fit(x, labels), x


@pytest.mark.parametrize("precision", ["float", "double"])
def test_svm_classifier_as_onnx_runtime(svm_case, precision: str) -> None:
    name, model, x = svm_case
    graph = _skl2onnx_svm(model, precision, x.shape[1])
    only = _only_node(graph, "SVMClassifier")
    dtype = np.float64 if precision == "double" else np.float32
    spread = x.std(axis=0) * 10
    rows = np.vstack([x[:150], np.zeros((1, x.shape[1])), spread, -spread]).astype(dtype)
    # The node alone, always on the kernel: its labels and values as ONNX Runtime's.
    expected = _session_outputs(only, rows)
    _assert_same(expected, _reference_outputs(only, rows, [SVMClassifier]), rtol=1e-4, atol=1e-5)
    # The whole skl2onnx graph, with the kernels validate would pick.
    _assert_same(
        _session_outputs(graph, rows),
        _reference_outputs(graph, rows, reference_kernels(graph)),
        rtol=1e-4,
        atol=1e-5,
    )
    if "probabilities" in name and "binary" not in name:
        # onnx.reference couples the pairwise probabilities otherwise: the kernel is needed.
        assert reference_kernels(only) == [SVMClassifier]
        plain = _reference_outputs(only, rows, None)
        assert np.abs(plain[1] - expected[1]).max() > 1e-2
    elif "binary" in name and ("scores" in name or "text" in name):
        # Two text labels: onnx.reference cannot run the node at all.
        assert reference_kernels(only) == [SVMClassifier]
        with pytest.raises(Exception):  # noqa: B017 - the type of its failure is its own
            _reference_outputs(only, rows, None)


def test_svm_probabilities_of_a_row_with_nan_are_uniform_as_in_onnx_runtime() -> None:
    x, y = _svm_data("3 classes")
    model = SVC(probability=True, random_state=0).fit(x, y)
    only = _only_node(_skl2onnx_svm(model, "float", x.shape[1]), "SVMClassifier")
    rows = np.vstack([x[:5], np.full((1, x.shape[1]), np.nan)]).astype(np.float32)
    expected = _session_outputs(only, rows)
    got = _reference_outputs(only, rows, reference_kernels(only))
    _assert_same(expected, got, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1][-1], np.full(3, 1 / 3), rtol=1e-6)


def test_batches_larger_than_one_chunk_as_onnx_runtime() -> None:
    # Rows are walked in chunks of a few million (row, tree) / (row, support vector) cells:
    # 70 000 rows of a 60-tree forest and of a multiclass SVC span several chunks.
    x, y = _classes()
    rows = np.random.RandomState(1).normal(size=(70_000, x.shape[1])) * x.std(axis=0)
    forest = RandomForestClassifier(60, max_depth=4, random_state=0).fit(_frame(x), y)
    converted = convert_estimator(forest, _frame(x[:100]), precision="double").model
    _assert_same(
        _session_outputs(converted, rows),
        _reference_outputs(converted, rows, reference_kernels(converted)),
        rtol=1e-9,
        atol=1e-12,
    )
    svc = SVC(probability=True, random_state=0).fit(x[:300], y[:300])
    only = _only_node(_skl2onnx_svm(svc, "float", x.shape[1]), "SVMClassifier")
    rows32 = rows[:40_000].astype(np.float32)
    _assert_same(
        _session_outputs(only, rows32),
        _reference_outputs(only, rows32, reference_kernels(only)),
        rtol=1e-4,
        atol=1e-5,
    )


# ------------------------------------------------------------------------------ end to end
def _assert_three_runtimes_everywhere(report: dict[str, Any]) -> None:
    reference = report["runtimes"]["reference"]
    assert reference["available"] is True and "failed_on" not in reference, reference
    compared = [p for p in report["probe_sets"] if p["pairs"]]
    assert len(compared) >= 4
    for probe_set in compared:
        names = {p["name"] for p in probe_set["pairs"]}
        assert {"sklearn~onnxruntime", "sklearn~reference", "onnxruntime~reference"} <= names, (
            probe_set["name"],
            names,
        )
        assert not probe_set.get("unavailable"), probe_set["unavailable"]
        assert all(p["ok"] for p in probe_set["pairs"]), probe_set["name"]


def test_cli_validate_double_tree_model_compares_all_three_runtimes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    x, y = _classes()
    x = _with_missing(x, seed=5)
    frame = _frame(x)
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(frame[:350], y[:350])
    onnx_path = tmp_path / "model.onnx"
    convert_estimator(model, frame[:100], precision="double").save(onnx_path)
    skops = tmp_path / "model.skops"
    save_estimator(model, skops)
    data = tmp_path / "rows.csv"
    frame[350:].to_csv(data, index=False)
    code, out, err = run(
        capsys, "validate", onnx_path, "--reference", skops, "--data", data, "--json", "--no-html"
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["verdict"] == "EQUIVALENT"
    names = [p["name"] for p in report["probe_sets"] if p["pairs"]]
    assert {"holdout", "thresholds", "missing", "batch"} <= set(names)
    _assert_three_runtimes_everywhere(report)


@pytest.mark.parametrize(
    "classes", [3, 2], ids=["3 classes, probabilities", "yes/no probabilities"]
)
def test_validate_svc_compares_all_three_runtimes(tmp_path: Path, classes: int) -> None:
    x, y = _classes(classes)
    frame = _frame(x)
    target = np.asarray(["no", "yes"])[y] if classes == 2 else y
    model = SVC(probability=True, random_state=0).fit(frame[:300], target[:300])
    onnx_path = convert_estimator(model, frame[:100]).save(tmp_path / "svc.onnx")
    report = validate_model(onnx_path, model, frame[300:400])
    assert report.verdict == "EQUIVALENT"
    assert report.runtimes["reference"]["available"] is True
    _assert_three_runtimes_everywhere(report.to_dict())


def test_validate_skl2onnx_svm_classifier_file_compares_both_onnx_runtimes(
    tmp_path: Path,
) -> None:
    # An .onnx file made elsewhere, validated without its source model: the reference runtime
    # runs its SVMClassifier node on the kernel and agrees with ONNX Runtime on every probe set.
    x, y = _classes()
    model = SVC(probability=True, random_state=0).fit(x[:300], y[:300])
    path = tmp_path / "svc.onnx"
    path.write_bytes(_skl2onnx_svm(model, "float", x.shape[1]).SerializeToString())
    report = validate_model(path, None, x[300:400])
    assert report.verdict == "EQUIVALENT"
    payload = report.to_dict()
    reference = payload["runtimes"]["reference"]
    assert reference["available"] is True and "failed_on" not in reference, reference
    compared = [p for p in payload["probe_sets"] if p["pairs"]]
    assert len(compared) >= 4
    for probe_set in compared:
        names = {p["name"] for p in probe_set["pairs"]}
        assert "onnxruntime~reference" in names, (probe_set["name"], names)
        assert not any("sklearn" in name for name in names), names
        assert not probe_set.get("unavailable"), probe_set["unavailable"]
        assert all(p["ok"] for p in probe_set["pairs"]), probe_set["name"]


def test_validate_double_categorical_lightgbm_compares_all_three_runtimes(tmp_path: Path) -> None:
    # Categorical splits become numeric columns in front of the float64 ensemble.
    rng = np.random.RandomState(0)
    n = 600
    frame = pd.DataFrame(
        {
            "city": pd.Categorical(rng.choice(["a", "b", "c", "d"], n)),
            "x": np.where(rng.rand(n) < 0.1, np.nan, rng.rand(n)),
            "z": rng.rand(n),
        }
    )
    y = (frame["city"].isin(["a", "c"]) ^ (frame["x"].fillna(0.3) > 0.5)).astype(int)
    model = lightgbm.LGBMClassifier(n_estimators=20, verbose=-1, min_data_in_leaf=5)
    model.fit(frame[:400], y[:400])
    path = convert_estimator(model, frame[:400], precision="double").save(tmp_path / "m.onnx")
    report = validate_model(path, model, frame[400:])
    assert report.verdict == "EQUIVALENT"
    payload = report.to_dict()
    assert {"categories", "missing", "thresholds"} <= {
        p["name"] for p in payload["probe_sets"] if p["pairs"]
    }
    _assert_three_runtimes_everywhere(payload)


# ------------------------------------------------------------- TreeEnsemble (ai.onnx.ml 5)
# The opset-5 operator: branches and leaves in separate arrays, thresholds and weights as
# tensors of the input's type, integer enumerations, output of the input's type.
V5_OPSETS = [helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)]
MODES = {"LEQ": 0, "LT": 1, "GTE": 2, "GT": 3, "EQ": 4, "NEQ": 5, "MEMBER": 6}
AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
# Unreferenced leaves at the end of leaf_*: never reached (their weight would show if they were).
PADDING_WEIGHT = 1e6


def _tensor(values: Any, dtype: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name="")


def _v5_trees(
    trees: list[Any],
    dtype: Any,
    *,
    targets: int = 1,
    scale: float = 1.0,
    constant: np.ndarray | None = None,
    leaf_index: bool = False,
) -> dict[str, Any]:
    """TreeEnsemble attributes of fitted scikit-learn trees (``estimator.tree_``).

    One tree per (tree, target), as a v5 leaf votes for one target; ``constant`` adds a
    single-leaf tree per target; ``leaf_index`` makes tree ``i`` vote its reached leaf's number
    for target ``i`` (``targets`` is then the number of trees).
    """
    columns: dict[str, list[np.ndarray]] = {
        k: [] for k in ("feature", "split", "missing", "true", "false", "tl", "fl", "target", "w")
    }
    roots: list[int] = []
    nodes = leaves = 0

    def add(**arrays: np.ndarray) -> None:
        for key, value in arrays.items():
            columns[key].append(np.asarray(value))

    for number, tree in enumerate(trees):
        left, right = tree.children_left, tree.children_right
        inner, ends = np.flatnonzero(left >= 0), np.flatnonzero(left < 0)
        position = np.zeros(len(left), dtype=np.int64)
        position[inner], position[ends] = np.arange(len(inner)), np.arange(len(ends))
        for k in range(1 if leaf_index else targets):
            if len(inner) == 0:  # a single leaf: a root whose branches both name it
                roots.append(nodes)
                add(feature=[0], split=[0.0], missing=[0], true=[leaves], false=[leaves])
                add(tl=[1], fl=[1])
                nodes += 1
            else:
                roots.append(nodes)
                add(feature=tree.feature[inner], split=tree.threshold[inner])
                add(missing=tree.missing_go_to_left[inner])
                for side, flag, child in (
                    ("true", "tl", left[inner]),
                    ("false", "fl", right[inner]),
                ):
                    is_leaf = left[child] < 0
                    add(**{side: np.where(is_leaf, leaves, nodes) + position[child]})
                    add(**{flag: is_leaf.astype(np.int64)})
                nodes += len(inner)
            weight = np.arange(len(ends)) if leaf_index else tree.value[ends, k, 0] * scale
            add(target=np.full(len(ends), number if leaf_index else k), w=weight)
            leaves += len(ends)
    for k in range(targets if constant is not None else 0):
        roots.append(nodes)
        add(feature=[0], split=[0.0], missing=[0], true=[leaves], false=[leaves], tl=[1], fl=[1])
        add(target=[k], w=[constant[k]])  # type: ignore[index]
        nodes, leaves = nodes + 1, leaves + 1
    add(target=[0, targets - 1], w=[PADDING_WEIGHT, -PADDING_WEIGHT])
    cat = {key: np.concatenate(value) for key, value in columns.items()}
    return {
        "nodes_featureids": cat["feature"].tolist(),
        "nodes_splits": _tensor(cat["split"], dtype),
        "nodes_modes": _tensor(np.zeros(nodes), np.uint8),
        "nodes_missing_value_tracks_true": cat["missing"].astype(np.int64).tolist(),
        "nodes_truenodeids": cat["true"].tolist(),
        "nodes_falsenodeids": cat["false"].tolist(),
        "nodes_trueleafs": cat["tl"].tolist(),
        "nodes_falseleafs": cat["fl"].tolist(),
        "leaf_targetids": cat["target"].tolist(),
        "leaf_weights": _tensor(cat["w"], dtype),
        "tree_roots": roots,
        "n_targets": len(trees) if leaf_index else targets,
        "aggregate_function": AGGREGATES["SUM"],
        "post_transform": TRANSFORMS["NONE"],
    }


def _v5_model(attrs: dict[str, Any], dtype: Any, features: int) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, **attrs)
    graph = helper.make_graph(
        [node],
        "v5",
        [helper.make_tensor_value_info("X", elem, [None, features])],
        [helper.make_tensor_value_info("Y", elem, [None, None])],
    )
    model = helper.make_model(graph, opset_imports=V5_OPSETS)
    model.ir_version = helper.find_min_ir_version_for(V5_OPSETS)
    return model


def _one_thread(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """ONNX Runtime on one thread: it then sums the trees in their order, as the kernel does."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"X": x})[0]


def _kernel(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    (kernel,) = reference_kernels(model)
    assert kernel is TreeEnsemble
    return _reference_outputs(model, x, [kernel])[0]


def _v5_rows(attrs: dict[str, Any], x: np.ndarray, dtype: Any) -> np.ndarray:
    """Held-out rows, with NaN, on every threshold and one step of ``dtype`` either side."""
    splits = numpy_helper.to_array(attrs["nodes_splits"]).astype(dtype)
    on = np.repeat(x[:1], len(splits), axis=0).astype(dtype)
    on[np.arange(len(splits)), attrs["nodes_featureids"]] = splits
    near = [np.nextafter(on, dtype(np.inf)), np.nextafter(on, dtype(-np.inf))]
    return np.vstack([x, _with_missing(x), on, *near]).astype(dtype)


def _rf_nan() -> tuple[dict[str, Any], np.ndarray]:
    x, y = _regression()
    x = _with_missing(x, seed=6)
    forest = RandomForestRegressor(6, max_depth=7, random_state=0).fit(x, y[:, 0])
    return {"trees": [e.tree_ for e in forest.estimators_], "scale": 1 / 6}, x


def _gbr() -> tuple[dict[str, Any], np.ndarray]:
    x, y = _regression()
    gb = GradientBoostingRegressor(n_estimators=30, max_depth=4, random_state=0).fit(x, y[:, 0])
    trees = [e.tree_ for e in gb.estimators_[:, 0]]
    return {"trees": trees, "scale": gb.learning_rate, "constant": gb.init_.constant_[0]}, x


def _rf_two_targets_v5() -> tuple[dict[str, Any], np.ndarray]:
    x, y = _regression()
    forest = RandomForestRegressor(5, max_depth=6, random_state=0).fit(x, y)
    return {"trees": [e.tree_ for e in forest.estimators_], "targets": 2, "scale": 1 / 5}, x


def _stumps_and_leaves() -> tuple[dict[str, Any], np.ndarray]:
    # Trees that cannot split (min_impurity_decrease beyond any gain) are single leaves; mixed
    # with trees that split, the single-leaf roots sit at other positions than their leaves.
    x, y = _regression()
    splitting = RandomForestRegressor(3, max_depth=3, random_state=0).fit(x, y[:, 0])
    single = RandomForestRegressor(2, min_impurity_decrease=1e12, random_state=0).fit(x, y[:, 0])
    trees = [e.tree_ for e in (*splitting.estimators_, *single.estimators_)]
    trees = [trees[0], trees[3], trees[1], trees[4], trees[2]]
    assert [t.node_count for t in trees].count(1) == 2
    return {"trees": trees, "scale": 0.2}, x


V5_FORESTS: dict[str, Callable[[], tuple[dict[str, Any], np.ndarray]]] = {
    "random forest, NaN routed": _rf_nan,
    "gradient boosting, init as a single-leaf tree": _gbr,
    "random forest, 2 targets": _rf_two_targets_v5,
    "single-leaf trees among others": _stumps_and_leaves,
}


@pytest.fixture(scope="module", params=sorted(V5_FORESTS))
def v5_forest(request: pytest.FixtureRequest) -> tuple[dict[str, Any], np.ndarray]:
    return V5_FORESTS[request.param]()


def _forest_attrs(spec: dict[str, Any], dtype: Any) -> dict[str, Any]:
    spec = dict(spec)
    trees = spec.pop("trees")
    constant = spec.pop("constant", None)
    if constant is not None:
        spec["constant"] = np.atleast_1d(constant)
    return _v5_trees(trees, dtype, **spec)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
def test_v5_forests_run_on_the_kernel_as_on_onnx_runtime(v5_forest, dtype: Any) -> None:
    spec, x = v5_forest
    attrs = _forest_attrs(spec, dtype)
    model = _v5_model(attrs, dtype, x.shape[1])
    rows = _v5_rows(attrs, x[:200], dtype)
    ours = _kernel(model, rows)
    # The output has the input's type, and every bit of ONNX Runtime's (one thread).
    assert ours.dtype == dtype
    expected = _one_thread(model, rows)
    assert expected.dtype == dtype and expected.shape[1] == attrs["n_targets"]
    np.testing.assert_array_equal(ours, expected)
    # On as many threads as it likes, ONNX Runtime sums in another order.
    _assert_same(_session_outputs(model, rows), [ours], rtol=1e-5, atol=1e-4)


def test_v5_forests_as_onnx_reference_where_it_runs_them(v5_forest) -> None:
    # onnx.reference's own TreeEnsemble walks one row at a time (a few hundred rows are
    # plenty); it takes a single-leaf tree's leaf at the root's position instead of the one
    # the root names, so those forests give other values there.
    spec, x = v5_forest
    attrs = _forest_attrs(spec, np.float64)
    model = _v5_model(attrs, np.float64, x.shape[1])
    rows = _v5_rows(attrs, x[:40], np.float64)
    ours = _kernel(model, rows)
    theirs = _reference_outputs(model, rows, None)[0]
    single = [
        root
        for root in attrs["tree_roots"]
        if attrs["nodes_trueleafs"][root] and attrs["nodes_falseleafs"][root]
    ]
    if single:
        assert not np.allclose(theirs, ours)
        np.testing.assert_array_equal(ours, _one_thread(model, rows))
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-9)


def _leaf_index_forest(dtype: Any, targets: int | None = None) -> tuple[dict[str, Any], np.ndarray]:
    """A forest whose tree ``i`` writes its reached leaf's number (as double graphs ask)."""
    x, y = _regression()
    x = _with_missing(x, seed=7)
    forest = RandomForestRegressor(6, max_depth=6, random_state=0).fit(x, y[:, 0])
    attrs = _v5_trees([e.tree_ for e in forest.estimators_], dtype, leaf_index=True)
    if targets is not None:
        # Trees share targets (tree i votes for target i % targets): MIN / MAX pick among them.
        ids = np.asarray(attrs["leaf_targetids"])
        attrs["leaf_targetids"] = (ids % targets).tolist()
        attrs["n_targets"] = targets
    return attrs, _v5_rows(attrs, x[:150], dtype)


@pytest.mark.parametrize("mode", ["LEQ", "LT", "GTE", "GT", "EQ", "NEQ"])
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
def test_v5_every_mode_and_aggregate_as_onnx_runtime(mode: str, aggregate: str, dtype: Any) -> None:
    attrs, rows = _leaf_index_forest(dtype, targets=None if aggregate == "SUM" else 4)
    attrs["nodes_modes"] = _tensor(np.full(len(attrs["nodes_featureids"]), MODES[mode]), np.uint8)
    attrs["aggregate_function"] = AGGREGATES[aggregate]
    if mode == "NEQ":
        # ONNX Runtime sends NaN down the true branch of BRANCH_NEQ whatever the missing
        # flags say (test_v5_nan_at_branch_neq_follows_the_specification).
        rows = rows[~np.isnan(rows).any(axis=1)]
    model = _v5_model(attrs, dtype, rows.shape[1])
    expected = _one_thread(model, rows)
    assert len(np.unique(expected)) > 1
    np.testing.assert_array_equal(_kernel(model, rows), expected)


def test_v5_modes_mixed_in_one_forest_as_onnx_runtime() -> None:
    attrs, rows = _leaf_index_forest(np.float64)
    count = len(attrs["nodes_featureids"])
    attrs["nodes_modes"] = _tensor(np.arange(count) % 5, np.uint8)  # LEQ, LT, GTE, GT, EQ
    model = _v5_model(attrs, np.float64, rows.shape[1])
    np.testing.assert_array_equal(_kernel(model, rows), _one_thread(model, rows))


def test_v5_nan_at_branch_neq_follows_the_specification() -> None:
    # As for opset 3: the specification sends NaN where nodes_missing_value_tracks_true says;
    # ONNX Runtime takes the true branch of BRANCH_NEQ for NaN either way (NaN != t). The same
    # trees written with BRANCH_EQ, children swapped and the flags flipped mean the same thing,
    # and there ONNX Runtime follows the flags.
    attrs, rows = _leaf_index_forest(np.float64)
    rows = rows[np.isnan(rows).any(axis=1)]
    count = len(attrs["nodes_featureids"])
    assert 0 in attrs["nodes_missing_value_tracks_true"]
    neq = dict(attrs, nodes_modes=_tensor(np.full(count, MODES["NEQ"]), np.uint8))
    twin = dict(
        attrs,
        nodes_modes=_tensor(np.full(count, MODES["EQ"]), np.uint8),
        nodes_truenodeids=attrs["nodes_falsenodeids"],
        nodes_falsenodeids=attrs["nodes_truenodeids"],
        nodes_trueleafs=attrs["nodes_falseleafs"],
        nodes_falseleafs=attrs["nodes_trueleafs"],
        nodes_missing_value_tracks_true=[1 - t for t in attrs["nodes_missing_value_tracks_true"]],
    )
    neq_model = _v5_model(neq, np.float64, rows.shape[1])
    ours = _kernel(neq_model, rows)
    np.testing.assert_array_equal(
        ours, _one_thread(_v5_model(twin, np.float64, rows.shape[1]), rows)
    )
    assert not np.array_equal(_one_thread(neq_model, rows), ours)


def _member_tree(dtype: Any, first: list[float], second: list[float]) -> dict[str, Any]:
    """Feature 0 in ``first`` -> leaf 0, else feature 1 in ``second`` -> leaf 1, else leaf 2;
    then a second tree: feature 2 <= 0.5 -> leaf 3, else leaf 4. NaN takes the false branch
    of the first set and the true branch of the second."""
    members = np.asarray([*first, np.nan, *second, np.nan], dtype=dtype)
    return {
        "nodes_featureids": [0, 1, 2],
        "nodes_splits": _tensor([0.0, 0.0, 0.5], dtype),
        "nodes_modes": _tensor([MODES["MEMBER"], MODES["MEMBER"], MODES["LEQ"]], np.uint8),
        "membership_values": numpy_helper.from_array(members, name=""),
        "nodes_missing_value_tracks_true": [0, 1, 0],
        "nodes_truenodeids": [0, 1, 3],
        "nodes_falsenodeids": [1, 2, 4],
        "nodes_trueleafs": [1, 1, 1],
        "nodes_falseleafs": [0, 1, 1],
        "leaf_targetids": [0, 0, 0, 0, 0],
        "leaf_weights": _tensor([1, 10, 100, 1000, 10000], dtype),
        "tree_roots": [0, 2],
        "n_targets": 1,
    }


@pytest.mark.parametrize(
    ("first", "second"),
    [([1, 3, 7], [0, 2]), ([40, -3, 5], list(range(0, 64, 2))), ([2], [5, 0]), ([1, 3], [4])],
    ids=["small sets", "a big set (chained otherwise)", "zero a member", "no zero"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
def test_v5_branch_member_as_onnx_runtime(
    first: list[float], second: list[float], dtype: Any
) -> None:
    # ONNX Runtime takes integer members only (it refuses others); the kernel any number.
    attrs = _member_tree(dtype, first, second)
    model = _v5_model(attrs, dtype, 3)
    values = np.unique(np.r_[first, second, -1, 1.5, 62, 63, 0, 2, 100, np.nan])
    grid = np.array(np.meshgrid(values, values, [0.0, 1.0, np.nan])).reshape(3, -1).T.astype(dtype)
    expected = _one_thread(model, grid)
    assert len(np.unique(expected)) == 6
    ours = _kernel(model, grid)
    np.testing.assert_array_equal(ours, expected)
    # onnx.reference ends a set at its first zero (a member that reads as false), so a set
    # holding 0 loses the members after it, and the next node takes what is left.
    theirs = _reference_outputs(model, grid, None)[0]
    assert np.array_equal(theirs, ours) == (0 not in first + second)


def test_v5_empty_member_set_holds_nothing() -> None:
    # A BRANCH_MEMBER node with an empty set sends every number to its false branch, as a
    # BRANCH_EQ node with a NaN threshold does in ONNX Runtime (which cannot take the empty set).
    attrs = _member_tree(np.float64, [1, 3], [])
    model = _v5_model(attrs, np.float64, 3)
    twin = dict(
        attrs,
        nodes_modes=_tensor([MODES["MEMBER"], MODES["EQ"], MODES["LEQ"]], np.uint8),
        nodes_splits=_tensor([0.0, np.nan, 0.5], np.float64),
        membership_values=numpy_helper.from_array(np.asarray([1.0, 3.0, np.nan]), name=""),
    )
    values = [0.0, 1.0, 2.0, 3.0, np.nan]
    grid = np.array(np.meshgrid(values, values, [0.0, 1.0])).reshape(3, -1).T
    expected = _one_thread(_v5_model(twin, np.float64, 3), grid)
    assert len(np.unique(expected)) == 6
    np.testing.assert_array_equal(_kernel(model, grid), expected)


def _scaled_leaf_values(targets: int) -> tuple[dict[str, Any], np.ndarray]:
    """Scores in (-1, 1): leaf numbers scaled down so no transform saturates."""
    attrs, rows = _leaf_index_forest(np.float64, targets=targets)
    weights = numpy_helper.to_array(attrs["leaf_weights"])
    attrs["leaf_weights"] = _tensor(np.sin(weights) / 4, np.float64)
    return attrs, rows


def _softmax(scores: np.ndarray) -> np.ndarray:
    exps = np.exp(scores - scores.max(axis=1, keepdims=True))
    return exps / exps.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("targets", [1, 3])
def test_v5_post_transforms_follow_the_specification(targets: int) -> None:
    attrs, rows = _scaled_leaf_values(targets)

    def run(transform: str, runtime: Callable[..., np.ndarray]) -> np.ndarray:
        model = _v5_model(dict(attrs, post_transform=TRANSFORMS[transform]), np.float64, 6)
        return runtime(model, rows)

    scores = run("NONE", _kernel)
    np.testing.assert_array_equal(scores, run("NONE", _one_thread))
    assert np.abs(scores).max() < 1.5 and len(np.unique(scores)) > 3
    logistic = 1.0 / (1.0 + np.exp(-scores))
    np.testing.assert_allclose(run("LOGISTIC", _kernel), logistic, rtol=1e-12)
    np.testing.assert_allclose(run("SOFTMAX", _kernel), _softmax(scores), rtol=1e-12)
    # PROBIT, the normal quantile of scores in (0, 1): ONNX Runtime approximates the inverse
    # error function (up to about 5e-4 off).
    weights = numpy_helper.to_array(attrs["leaf_weights"]) / 20 + 0.5 / len(attrs["tree_roots"])
    shifted = dict(attrs, leaf_weights=_tensor(weights, np.float64))
    probit = _v5_model(dict(shifted, post_transform=TRANSFORMS["PROBIT"]), np.float64, 6)
    quantiles = _kernel(probit, rows)
    plain = _kernel(_v5_model(shifted, np.float64, 6), rows)
    np.testing.assert_allclose(quantiles, ndtri(plain), rtol=1e-12)
    np.testing.assert_allclose(quantiles, _one_thread(probit, rows), rtol=0, atol=1e-3)
    if targets == 1:
        # ONNX Runtime applies no transform but PROBIT to one target.
        for transform in ("LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"):
            np.testing.assert_array_equal(run(transform, _one_thread), scores)
        return
    # ONNX Runtime reads 1 as LOGISTIC and 2 as SOFTMAX, the other way round from the
    # specification (and onnx.defs); its transforms are float32-accurate, on double too.
    np.testing.assert_allclose(run("SOFTMAX", _one_thread), logistic, rtol=1e-6)
    np.testing.assert_allclose(run("LOGISTIC", _one_thread), _softmax(scores), rtol=1e-6)
    np.testing.assert_allclose(
        run("SOFTMAX_ZERO", _kernel), run("SOFTMAX_ZERO", _one_thread), rtol=1e-6
    )


def test_v5_batches_larger_than_one_chunk_as_onnx_runtime() -> None:
    # 70 000 rows of a 60-tree forest span several chunks of (row, tree) cells.
    x, y = _regression()
    forest = RandomForestRegressor(60, max_depth=4, random_state=0).fit(x, y[:, 0])
    attrs = _v5_trees([e.tree_ for e in forest.estimators_], np.float32, scale=1 / 60)
    model = _v5_model(attrs, np.float32, x.shape[1])
    rows = (np.random.RandomState(1).normal(size=(70_000, x.shape[1])) * x.std(axis=0)).astype(
        np.float32
    )
    np.testing.assert_array_equal(_kernel(model, rows), _one_thread(model, rows))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"leaf_targetids": [0, 0, 0, 0, 1]}, r"leaf_targetids must lie in \[0, 1\)"),
        ({"tree_roots": [0, 3]}, r"tree_roots must name"),
        ({"nodes_truenodeids": [0, 1, 9]}, "points past its array"),
        ({"nodes_featureids": [0, 1, 7]}, "the trees read feature 7, the input has 3 columns"),
        ({"aggregate_function": 7}, r"aggregate_function=7 is not one of the specification's"),
        ({"nodes_modes": _tensor([6, 0, 0], np.uint8)}, "2 NaN-delimited sets for 1 BRANCH_MEMBER"),
        ({"nodes_truenodeids": [1, 0, 3], "nodes_trueleafs": [0, 0, 1]}, "cycle"),
    ],
)
def test_v5_malformed_nodes_fail_with_one_line(change: dict[str, Any], message: str) -> None:
    attrs = dict(_member_tree(np.float64, [1, 3], [2]), **change)
    model = _v5_model(attrs, np.float64, 3)
    rows = np.asarray([[0.0, 0.0, 0.0], [1.0, 2.0, 0.0]])  # the second one goes true, true
    with pytest.raises(ValueError, match=message) as raised:
        _reference_outputs(model, rows, [TreeEnsemble])
    assert "\n" not in str(raised.value)


def _as_v5(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its TreeEnsembleRegressor node written as the opset-5 TreeEnsemble."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    (old,) = [n for n in model.graph.node if n.op_type == "TreeEnsembleRegressor"]
    a = {x.name: helper.get_attribute_value(x) for x in old.attribute}
    double = "nodes_values_as_tensor" in a
    dtype = np.float64 if double else np.float32
    values = numpy_helper.to_array(a["nodes_values_as_tensor"]) if double else a["nodes_values"]
    weights = (
        numpy_helper.to_array(a["target_weights_as_tensor"])
        if "target_weights_as_tensor" in a
        else np.asarray(a["target_weights"])
    )
    keys = list(zip(a["nodes_treeids"], a["nodes_nodeids"], strict=True))
    is_leaf = np.asarray([m == b"LEAF" for m in a["nodes_modes"]])
    # Branches and leaves numbered apart, in the order of the old arrays.
    index = np.where(is_leaf, np.cumsum(is_leaf) - 1, np.cumsum(~is_leaf) - 1)
    where = {key: p for p, key in enumerate(keys)}
    votes = {
        (t, n): (i, w)
        for t, n, i, w in zip(
            a["target_treeids"], a["target_nodeids"], a["target_ids"], weights, strict=True
        )
    }
    assert len(votes) == len(a["target_ids"]), "one vote per leaf"
    branches = np.flatnonzero(~is_leaf)
    children: dict[str, list[int]] = {"true": [], "false": [], "tl": [], "fl": []}
    pointed = set()
    for p in branches:
        for side, flag in (("true", "tl"), ("false", "fl")):
            child = where[(keys[p][0], a[f"nodes_{side}nodeids"][p])]
            pointed.add(child)
            children[side].append(int(index[child]))
            children[flag].append(int(is_leaf[child]))
    features = [a["nodes_featureids"][p] for p in branches]
    splits = [values[p] for p in branches]
    missing = a.get("nodes_missing_value_tracks_true", [0] * len(keys))
    tracks = [missing[p] for p in branches]
    roots = []
    for p in sorted(set(range(len(keys))) - pointed):
        if is_leaf[p]:  # a single-leaf tree: a root whose branches both name the leaf
            roots.append(len(features))
            features.append(0), splits.append(0.0), tracks.append(0)
            for side, flag in (("true", "tl"), ("false", "fl")):
                children[side].append(int(index[p]))
                children[flag].append(1)
        else:
            roots.append(int(index[p]))
    leaves = np.flatnonzero(is_leaf)
    leaf_votes = [votes.get(keys[p], (0, 0.0)) for p in leaves]
    new = helper.make_node(
        "TreeEnsemble",
        list(old.input),
        list(old.output),
        name=old.name,
        domain=ML,
        nodes_featureids=features,
        nodes_splits=_tensor(splits, dtype),
        nodes_modes=_tensor(np.zeros(len(features)), np.uint8),
        nodes_missing_value_tracks_true=tracks,
        nodes_truenodeids=children["true"],
        nodes_falsenodeids=children["false"],
        nodes_trueleafs=children["tl"],
        nodes_falseleafs=children["fl"],
        leaf_targetids=[int(i) for i, _ in leaf_votes],
        leaf_weights=_tensor([w for _, w in leaf_votes], dtype),
        tree_roots=roots,
        n_targets=a["n_targets"],
        aggregate_function=AGGREGATES[a.get("aggregate_function", b"SUM").decode()],
        post_transform=TRANSFORMS[a.get("post_transform", b"NONE").decode()],
    )
    nodes = [new if n is old else n for n in model.graph.node]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    # The output now has the input's type, not always float32.
    kept = [v for v in model.graph.value_info if v.name not in old.output]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept)
    for opset in model.opset_import:
        if opset.domain == ML:
            opset.version = 5
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("precision", ["float", "double"])
def test_validate_v5_forest_compares_all_three_runtimes(tmp_path: Path, precision: str) -> None:
    x, y = _regression()
    x = _with_missing(x, seed=8)
    frame = _frame(x)
    model = RandomForestRegressor(8, max_depth=8, random_state=0).fit(frame[:350], y[:350, 0])
    converted = convert_estimator(model, frame[:100], precision=precision, ml_opset=3).model
    v5 = _as_v5(converted)
    assert reference_kernels(v5) == [TreeEnsemble]
    path = tmp_path / "v5.onnx"
    path.write_bytes(v5.SerializeToString())
    report = validate_model(path, model, frame[350:])
    assert report.verdict == "EQUIVALENT"
    _assert_three_runtimes_everywhere(report.to_dict())
