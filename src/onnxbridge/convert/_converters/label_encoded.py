"""LabelEncodedClassifier: a classifier fitted on labels ``0 … K-1`` that answers in the data's
own labels (what ``train`` fits for XGBoost on text labels, for example).

The inner classifier is converted by its own converter; its label is the class index, so
``[N, F] -> label [N] = classes_[inner label]`` (strings stay strings; integers, booleans and
integral floats are int64 as every classifier's labels are) and ``probabilities [N, K]`` are the
inner model's, whose column ``k`` is ``classes_[k]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from onnxbridge._labels import LabelEncodedClassifier
from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _inner_classes(model: Any) -> None:
    """Refuse an inner model whose labels are not the indices ``0 … K-1`` of ``classes_``."""
    inner = np.asarray(getattr(model.estimator_, "classes_", []))
    if inner.dtype.kind not in "iu" or not np.array_equal(inner, np.arange(len(model.classes_))):
        raise ConversionError(
            f"LabelEncodedClassifier's inner {type(model.estimator_).__name__} has classes "
            f"{inner.tolist()[:10]}, not 0 … {len(model.classes_) - 1}; refit the wrapper "
            "(its fit encodes the labels)"
        )


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, len(model.classes_)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _inner_classes(model)
    g = Nodes(scope, operator, container)
    # Every input: a table with text columns has one input per column.
    index, probabilities = g.classifier_outputs(model.estimator_, list(operator.inputs), "inner")
    g.identity(probabilities, operator.outputs[1].full_name)
    g.labels(model.classes_, index, output=operator.outputs[0].full_name)


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(200, 4))
    score = X[:, 0] - 0.5 * X[:, 1]
    y = np.array(["high", "low", "mid"], dtype=object)[np.digitize(score, [-0.5, 0.5])]
    model = LabelEncodedClassifier(DecisionTreeClassifier(max_depth=4, random_state=0))
    return model.fit(X, y), X


register_converter(
    ConverterSpec(
        LabelEncodedClassifier,
        _shape,
        _convert,
        _example,
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
