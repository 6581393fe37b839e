"""SplineTransformer: the B-spline basis of every feature, ``[N, F] -> transformed [N, F * S]``.

skl2onnx has no converter. The basis is evaluated as scipy's ``BSpline`` does (de Boor): the
knot interval ``l`` of each value (``t[l] <= x < t[l + 1]``, clipped to the base intervals, the
right end belonging to the last one), then the Cox-de Boor recursion from the indicator of ``l``,
all features at once on an ``[N, F, knots]`` tensor (the degree loop is unrolled at conversion).
The result is multiplied by the spline coefficients (the identity, or its periodic wrap).

Extrapolation follows scikit-learn: ``constant`` (boundary values of the first / last ``degree``
splines), ``linear`` (their tangent), ``continue`` (the polynomial pieces), ``periodic``
(values wrapped into the base interval). With ``linear`` and ``degree <= 1``, scikit-learn
moves the boundaries of the second and later features one knot inwards (its working degree is
raised until it is 2 and never reset); the graph does the same, so results stay identical.
``error`` cannot raise in a graph: rows outside the knots give NaN there, where scikit-learn
raises. Missing values give zeros (``handle_missing="zeros"``; with ``"error"`` scikit-learn
raises instead). ``sparse_output=True`` gives the same values as a dense tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.preprocessing import SplineTransformer

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _n_outputs(model: Any) -> int:
    n_splines = model.bsplines_[0].c.shape[1]
    per_feature = n_splines if model.include_bias else n_splines - 1
    return per_feature * len(model.bsplines_)


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, _n_outputs(operator.raw_operator)])


def _basis(g: Graph, x3: str, knots: np.ndarray, degree: int) -> str:
    """``[N, F, 1] -> [N, F, n_basis]``: every B-spline of each feature's knots at x."""
    n_knots = knots.shape[1]
    n_basis = n_knots - degree - 1
    # Interval index l in [degree, n_basis - 1] (scipy's find_interval with clipping).
    inner = knots[:, degree + 1 : n_basis]
    if inner.shape[1] == 0:
        interval = g.node("Cast", [g.node("Mul", [x3, g.const(0.0)])], to=7)
    else:
        above = g.node("Cast", [g.node("GreaterOrEqual", [x3, g.const(inner)])], to=7)
        interval = g.node("ReduceSum", [above, g.int64([2])], keepdims=1)
    interval = g.node("Add", [interval, g.int64(degree)])
    positions = g.int64(np.arange(n_knots - 1).reshape(1, 1, -1))
    basis = g.node("Cast", [g.node("Equal", [interval, positions])], to=g.onnx_type)
    for p in range(1, degree + 1):
        width = n_knots - p - 1  # basis functions of degree p
        t_i, t_ip = knots[:, :width], knots[:, p : p + width]
        t_i1, t_ip1 = knots[:, 1 : 1 + width], knots[:, p + 1 : p + 1 + width]
        # Zero-width spans (repeated knots) contribute nothing, as in de Boor's algorithm.
        inv_left = _safe_inverse(t_ip - t_i)
        inv_right = _safe_inverse(t_ip1 - t_i1)
        left = g.node("Mul", [g.node("Sub", [x3, g.const(t_i[None])]), g.const(inv_left[None])])
        right = g.node("Mul", [g.node("Sub", [g.const(t_ip1[None]), x3]), g.const(inv_right[None])])
        lower = _slice(g, basis, 0, width)
        upper = _slice(g, basis, 1, width + 1)
        basis = g.node("Add", [g.node("Mul", [left, lower]), g.node("Mul", [right, upper])])
    return basis


def _safe_inverse(span: np.ndarray) -> np.ndarray:
    out = np.zeros_like(span)
    np.divide(1.0, span, out=out, where=span != 0)
    return out


