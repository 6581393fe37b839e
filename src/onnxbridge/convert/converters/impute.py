"""MissingIndicator: which entries of the selected features are missing.

skl2onnx has no converter for it (only for the indicator inside SimpleImputer).
``[N, F] -> transformed [N, K]``, K the features kept at fit (``features_``: all of them, or only
those that had missing values). scikit-learn returns booleans; the graph returns 0.0 / 1.0 in the
input's float type, the form every downstream ONNX operator takes, equal to scikit-learn's mask
value for value. What a graph cannot do: raise as scikit-learn does (``error_on_new=True``) when a
feature that had no missing values at fit has some at transform; such a feature is not reported,
as in scikit-learn's output for ``error_on_new=False``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.impute import MissingIndicator

from onnxbridge.convert.converters._graph import Graph, set_float_output
from onnxbridge.convert.registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, len(operator.raw_operator.features_)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    marker = model.missing_values
    if isinstance(marker, (str, bytes)) or marker is None:
        raise ConversionError(
            f"MissingIndicator(missing_values={marker!r}) marks text entries; onnxbridge converts "
            "numeric inputs only: use missing_values=np.nan or a number"
        )
    g = Graph(scope, operator, container)
    if isinstance(marker, float) and np.isnan(marker):
        mask = g.node("IsNaN", [g.input])
    else:
        mask = g.node("Equal", [g.input, g.const(marker)])
    features = np.asarray(model.features_, dtype=np.int64)
    if len(features) < model.n_features_in_:
        mask = g.node("Gather", [mask, g.int64(features)], axis=1)
    g.node("Cast", [mask], g.output(), to=g.onnx_type)


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 5))
    # Every feature misses some values at fit: with the default error_on_new=True scikit-learn
    # refuses NaN anywhere else, and onnxbridge's missing-value probe would say so.
    X[rng.rand(60, 5) < [0.1, 0.2, 0.05, 0.3, 0.1]] = np.nan
    return MissingIndicator().fit(X), X


register_converter(ConverterSpec(MissingIndicator, _shape, _convert, _example))
