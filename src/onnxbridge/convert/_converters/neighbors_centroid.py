"""NearestCentroid: the class of the closest centroid, and discriminant probabilities.

skl2onnx has no converter. ``[N, F] -> label [N], probabilities [N, C]``.

- ``predict`` with uniform priors (the default) is the class of the nearest centroid in plain
  euclidean distance; with other priors it is the argmax of the discriminant scores below.
- ``predict_proba`` is the softmax of the discriminant scores
  ``-|x/s - c/s|² + 2 log prior`` (``s`` the within-class standard deviation of each feature,
  features with ``s = 0`` left unscaled), scikit-learn's eq. 18.2 of ESL.

``metric="manhattan"`` is refused: scikit-learn gives such a model neither ``predict_proba`` nor
``decision_function``, so its second output would have nothing to be checked against.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.neighbors import NearestCentroid

from onnxbridge.convert._converters._graph import (
    Graph,
    gather_labels,
    label_tensor_type,
    set_float_output,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _class_labels(scope: Any, model: Any) -> np.ndarray:
    """The labels the graph outputs: the classes, or their indices with skl2onnx's ``nocl``."""
    if scope.get_options(model, {"nocl": False})["nocl"]:
        return np.arange(len(model.classes_), dtype=np.int64)
    return model.classes_


def _shape(operator: Any) -> None:
    classes = _class_labels(operator.scope_inst, operator.raw_operator)
    operator.outputs[0].type = label_tensor_type(classes)([None])
    set_float_output(operator, 1, [None, len(classes)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if model.metric != "euclidean":
        raise ConversionError(
            f"NearestCentroid(metric={model.metric!r}) cannot be converted: scikit-learn gives "
            "it no predict_proba to check the graph against; refit with metric='euclidean'"
        )
    g = Graph(scope, operator, container)
    centroids = np.asarray(model.centroids_, dtype=np.float64)
    std = np.asarray(model.within_class_std_dev_, dtype=np.float64).copy()
    std[std == 0] = 1.0
    prior = np.asarray(model.class_prior_, dtype=np.float64)
    # Discriminant scores [N, C] and their softmax.
    scaled = g.node("Div", [g.input, g.const(std.reshape(1, -1))])
    distances = g.squared_euclidean(scaled, centroids / std)
    scores = g.node("Sub", [g.const(2.0 * np.log(prior).reshape(1, -1)), distances])
    g.node("Softmax", [scores], g.output(1), axis=1)
    if np.isclose(prior, 1 / len(model.classes_)).all():
        index = g.node("ArgMin", [g.squared_euclidean(g.input, centroids)], axis=1, keepdims=0)
    else:
        index = g.node("ArgMax", [scores], axis=1, keepdims=0)
    gather_labels(g, index, _class_labels(scope, model), "NearestCentroid", g.output(0))


def _example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=90, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=0
    )
    return NearestCentroid().fit(X, y), X


register_converter(
    ConverterSpec(
        NearestCentroid,
        _shape,
        _convert,
        _example,
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
