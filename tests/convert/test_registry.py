"""The converter registry refuses what would go wrong silently."""

from __future__ import annotations

import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LinearRegression

from onnxbridge.convert import _registry as registry
from onnxbridge.convert._registry import ConverterSpec, find_converter, get_converter
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
    # A copy of the real registry (every converter loaded) that the test may add to; the real
    # one comes back when the test ends.
    copy = {spec.estimator: spec for spec in registry.registered_converters()}
    monkeypatch.setattr(registry, "_REGISTRY", copy)
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


def test_upstream_converters_gives_skl2onnx_its_own_back() -> None:
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.dummy import DummyRegressor
    from sklearn.ensemble import RandomForestClassifier

    from onnxbridge.convert._registry import load_converters, upstream_converters

    load_converters()
    X = np.random.RandomState(0).rand(30, 3).astype(np.float32)
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, X[:, 0] > 0.5)
    ours = {n.op_type for n in to_onnx(forest, X[:2], options={"zipmap": False}).graph.node}
    with upstream_converters():
        theirs = {n.op_type for n in to_onnx(forest, X[:2], options={"zipmap": False}).graph.node}
        with pytest.raises(RuntimeError, match="DummyRegressor"):
            to_onnx(DummyRegressor().fit(X, X[:, 0]), X[:2])
    assert "ArgMax" in ours and "ArgMax" not in theirs  # our head picks the label itself
    assert find_converter(DummyRegressor) is not None
    assert {n.op_type for n in to_onnx(forest, X[:2], options={"zipmap": False}).graph.node} == ours
