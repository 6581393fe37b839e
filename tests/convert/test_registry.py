"""The converter registry refuses what would go wrong silently."""

from __future__ import annotations

import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LinearRegression

from onnxbridge.convert import registry
from onnxbridge.convert.registry import ConverterSpec, find_converter, get_converter
from onnxbridge.errors import ConverterRegistryError, MissingConverterError


class _Doubler(TransformerMixin, BaseEstimator):
    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X * 2


def _shape(operator):
    operator.outputs[0].type = operator.inputs[0].type.__class__([None, None])


def _convert(scope, operator, container):
    container.add_node("Add", [operator.inputs[0].full_name] * 2, [operator.outputs[0].full_name])


def _example():
    import numpy as np

    X = np.arange(6, dtype=float).reshape(3, 2)
    return _Doubler().fit(X), X


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    return registry


def test_register_and_find(clean_registry) -> None:
    spec = clean_registry.register_converter(ConverterSpec(_Doubler, _shape, _convert, _example))
    assert spec.family == __name__
    assert find_converter(_Doubler) is spec
    assert get_converter(_Doubler()) is spec
    assert spec.operator_alias == "Onnxbridge_Doubler"


def test_twice_is_refused(clean_registry) -> None:
    clean_registry.register_converter(ConverterSpec(_Doubler, _shape, _convert, _example))
    with pytest.raises(ConverterRegistryError, match="registered already"):
        clean_registry.register_converter(ConverterSpec(_Doubler, _shape, _convert, _example))


def test_wrong_signature_is_refused(clean_registry) -> None:
    with pytest.raises(ConverterRegistryError, match="skl2onnx calls it with 3"):
        clean_registry.register_converter(
            ConverterSpec(_Doubler, _shape, lambda scope, operator: None, _example)
        )


def test_silent_replacement_is_refused(clean_registry) -> None:
    with pytest.raises(ConverterRegistryError, match="already converts LinearRegression"):
        clean_registry.register_converter(
            ConverterSpec(LinearRegression, _shape, _convert, _example)
        )


def test_get_raises_find_returns_none() -> None:
    assert find_converter(_Doubler) is None
    with pytest.raises(MissingConverterError, match="no converter of its own for _Doubler"):
        get_converter(_Doubler)
