"""IsotonicRegression: piecewise-linear interpolation between the fitted thresholds.

skl2onnx has no converter. ``predict`` is scipy's ``interp1d(X_thresholds_, y_thresholds_)``:
the interval of a value is found as ``searchsorted`` does (thresholds strictly below it, clipped to
the inner intervals), then ``y_lo + slope * (x - x_lo)``. ``out_of_bounds="nan"`` gives NaN
outside ``[X_min_, X_max_]``, ``"clip"`` clips first. ``[N, 1] -> value [N, 1]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.isotonic import IsotonicRegression

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, 1])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if model.out_of_bounds == "raise":
        raise ConversionError(
            "IsotonicRegression(out_of_bounds='raise') raises on values outside the training "
            "range, which an ONNX graph cannot do; refit with out_of_bounds='nan' or 'clip'"
        )
    g = Graph(scope, operator, container)
    xs = np.asarray(model.X_thresholds_, dtype=np.float64)
    ys = np.asarray(model.y_thresholds_, dtype=np.float64)
    x = g.input
    if model.out_of_bounds == "clip":
        x = g.node("Clip", [x, g.const(model.X_min_), g.const(model.X_max_)])
    if len(xs) == 1:
        # A single threshold: scikit-learn predicts that constant everywhere.
        zero = g.node("Mul", [x, g.const(0.0)])
        g.node("Add", [zero, g.const(ys[0])], g.output())
        return
    # Interval index as searchsorted(side="left"), clipped to [1, m - 1], minus 1.
    inner = xs[1:-1].reshape(1, -1)
    below = g.node("Cast", [g.node("Greater", [x, g.const(inner)])], to=7)  # int64
    index = g.node("ReduceSum", [below, g.int64([1])], keepdims=1)
    x_lo = g.node("Gather", [g.const(xs[:-1]), index], axis=0)
    y_lo = g.node("Gather", [g.const(ys[:-1]), index], axis=0)
    slopes = (ys[1:] - ys[:-1]) / (xs[1:] - xs[:-1])
    slope = g.node("Gather", [g.const(slopes), index], axis=0)
    offset = g.node("Mul", [slope, g.node("Sub", [x, x_lo])])
    value = g.node("Add", [offset, y_lo])
    if model.out_of_bounds == "nan":
        outside = g.node(
            "Or",
            [g.node("Less", [x, g.const(xs[0])]), g.node("Greater", [x, g.const(xs[-1])])],
        )
        value = g.node("Where", [outside, g.const(np.nan), value])
    g.node("Identity", [value], g.output())


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(80, 1))
    y = np.tanh(X[:, 0]) + rng.normal(scale=0.2, size=80)
    # A few rows outside the training range check the NaN edges.
    X_eval = np.vstack([X, [[-4.0], [4.0], [X.min()], [X.max()]]])
    return IsotonicRegression().fit(X, y), X_eval


register_converter(ConverterSpec(IsotonicRegression, _shape, _convert, _example))
