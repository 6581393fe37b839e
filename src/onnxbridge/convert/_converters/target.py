"""TransformedTargetRegressor: the inner regressor's prediction mapped back by the target
transformer's ``inverse_transform``.

skl2onnx has no converter for it. ``[N, F] -> value [N, T]``: the regressor is converted by its
own converter, then the inverse is written out for the transformers people put on a target:

- ``func`` / ``inverse_func`` (a FunctionTransformer): identity, ``np.exp``, ``np.expm1``,
  ``np.log``, ``np.log1p``, ``np.sqrt``, ``np.square``, ``np.abs``, ``np.negative``;
- StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler (any of their options);
- PowerTransformer (``yeo-johnson`` or ``box-cox``, standardized or not).

Anything else is refused, naming the transformer and what works.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.datasets import make_regression
from sklearn.linear_model import Ridge
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    PowerTransformer,
    RobustScaler,
    StandardScaler,
)

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

# numpy function -> ONNX unary operator (None: the identity).
_FUNCTIONS: dict[Any, str | None] = {
    None: None,
    np.exp: "Exp",
    np.log: "Log",
    np.sqrt: "Sqrt",
    np.abs: "Abs",
    np.negative: "Neg",
}
_SUPPORTED = (
    "inverse_func in (None, np.exp, np.expm1, np.log, np.log1p, np.sqrt, np.square, np.abs, "
    "np.negative), StandardScaler, MinMaxScaler, MaxAbsScaler, RobustScaler or PowerTransformer"
)


def _n_targets(model: Any) -> int:
    if model._training_dim == 1:
        return 1
    fitted = getattr(model.transformer_, "n_features_in_", None)
    if fitted is not None:
        return int(fitted)
    # FunctionTransformer(validate=False) does not record its width: ask the regressor.
    final = model.regressor_
    while hasattr(final, "steps"):
        final = final.steps[-1][1]
    return int(getattr(final, "n_outputs_", None) or np.shape(final.coef_)[0])


def _refuse(model: Any, what: str) -> ConversionError:
    return ConversionError(
        f"TransformedTargetRegressor with {what} cannot be converted: its inverse_transform has "
        f"no ONNX equivalent here; use {_SUPPORTED}"
    )


def _inverse_function(g: Nodes, model: Any, transformer: Any, y: str) -> str:
    if transformer.inv_kw_args:
        raise _refuse(model, f"inv_kw_args={transformer.inv_kw_args!r}")
    func = transformer.inverse_func
    if func is np.expm1:
        return g.op("Sub", [g.op("Exp", [y]), g.const(np.array(1.0))])
    if func is np.log1p:
        return g.op("Log", [g.op("Add", [y, g.const(np.array(1.0))])])
    if func is np.square:
        return g.op("Mul", [y, y])
    if func not in _FUNCTIONS:
        raise _refuse(model, f"inverse_func={getattr(func, '__name__', func)!r}")
    op_type = _FUNCTIONS[func]
    return y if op_type is None else g.op(op_type, [y])


def _affine(g: Nodes, y: str, scale: Any, offset: Any) -> str:
    """``y * scale + offset``; either may be None (skipped)."""
    if scale is not None:
        y = g.op("Mul", [y, g.const(np.asarray(scale, dtype=np.float64).reshape(1, -1))])
    if offset is not None:
        y = g.op("Add", [y, g.const(np.asarray(offset, dtype=np.float64).reshape(1, -1))])
    return y


def _inverse_power(g: Nodes, transformer: Any, y: str) -> str:
    if transformer.standardize:
        scaler = transformer._scaler
        y = _affine(g, y, scaler.scale_, scaler.mean_)
    lambdas = np.asarray(transformer.lambdas_, dtype=np.float64).reshape(1, -1)
    zero = g.const(np.array(0.0))
    one = g.const(np.array(1.0))
    if transformer.method == "box-cox":
        # lambda == 0: exp(y); else (lambda * y + 1) ** (1 / lambda)
        safe = np.where(lambdas == 0, 1.0, lambdas)
        power = g.op(
            "Pow",
            [g.op("Add", [g.op("Mul", [y, g.const(safe)]), one]), g.const(1.0 / safe)],
        )
        return g.op("Where", [g.const(lambdas == 0), g.op("Exp", [y]), power])
    # Yeo-Johnson, as PowerTransformer._yeo_johnson_inverse_transform.
    positive = g.op("GreaterOrEqual", [y, zero])
    safe = np.where(lambdas == 0, 1.0, lambdas)
    pos_power = g.op(
        "Sub",
        [
            g.op(
                "Pow",
                [g.op("Add", [g.op("Mul", [y, g.const(safe)]), one]), g.const(1.0 / safe)],
            ),
            one,
        ],
    )
    pos_exp = g.op("Sub", [g.op("Exp", [y]), one])
    pos = g.op("Where", [g.const(lambdas == 0), pos_exp, pos_power])
    two_minus = 2.0 - lambdas
    safe2 = np.where(two_minus == 0, 1.0, two_minus)
    neg_power = g.op(
        "Sub",
        [
            one,
            g.op(
                "Pow",
                [
                    g.op("Add", [g.op("Mul", [y, g.const(-safe2)]), one]),
                    g.const(1.0 / safe2),
                ],
            ),
        ],
    )
    neg_exp = g.op("Sub", [one, g.op("Exp", [g.op("Neg", [y])])])
    neg = g.op("Where", [g.const(two_minus == 0), neg_exp, neg_power])
    return g.op("Where", [positive, pos, neg])


def _inverse(g: Nodes, model: Any, y: str) -> str:
    transformer = model.transformer_
    kind = type(transformer)
    if kind is FunctionTransformer:
        return _inverse_function(g, model, transformer, y)
    if kind is StandardScaler:
        return _affine(g, y, transformer.scale_, transformer.mean_)
    if kind is MinMaxScaler:
        if transformer.clip:
            raise _refuse(model, "MinMaxScaler(clip=True)")
        return _affine(g, _affine(g, y, None, -transformer.min_), 1.0 / transformer.scale_, None)
    if kind is MaxAbsScaler:
        return _affine(g, y, transformer.scale_, None)
    if kind is RobustScaler:
        return _affine(g, y, transformer.scale_, transformer.center_)
    if kind is PowerTransformer:
        return _inverse_power(g, transformer, y)
    raise _refuse(model, f"transformer={kind.__name__}")


def _shape(operator: Any) -> None:
    operator.outputs[0].type = float_tensor_type(operator)(
        [None, _n_targets(operator.raw_operator)]
    )


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    # The inverse is written before the regressor so an unsupported transformer fails first.
    probe_input = g.name("target")
    inverted = _inverse(g, model, probe_input)
    predicted = g.regressor_output(model.regressor_, [operator.inputs[0]], hint="regressor")
    predicted = g.op("Reshape", [predicted, g.const(np.array([-1, _n_targets(model)]))])
    g.identity(predicted, probe_input)
    g.identity(inverted, operator.outputs[0].full_name)


def _example() -> tuple[Any, Any]:
    X, y = make_regression(n_samples=120, n_features=5, noise=5.0, random_state=0)
    model = TransformedTargetRegressor(
        regressor=Ridge(alpha=1.0), func=np.log1p, inverse_func=np.expm1
    )
    return model.fit(X, y - y.min() + 1.0), X


register_converter(ConverterSpec(TransformedTargetRegressor, _shape, _convert, _example))
