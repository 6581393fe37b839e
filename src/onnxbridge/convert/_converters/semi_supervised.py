"""Semi-supervised classifiers: SelfTrainingClassifier, LabelPropagation, LabelSpreading.

skl2onnx has no converter for them.

- SelfTrainingClassifier predicts with its fitted ``estimator_``: the inner classifier is
  converted by its own converter, label and probabilities (or decision scores) pass through.
- LabelPropagation / LabelSpreading (``[N, F] -> label [N], probabilities [N, C]``):
  ``rbf``: ``P = exp(-gamma * ||x - X_||^2) @ label_distributions_``; ``knn``: ``P`` = the sum of
  ``label_distributions_`` over the ``n_neighbors`` nearest training points (euclidean);
  then ``P / sum(P)`` per row and ``label = classes_[argmax]``. Distances are computed in
  float64. A callable kernel is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.semi_supervised import LabelPropagation, LabelSpreading, SelfTrainingClassifier

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

_OPTIONS: dict[str, list[Any]] = {"zipmap": [False, True, "columns"], "nocl": [False, True]}


def _classifier_shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, len(model.classes_)])


def _self_training_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    label, second = g.classifier_outputs(model.estimator_, [operator.inputs[0]], hint="inner")
    g.identity(label, operator.outputs[0].full_name)
    g.identity(second, operator.outputs[1].full_name)


def _squared_distances(g: Nodes, x: str, train: np.ndarray) -> str:
    """``[N, M]`` float64 squared euclidean distances (exact differences, no dot trick)."""
    x64 = g.op("Cast", [x], to=TensorProto.DOUBLE)
    x3 = g.op("Unsqueeze", [x64, g.const(np.array([1]))])
    diff = g.op("Sub", [x3, g.const(train[np.newaxis], dtype=np.float64)])
    return g.op("ReduceSumSquare", [diff, g.const(np.array([2]))], keepdims=0)


def _propagation_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    train = np.asarray(model.X_, dtype=np.float64)
    spread = np.asarray(model.label_distributions_, dtype=np.float64)
    squared = _squared_distances(g, operator.inputs[0].full_name, train)
    if model.kernel == "rbf":
        scaled = g.op("Mul", [squared, g.const(np.array(-float(model.gamma)), dtype=np.float64)])
        raw = g.op("MatMul", [g.op("Exp", [scaled]), g.const(spread, dtype=np.float64)])
    elif model.kernel == "knn":
        k = int(model.n_neighbors)
        if k > len(train):
            raise ConversionError(
                f"{type(model).__name__}(n_neighbors={k}) exceeds the {len(train)} training "
                "points; use n_neighbors <= the number of training rows"
            )
        container_k = g.const(np.array([k]))
        topk_values = g.name("nearest_d")
        topk_index = g.name("nearest_i")
        container.add_node(
            "TopK",
            [squared, container_k],
            [topk_values, topk_index],
            name=scope.get_unique_operator_name("TopK"),
            axis=1,
            largest=0,
            sorted=1,
        )
        gathered = g.op("Gather", [g.const(spread, dtype=np.float64), topk_index], axis=0)
        raw = g.op("ReduceSum", [gathered, g.const(np.array([1]))], keepdims=0)
    else:
        raise ConversionError(
            f"{type(model).__name__}(kernel={model.kernel!r}): a callable kernel has no ONNX "
            "equivalent; use kernel='rbf' or 'knn'"
        )
    total = g.op("ReduceSum", [raw, g.const(np.array([1]))], keepdims=1)
    proba = g.op("Div", [raw, total])
    g.op("Cast", [proba], output=operator.outputs[1].full_name, to=g.onnx_float)
    g.labels(model.classes_, g.argmax(proba), output=operator.outputs[0].full_name)


def _partly_labelled() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=150, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    y = y.copy()
    y[np.random.RandomState(0).rand(len(y)) < 0.5] = -1  # half unlabelled
    return X, y


def _self_training_example() -> tuple[Any, Any]:
    X, y = _partly_labelled()
    return SelfTrainingClassifier(LogisticRegression()).fit(X, y), X


def _propagation_example() -> tuple[Any, Any]:
    X, y = _partly_labelled()
    return LabelPropagation(gamma=1.0).fit(X, y), X


def _spreading_example() -> tuple[Any, Any]:
    X, y = _partly_labelled()
    return LabelSpreading(kernel="knn", n_neighbors=7).fit(X, y), X


register_converter(
    ConverterSpec(
        SelfTrainingClassifier,
        _classifier_shape,
        _self_training_convert,
        _self_training_example,
        options=_OPTIONS,
    )
)
register_converter(
    ConverterSpec(
        LabelPropagation,
        _classifier_shape,
        _propagation_convert,
        _propagation_example,
        options=_OPTIONS,
    )
)
register_converter(
    ConverterSpec(
        LabelSpreading,
        _classifier_shape,
        _propagation_convert,
        _spreading_example,
        options=_OPTIONS,
    )
)
