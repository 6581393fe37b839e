"""CatBoostClassifier and CatBoostRegressor (registered when catboost is installed).

skl2onnx and onnxmltools have no converter for CatBoost; CatBoost exports ONNX itself
(``save_model(format="onnx")``). That export is the source of truth here: its one
``TreeEnsembleClassifier`` / ``TreeEnsembleRegressor`` node is read into a
:class:`~onnxbridge.convert.tree_ensemble.TreeEnsembleSpec` and rebuilt, so a CatBoost model gets
onnxbridge's input naming, output roles, metadata and precisions, also at the end of a numeric
Pipeline. ``[N, F] -> label [N], probabilities [N, C]`` / ``value [N, 1]``. CatBoost compares
``float32(x) > border`` and sends NaN below every border (its default ``nan_mode="Min"``).
Models with categorical or text features cannot be exported by CatBoost and are refused.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from catboost import CatBoostClassifier, CatBoostRegressor
from onnx import helper
from skl2onnx._supported_operators import sklearn_classifier_list

from onnxbridge.convert.converters._tree_heads import (
    CLASSIFIER_OPTIONS,
    classifier_shape,
    example_target,
    regressor_shape,
    write_classifier,
    write_regressor,
)
from onnxbridge.convert.registry import ConverterSpec, register_converter
from onnxbridge.convert.tree_ensemble import TreeEnsembleSpec
from onnxbridge.errors import ConversionError


def _exported_node(model: Any) -> onnx.NodeProto:
    """CatBoost's own ONNX export of ``model``: its tree-ensemble node."""
    special = []
    for kind in ("cat", "text", "embedding"):
        getter = getattr(model, f"get_{kind}_feature_indices", None)
        if getter is not None and list(getter()):
            special.append(f"{kind} features {list(getter())}")
    if special:
        raise ConversionError(
            f"{type(model).__name__} with {' and '.join(special)} cannot be converted: CatBoost "
            "exports ONNX only for numeric features; encode those columns in a Pipeline before "
            "the model (e.g. OrdinalEncoder) and fit without cat_features"
        )
    with tempfile.TemporaryDirectory(prefix="onnxbridge-catboost-") as folder:
        path = Path(folder) / "model.onnx"
        try:
            model.save_model(str(path), format="onnx")
        except Exception as exc:  # CatBoostError: categorical / text features, ...
            raise ConversionError(
                f"CatBoost could not export {type(model).__name__} to ONNX: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}; "
                "CatBoost exports only models on numeric features (encode categorical and text "
                "columns before the model)"
            ) from exc
        exported = onnx.load(str(path))
    for node in exported.graph.node:
        if node.op_type in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
            return node
    raise ConversionError(
        "CatBoost's ONNX export has no tree-ensemble node; onnxbridge cannot rebuild it"
    )


def _attributes(node: onnx.NodeProto) -> dict[str, Any]:
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


def catboost_spec(model: Any) -> tuple[TreeEnsembleSpec, str, list[Any]]:
    """Read CatBoost's exported ensemble.

    Returns:
        The spec (``x <= t`` goes left: CatBoost's ``x > t`` branches swapped), the export's
        ``post_transform`` (``NONE``, ``LOGISTIC``, ``SOFTMAX``) and its class labels.
    """
    attrs = _attributes(_exported_node(model))
    modes = [m.decode() if isinstance(m, bytes) else m for m in attrs["nodes_modes"]]
    unknown = sorted(set(modes) - {"BRANCH_GT", "LEAF"})
    if unknown:
        raise ConversionError(
            f"CatBoost's ONNX export uses node modes {unknown}; onnxbridge rebuilds only "
            "BRANCH_GT trees (numeric features)"
        )
    prefix = "class" if "class_ids" in attrs else "target"
    k = (
        len(attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or [])
        if prefix == "class"
        else int(attrs.get("n_targets", 1))
    )
    leaves: dict[tuple[int, int], np.ndarray] = {}
    for tree, node, column, weight in zip(
        attrs[f"{prefix}_treeids"],
        attrs[f"{prefix}_nodeids"],
        attrs[f"{prefix}_ids"],
        attrs[f"{prefix}_weights"],
        strict=True,
    ):
        row = leaves.setdefault((int(tree), int(node)), np.zeros(k))
        row[int(column)] += float(weight)
    is_leaf = np.array([m == "LEAF" for m in modes])
    tracks_true = np.asarray(attrs["nodes_missing_value_tracks_true"], dtype=bool)
    true_ids = np.asarray(attrs["nodes_truenodeids"], dtype=np.int64)
    false_ids = np.asarray(attrs["nodes_falsenodeids"], dtype=np.int64)
    trees = np.asarray(attrs["nodes_treeids"], dtype=np.int64)
    nodes = np.asarray(attrs["nodes_nodeids"], dtype=np.int64)
    features = np.where(is_leaf, -1, np.asarray(attrs["nodes_featureids"], dtype=np.int64))
    values = np.vstack(
        [leaves.get((int(t), int(n)), np.zeros(k)) for t, n in zip(trees, nodes, strict=True)]
    )
    base = np.asarray(attrs.get("base_values") or np.zeros(k), dtype=np.float64)
    spec = TreeEnsembleSpec(
        tree=trees,
        node=nodes,
        feature=features,
        threshold=np.where(is_leaf, 0.0, np.asarray(attrs["nodes_values"], dtype=np.float64)),
        # x > t is the true branch: x <= t goes to the false one, which becomes "left".
        left=np.where(is_leaf, -1, false_ids),
        right=np.where(is_leaf, -1, true_ids),
        missing_left=~tracks_true & ~is_leaf,
        values=values,
        base=base,
        rule="leq",
        native="float32",
        n_features=int(model.n_features_in_),
    )
    labels = list(attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or [])
    labels = [v.decode() if isinstance(v, bytes) else v for v in labels]
    return spec, attrs.get("post_transform", "NONE"), labels


