"""SequentialFeatureSelector: keeps the columns its search selected.

skl2onnx has no converter for it. ``transform`` is ``X[:, support_]``: ``[N, F] -> [N, K]``, a
Gather of the selected columns (the estimator used for the search plays no part).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.feature_selection import SequentialFeatureSelector
from sklearn.neighbors import KNeighborsClassifier

from onnxbridge.convert._converters._meta import Nodes
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = type(operator.inputs[0].type)([None, int(model.support_.sum())])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    selected = np.flatnonzero(model.support_)
    if selected.size == 0:
        raise ConversionError(
            "SequentialFeatureSelector selected no feature; nothing to convert (use "
            "n_features_to_select >= 1)"
        )
    inputs = [v.full_name for v in operator.inputs]
    x = inputs[0] if len(inputs) == 1 else g.op("Concat", inputs, axis=1)
    g.op("Gather", [x, g.const(selected)], output=operator.outputs[0].full_name, axis=1)


def _example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=120, n_features=6, n_informative=3, n_classes=3, random_state=0
    )
    selector = SequentialFeatureSelector(
        KNeighborsClassifier(n_neighbors=3), n_features_to_select=3
    )
    return selector.fit(X, y), X


register_converter(ConverterSpec(SequentialFeatureSelector, _shape, _convert, _example))
