"""DummyClassifier and DummyRegressor: baselines that predict a constant.

skl2onnx has no converter for them. Each output row repeats the fitted constant (class prior and
most frequent class, or the regression constant): ``[N, F] -> label [N], probabilities [N, C]`` /
``value [N, T]``. The random strategies (``stratified``, ``uniform``) cannot be reproduced by a
graph and are refused with a clear message.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_classification, make_regression
from sklearn.dummy import DummyClassifier, DummyRegressor

from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _float_type(operator: Any) -> tuple[type, int, type]:
    """(skl2onnx tensor type, ONNX element type, numpy dtype) matching the input precision."""
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    if isinstance(operator.inputs[0].type, DoubleTensorType):
        return DoubleTensorType, TensorProto.DOUBLE, np.float64
    return FloatTensorType, TensorProto.FLOAT, np.float32


def _repeat_rows(
    scope: Any, container: Any, source: str, row: np.ndarray, onnx_type: int, output: str
) -> None:
    """``output[N, K] = row`` repeated once per row of ``source`` (NaN in the input is harmless)."""
    name = scope.get_unique_variable_name
    shape, width, const = name("shape"), name("k"), name("row")
    container.add_node(
        "Shape", [source], [shape], name=scope.get_unique_operator_name("Shape"), start=0, end=1
    )
    container.add_initializer(width, TensorProto.INT64, [1], [row.shape[1]])
    target = name("target")
    container.add_node(
        "Concat", [shape, width], [target], axis=0, name=scope.get_unique_operator_name("Concat")
    )
    if onnx_type == TensorProto.STRING:
        container.add_initializer(
            const, onnx_type, list(row.shape), [str(v).encode() for v in row.ravel()]
        )
    else:
        container.add_initializer(const, onnx_type, list(row.shape), row.ravel().tolist())
    container.add_node(
        "Expand", [const, target], [output], name=scope.get_unique_operator_name("Expand")
    )


def _check_strategy(model: Any, allowed: tuple[str, ...]) -> None:
    if model.strategy not in allowed:
        raise ConversionError(
            f"{type(model).__name__}(strategy={model.strategy!r}) predicts at random and has no "
            f"ONNX equivalent; use strategy in {allowed}"
        )


def _classifier_shape(operator: Any) -> None:
    from skl2onnx.common.data_types import Int64TensorType, StringTensorType

    model = operator.raw_operator
    tensor_type, _, _ = _float_type(operator)
    label_type = StringTensorType if model.classes_.dtype.kind in "OUS" else Int64TensorType
    operator.outputs[0].type = label_type([None])
    operator.outputs[1].type = tensor_type([None, len(model.classes_)])


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check_strategy(model, ("prior", "most_frequent"))
    _, onnx_type, dtype = _float_type(operator)
    prior: np.ndarray = np.asarray(model.class_prior_, dtype=dtype).reshape(1, -1)
    if model.strategy == "most_frequent":
        # predict_proba puts all the mass on the most frequent class.
        prior = np.zeros_like(prior)
        prior[0, int(np.argmax(model.class_prior_))] = 1
    classes = np.asarray(model.classes_)
    best = classes[int(np.argmax(model.class_prior_))]
    x = operator.inputs[0].full_name
    if classes.dtype.kind in "OUS":
        label = np.array([[best]], dtype=object)
        label_type = TensorProto.STRING
    else:
        label = np.array([[int(best)]], dtype=np.int64)
        label_type = TensorProto.INT64
    label_2d = scope.get_unique_variable_name("label_2d")
    _repeat_rows(scope, container, x, label, label_type, label_2d)
    axes = scope.get_unique_variable_name("axes")
    container.add_initializer(axes, TensorProto.INT64, [1], [1])
    container.add_node(
        "Squeeze",
        [label_2d, axes],
        [operator.outputs[0].full_name],
        name=scope.get_unique_operator_name("Squeeze"),
    )
    _repeat_rows(scope, container, x, prior, onnx_type, operator.outputs[1].full_name)


def _regressor_shape(operator: Any) -> None:
    tensor_type, _, _ = _float_type(operator)
    operator.outputs[0].type = tensor_type([None, operator.raw_operator.constant_.shape[-1]])


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _, onnx_type, dtype = _float_type(operator)
    constant: np.ndarray = np.asarray(model.constant_, dtype=dtype).reshape(1, -1)
    _repeat_rows(
        scope,
        container,
        operator.inputs[0].full_name,
        constant,
        onnx_type,
        operator.outputs[0].full_name,
    )


def _classifier_example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=60, n_features=4, n_classes=3, n_informative=3, n_redundant=0, random_state=0
    )
    return DummyClassifier(strategy="prior").fit(X, y), X


def _regressor_example() -> tuple[Any, Any]:
    X, y = make_regression(n_samples=60, n_features=4, random_state=0)
    return DummyRegressor(strategy="median").fit(X, y), X


register_converter(
    ConverterSpec(
        DummyClassifier,
        _classifier_shape,
        _classifier_convert,
        _classifier_example,
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
register_converter(
    ConverterSpec(DummyRegressor, _regressor_shape, _regressor_convert, _regressor_example)
)
