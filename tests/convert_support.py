"""A transformer with a wrong converter, for the tests of convert's check before writing."""

from __future__ import annotations

from functools import partial

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin


class Shifter(TransformerMixin, BaseEstimator):
    """Adds 1 to every value; the converter :func:`register_wrong_converter` registers adds 2."""

    def fit(self, X, y=None):
        self.n_features_in_ = np.shape(X)[1]
        return self

    def transform(self, X):
        return np.asarray(X, dtype=np.float64) + 1.0


def _shape(operator) -> None:
    operator.outputs[0].type = operator.inputs[0].type.__class__([None, None])


def _convert(scope, operator, container) -> None:
    from onnx import TensorProto

    double = "Double" in type(operator.inputs[0].type).__name__
    two = scope.get_unique_variable_name("two")
    container.add_initializer(two, TensorProto.DOUBLE if double else TensorProto.FLOAT, [1], [2.0])
    container.add_node("Add", [operator.inputs[0].full_name, two], [operator.outputs[0].full_name])


def _example(cls: type[Shifter]):
    X = np.arange(6, dtype=float).reshape(3, 2)
    return cls().fit(X), X


def register_wrong_converter(cls: type[Shifter]) -> type[Shifter]:
    """Register the converter that adds 2 for ``cls`` (a :class:`Shifter`), once."""
    from onnxbridge.convert import ConverterSpec, find_converter, register_converter

    if find_converter(cls) is None:
        register_converter(ConverterSpec(cls, _shape, _convert, partial(_example, cls)))
    return cls
