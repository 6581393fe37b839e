"""Missing-value masks: MissingIndicator, and the indicator columns of SimpleImputer / KNNImputer.

MissingIndicator: skl2onnx has no converter for it. ``[N, F] -> transformed [N, K]``, K the
features kept at fit (``features_``: all of them, or only those that had missing values).
scikit-learn returns booleans; the graph returns 0.0 / 1.0 in the input's float type, the form
every downstream ONNX operator takes, equal to scikit-learn's mask value for value. What a graph
cannot do: raise as scikit-learn does (``error_on_new=True``) when a feature that had no missing
values at fit has some at transform; such a feature is not reported, as in scikit-learn's output
for ``error_on_new=False``.

An imputer fitted with ``add_indicator=True`` appends its ``indicator_`` (a MissingIndicator over
the features that had missing values at fit) after the imputed columns. skl2onnx's SimpleImputer
and KNNImputer converters leave those columns out while the next step (a scaler, a linear model)
was fitted on them, so the graph is one column short per indicator: it fails to build, refuses to
run, or (a step sized from its own constants) runs and answers wrongly. The helpers below append
them; SimpleImputer's converter is in :mod:`onnxbridge.convert.converters.string_imputer`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.impute import MissingIndicator

from onnxbridge.convert.converters._graph import Graph, set_float_output
from onnxbridge.convert.registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

__all__ = ["append_indicator", "indicator_width", "missing_mask", "numeric_marker"]


def numeric_marker(model: Any) -> float:
    """The model's ``missing_values`` when a numeric graph can test for it (NaN or a number).

    Raises:
        ConversionError: the marker is text or None.
    """
    marker = model.missing_values
    if isinstance(marker, (str, bytes)) or marker is None:
        raise ConversionError(
            f"{type(model).__name__}(missing_values={marker!r}) marks text entries; onnxbridge "
            "converts numeric inputs only: use missing_values=np.nan or a number"
        )
    return float(marker)


def missing_mask(g: Graph, x: str, marker: float) -> str:
    """``[N, F] -> [N, F]`` booleans: which entries of ``x`` are ``marker`` (NaN: IsNaN)."""
    output = g.name("is_missing")
    if np.isnan(marker):
        return g.node("IsNaN", [x], output)
    return g.node("Equal", [x, g.const(marker, hint="missing_value")], output)


def _indicator_features(indicator: Any) -> np.ndarray:
    return np.asarray(indicator.features_, dtype=np.int64)


def _indicator_columns(g: Graph, mask: str, indicator: Any, output: str | None = None) -> str:
    """``[N, F]`` booleans -> ``[N, K]`` 0.0 / 1.0: the mask of the indicator's features."""
    features = _indicator_features(indicator)
    # Distinct names: skl2onnx's KNNImputer graph writes plain ones ("isnan", "cast") that the
    # scope does not reserve.
    if len(features) < indicator.n_features_in_:
        kept = g.int64(features, hint="indicator_features")
        mask = g.node("Gather", [mask, kept], g.name("indicator_mask"), axis=1)
    return g.node("Cast", [mask], output or g.name("indicator"), to=g.onnx_type)


def indicator_width(model: Any) -> int:
    """How many indicator columns the imputer ``model`` appends (0 without ``add_indicator``)."""
    indicator = getattr(model, "indicator_", None)
    return 0 if indicator is None else len(_indicator_features(indicator))


def append_indicator(g: Graph, imputed: str, x: str, model: Any) -> None:
    """Write ``[imputed, indicator columns of x]`` to the operator's output (``imputed`` alone
    when the imputer has no indicator columns)."""
    if not indicator_width(model):
        g.node("Identity", [imputed], g.output())
        return
    mask = missing_mask(g, x, numeric_marker(model))
    columns = _indicator_columns(g, mask, model.indicator_)
    g.node("Concat", [imputed, columns], g.output(), axis=1)


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, len(operator.raw_operator.features_)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    marker = numeric_marker(model)
    g = Graph(scope, operator, container)
    _indicator_columns(g, missing_mask(g, g.input, marker), model, g.output())


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 5))
    # Every feature misses some values at fit: with the default error_on_new=True scikit-learn
    # refuses NaN anywhere else, and onnxbridge's missing-value probe would say so.
    X[rng.rand(60, 5) < [0.1, 0.2, 0.05, 0.3, 0.1]] = np.nan
    return MissingIndicator().fit(X), X


register_converter(ConverterSpec(MissingIndicator, _shape, _convert, _example))