def _slice(g: Graph, tensor: str, start: int, end: int) -> str:
    return g.node("Slice", [tensor, g.int64([start]), g.int64([end]), g.int64([2])])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    splines = model.bsplines_
    degree = int(model.degree)
    knots = np.stack([np.asarray(s.t, dtype=np.float64) for s in splines])  # [F, T]
    coef = np.asarray(splines[0].c, dtype=np.float64)  # [n_basis, S]
    n_splines = coef.shape[1]
    n_basis = knots.shape[1] - degree - 1
    x3 = g.node("Unsqueeze", [g.input, g.int64([2])])  # [N, F, 1]
    lo, hi = knots[:, degree], knots[:, n_basis]  # the base interval of each feature
    extrapolation = model.extrapolation
    if extrapolation == "periodic":
        period = hi - lo
        shifted = g.node("Sub", [x3, g.const(lo[None, :, None])])
        safe_period = np.where(period > 0, period, 1.0)[None, :, None]
        remainder = g.node("Mod", [shifted, g.const(safe_period)], fmod=1)
        # numpy's % takes the divisor's sign: wrap negative remainders.
        wrapped = g.node(
            "Where",
            [
                g.node("Less", [remainder, g.const(0.0)]),
                g.node("Add", [remainder, g.const(safe_period)]),
                remainder,
            ],
        )
        moved = g.node("Add", [wrapped, g.const(lo[None, :, None])])
        # A feature with a single training value is encoded as the constant 0.
        flat = g.const((period <= 0)[None, :, None], dtype=bool)
        x3 = g.node("Where", [flat, g.const(0.0), moved])
    basis = _basis(g, x3, knots, degree)
    values = basis if n_basis == n_splines else g.matmul_const(basis, coef.astype(g.dtype))
    if extrapolation == "error":
        outside = g.node(
            "Or",
            [
                g.node("Less", [x3, g.const(lo[None, :, None])]),
                g.node("Greater", [x3, g.const(hi[None, :, None])]),
            ],
        )
        values = g.node("Where", [outside, g.const(np.nan), values])
    elif extrapolation in ("constant", "linear"):
        values = _extrapolate(g, x3, values, model, n_splines)
    missing = g.node("IsNaN", [x3])
    values = g.node("Where", [missing, g.const(0.0), values])
    if not model.include_bias:
        values = _slice(g, values, 0, n_splines - 1)
    g.node("Reshape", [values, g.int64([0, -1])], g.output())


def _extrapolate(g: Graph, x3: str, values: str, model: Any, n_splines: int) -> str:
    """Outside the boundary knots: scikit-learn's constant or linear continuation, zeros else.

    scikit-learn's ``transform`` raises its working ``degree`` by one for ``linear``
    extrapolation when it is at most 1, and keeps the raised value for the following features,
    whose boundaries then sit one knot further in; that is reproduced feature by feature.
    """
    n_features = len(model.bsplines_)
    lo, hi = np.zeros(n_features), np.zeros(n_features)
    start = np.zeros((n_features, n_splines))
    end = np.zeros((n_features, n_splines))
    start_slope = np.zeros((n_features, n_splines))
    end_slope = np.zeros((n_features, n_splines))
    degree = int(model.degree)
    for f, spl in enumerate(model.bsplines_):
        lo[f], hi[f] = spl.t[degree], spl.t[-degree - 1]
        f_min, f_max = spl(lo[f]), spl(hi[f])
        if model.extrapolation == "constant":
            start[f, :degree] = f_min[:degree]
            if degree:
                end[f, -degree:] = f_max[-degree:]
            continue
        fp_min, fp_max = spl(lo[f], nu=1), spl(hi[f], nu=1)
        if degree <= 1:
            degree += 1
        for j in range(degree):
            start[f, j], start_slope[f, j] = f_min[j], fp_min[j]
            k = n_splines - 1 - j
            end[f, k], end_slope[f, k] = f_max[k], fp_max[k]
    lo_c, hi_c = g.const(lo[None, :, None]), g.const(hi[None, :, None])
    below_value, above_value = g.const(start[None]), g.const(end[None])
    if model.extrapolation == "linear":
        from_lo = g.node("Mul", [g.node("Sub", [x3, lo_c]), g.const(start_slope[None])])
        from_hi = g.node("Mul", [g.node("Sub", [x3, hi_c]), g.const(end_slope[None])])
        below_value = g.node("Add", [below_value, from_lo])
        above_value = g.node("Add", [above_value, from_hi])
    below = g.node("Less", [x3, lo_c])
    above = g.node("Greater", [x3, hi_c])
    inside = g.node("Not", [g.node("Or", [below, above])])
    outer = g.node("Where", [above, above_value, g.const(0.0)])
    outside = g.node("Where", [below, below_value, outer])
    return g.node("Where", [inside, values, outside])


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(80, 3)) * [1.0, 5.0, 0.1]
    # Rows beyond the training range check the constant extrapolation.
    X_eval = np.vstack([X, X.min(axis=0) - 1.0, X.max(axis=0) + 1.0])
    return SplineTransformer().fit(X), X_eval


register_converter(ConverterSpec(SplineTransformer, _shape, _convert, _example))