def _classifier_parser(scope: Any, model: Any, inputs: Any, custom_parsers: Any = None) -> Any:
    """Declare label and probabilities (skl2onnx's default parser gives a non-``ClassifierMixin``
    model, which CatBoost is, a single output), then ZipMap when it is asked for."""
    from skl2onnx._parse import _apply_zipmap
    from skl2onnx._supported_operators import _get_sklearn_operator_name
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType

    operator = scope.declare_local_operator(_get_sklearn_operator_name(type(model)), model)
    operator.inputs = list(inputs)
    operator.outputs.append(scope.declare_local_variable("label", Int64TensorType()))
    operator.outputs.append(scope.declare_local_variable("probabilities", FloatTensorType()))
    options = scope.get_options(model, {"zipmap": True})
    if options["zipmap"] is False:
        return operator.outputs
    return _apply_zipmap(options["zipmap"], scope, model, inputs[0].type, operator.outputs)


def _check_label_type(model: Any) -> None:
    """Refuse boolean and float labels before CatBoost's export fails on them obscurely."""
    classes = np.asarray(model.classes_)
    if classes.dtype.kind in "bf":
        kind = "boolean" if classes.dtype.kind == "b" else "float"
        raise ConversionError(
            f"CatBoostClassifier fitted on {kind} labels {classes.tolist()[:10]} cannot be "
            "converted: CatBoost's ONNX export carries integer and string labels only; fit it "
            "on integers or strings, or wrap it as onnxbridge.train.LabelEncodedClassifier("
            "CatBoostClassifier(...)) before fitting (onnxbridge train does that itself)"
        )


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check_label_type(model)
    spec, post, labels = catboost_spec(model)
    classes = [str(c) for c in np.asarray(model.classes_)]
    if [str(c) for c in labels] != classes:
        raise ConversionError(
            f"CatBoost's ONNX export orders the classes {labels}, the model {classes}; "
            "onnxbridge cannot map them"
        )
    transforms = {"LOGISTIC": "ova", "SOFTMAX": "softmax", "NONE": "none"}
    if post not in transforms:
        raise ConversionError(
            f"CatBoost's ONNX export uses post_transform {post!r}; onnxbridge handles "
            f"{', '.join(transforms)}"
        )
    write_classifier(scope, operator, container, spec, transform=transforms[post])


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    spec, post, _ = catboost_spec(operator.raw_operator)
    if post != "NONE":
        raise ConversionError(
            f"CatBoost's ONNX export uses post_transform {post!r} for a regressor; onnxbridge "
            "handles NONE (loss functions with an identity output)"
        )
    write_regressor(scope, operator, container, spec)


def _data(classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(300, 5)).astype(np.float32).astype(np.float64)
    X[rng.rand(*X.shape) < 0.1] = np.nan
    score = np.nan_to_num(X[:, 0], nan=-2.0) + 0.5 * np.nan_to_num(X[:, 1])
    return X, example_target(score, classes, rng)


_PARAMS = {
    "iterations": 15,
    "depth": 4,
    "random_seed": 0,
    "verbose": 0,
    "thread_count": 1,
    "allow_writing_files": False,  # no catboost_info/ folder in the working directory
}


def _classifier_example() -> tuple[Any, Any]:
    X, y = _data(3)
    return CatBoostClassifier(**_PARAMS).fit(X, y), X


def _regressor_example() -> tuple[Any, Any]:
    X, y = _data(None)
    return CatBoostRegressor(**_PARAMS).fit(X, y), X


# CatBoostClassifier is no ClassifierMixin: skl2onnx's generic parser (used for models inside
# meta-estimators, e.g. LabelEncodedClassifier) gives it its label and probabilities only when
# it is on this list.
if CatBoostClassifier not in sklearn_classifier_list:
    sklearn_classifier_list.append(CatBoostClassifier)
register_converter(
    ConverterSpec(
        CatBoostClassifier,
        classifier_shape,
        _classifier_convert,
        _classifier_example,
        parser=_classifier_parser,
        options=CLASSIFIER_OPTIONS,
        family=__name__,
    )
)
register_converter(
    ConverterSpec(
        CatBoostRegressor, regressor_shape, _regressor_convert, _regressor_example, family=__name__
    )
)
