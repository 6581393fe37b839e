"""Helpers the meta-estimator converters share: node building, inner estimators, class labels.

Not a converter module (it registers nothing). Arithmetic follows the input's precision: a
float32 input gives float32 constants, a float64 input float64 throughout. Inner estimators are
converted by whatever converter skl2onnx (or onnxbridge's registry) has for them, through
skl2onnx's ``OnnxSubEstimator``, so pipelines and boosters work as inner models too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper

from onnxbridge.errors import ConversionError

__all__ = ["Nodes", "float_tensor_type", "is_double", "label_tensor_type"]


def is_double(operator: Any) -> bool:
    """Whether the operator's (first) input is float64."""
    from skl2onnx.common.data_types import DoubleTensorType

    return isinstance(operator.inputs[0].type, DoubleTensorType)


def float_tensor_type(operator: Any) -> type:
    """skl2onnx's float tensor type of the input's precision."""
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    return DoubleTensorType if is_double(operator) else FloatTensorType


def label_tensor_type(classes: Any) -> type:
    """Int64 or string tensor type for class labels."""
    from skl2onnx.common.data_types import Int64TensorType, StringTensorType

    return StringTensorType if np.asarray(classes).dtype.kind in "OUS" else Int64TensorType


class Nodes:
    """Adds nodes for one operator to skl2onnx's container; returns output names.

    Attributes:
        dtype: numpy float type of the arithmetic (float32 or float64).
        onnx_float: the matching ONNX element type.
    """

    def __init__(self, scope: Any, operator: Any, container: Any) -> None:
        self.scope = scope
        self.operator = operator
        self.container = container
        double = is_double(operator)
        self.dtype = np.float64 if double else np.float32
        self.onnx_float = TensorProto.DOUBLE if double else TensorProto.FLOAT
        self.float_type = float_tensor_type(operator)

    @property
    def opset(self) -> int:
        """The default-domain opset of the conversion."""
        return int(self.container.target_opset)

    def name(self, hint: str) -> str:
        """A fresh variable name."""
        return self.scope.get_unique_variable_name(hint)

    def const(self, value: Any, hint: str = "c", *, dtype: Any = None) -> str:
        """An initializer; floats take the graph's precision unless ``dtype`` is given."""
        array = np.asarray(value)
        if dtype is not None:
            array = array.astype(dtype)
        elif array.dtype.kind == "f":
            array = array.astype(self.dtype)
        elif array.dtype.kind in "iub":
            array = array.astype(np.int64) if array.dtype.kind != "b" else array
        name = self.name(hint)
        if array.dtype.kind in "OUS":
            self.container.add_initializer(
                name,
                TensorProto.STRING,
                list(array.shape),
                [str(v).encode() for v in array.ravel()],
            )
            return name
        self.container.add_initializer(
            name,
            helper.np_dtype_to_tensor_dtype(array.dtype),
            list(array.shape),
            array.ravel().tolist(),
        )
        return name

    def op(
        self,
        op_type: str,
        inputs: list[str],
        *,
        output: str | None = None,
        domain: str = "",
        op_version: int | None = None,
        **attrs: Any,
    ) -> str:
        """One node with one output; returns the output name."""
        out = output or self.name(op_type.lower())
        kwargs: dict[str, Any] = dict(attrs)
        if domain:
            kwargs["op_domain"] = domain
        if op_version is not None:
            kwargs["op_version"] = op_version
        self.container.add_node(
            op_type, inputs, [out], name=self.scope.get_unique_operator_name(op_type), **kwargs
        )
        return out

    def cast_float(self, name: str) -> str:
        """Cast to the graph's float type."""
        return self.op("Cast", [name], to=self.onnx_float)

    def columns(self, name: str, indices: list[int] | np.ndarray) -> str:
        """``x[:, indices]``."""
        return self.op("Gather", [name, self.const(np.asarray(indices, dtype=np.int64))], axis=1)

    def column(self, name: str, index: int) -> str:
        """``x[:, index:index + 1]`` as ``[N, 1]``."""
        return self.columns(name, [index])

    def labels(self, classes: Any, index: str, output: str | None = None) -> str:
        """``classes[index]`` for an int64 index tensor (strings stay strings)."""
        values = np.asarray(classes)
        table = self.const(values if values.dtype.kind in "OUS" else values.astype(np.int64))
        return self.op("Gather", [table, index], output=output, axis=0)

    def onehot(self, index: str, n: int) -> str:
        """``[N]`` int64 indices -> ``[N, n]`` floats (ONNX Runtime's OneHot lacks double)."""
        column = self.op("Unsqueeze", [index, self.const(np.array([1]))])
        hits = self.op("Equal", [column, self.const(np.arange(n, dtype=np.int64).reshape(1, -1))])
        return self.cast_float(hits)

    def erf64(self, name: str) -> str:
        """``erf`` of a float64 tensor (ONNX Runtime's Erf has no double kernel).

        Piecewise polynomials of degree 12 on ``|x|`` in steps of 0.25 up to 6 (beyond, erf is
        1 to double precision), fitted to scipy's erf: the error stays below 1e-14.
        """
        table = _erf_table()
        step, pieces = _ERF_STEP, table.shape[0]
        magnitude = self.op("Abs", [name])
        capped = self.op("Min", [magnitude, self.const(np.array(pieces * step), dtype=np.float64)])
        scaled = self.op("Div", [capped, self.const(np.array(step), dtype=np.float64)])
        piece = self.op("Cast", [self.op("Floor", [scaled])], to=TensorProto.INT64)
        piece = self.op("Min", [piece, self.const(np.array(pieces - 1, dtype=np.int64))])
        local = self.op("Sub", [scaled, self.op("Cast", [piece], to=TensorProto.DOUBLE)])
        coefs = self.op("Gather", [self.const(table, dtype=np.float64), piece], axis=0)
        powers = self.op(
            "Pow",
            [
                self.op("Unsqueeze", [local, self.const(np.array([-1]))]),
                self.const(np.arange(table.shape[1], dtype=np.float64), dtype=np.float64),
            ],
        )
        value = self.op(
            "ReduceSum",
            [self.op("Mul", [coefs, powers]), self.const(np.array([-1]))],
            keepdims=0,
        )
        beyond = self.op(
            "GreaterOrEqual", [magnitude, self.const(np.array(pieces * step), dtype=np.float64)]
        )
        value = self.op("Where", [beyond, self.const(np.array(1.0), dtype=np.float64), value])
        return self.op("Mul", [value, self.op("Sign", [name])])

    def argmax(self, name: str) -> str:
        """Row-wise argmax ``[N, C] -> [N]`` (first maximum, like numpy)."""
        return self.op("ArgMax", [name], axis=1, keepdims=0, select_last_index=0)

    def identity(self, name: str, output: str) -> str:
        """Copy ``name`` to ``output``."""
        return self.op("Identity", [name], output=output)

    def sub_estimator(
        self,
        estimator: Any,
        inputs: list[Any],
        n_outputs: int,
        hint: str = "sub",
        *,
        options: dict[str, Any] | None = None,
    ) -> list[str]:
        """Convert an inner fitted estimator on ``inputs``; returns its output names.

        Args:
            estimator: any estimator skl2onnx or onnxbridge converts (pipelines included).
            inputs: skl2onnx ``Variable`` objects or ``(name, tensor type)`` pairs.
            n_outputs: 2 for classifiers (label, probabilities or scores), 1 otherwise.
            hint: prefix of the output names.
            options: skl2onnx options for the inner converter (``zipmap`` is set already).

        Raises:
            ConversionError: the inner estimator does not convert.
        """
        from skl2onnx.algebra.onnx_operator import OnnxSubEstimator

        from onnxbridge.convert._registry import accepts_option

        if hasattr(estimator, "steps"):
            # OnnxSubEstimator takes one model at a time: chain the steps of a pipeline.
            steps = [s for _, s in estimator.steps if s not in (None, "passthrough")]
            for k, step in enumerate(steps[:-1]):
                (out,) = self.sub_estimator(step, inputs, 1, f"{hint}_step{k}")
                inputs = [(out, self.float_type([None, _n_features_out(step)]))]
            return self.sub_estimator(steps[-1], inputs, n_outputs, hint, options=options)
        names = [self.name(f"{hint}_{i}") for i in range(n_outputs)]
        options = dict(options or {})
        if n_outputs == 2 and accepts_option(estimator, "zipmap"):
            options["zipmap"] = False
        sub = OnnxSubEstimator(
            estimator, *inputs, op_version=self.opset, options=options or None, output_names=names
        )
        try:
            sub.add_to(self.scope, self.container)
        except ConversionError:
            raise
        except Exception as exc:
            raise ConversionError(
                f"the inner {type(estimator).__name__} does not convert: {exc}"
            ) from exc
        return names

    def classifier_outputs(
        self, estimator: Any, inputs: list[Any], hint: str = "clf"
    ) -> tuple[str, str]:
        """Label ``[N]`` and probabilities (or scores) ``[N, C]`` of an inner classifier, the
        latter in the graph's float type."""
        label, second = self.sub_estimator(estimator, inputs, 2, hint)
        return label, self.op("Cast", [second], to=self.onnx_float)

    def regressor_output(self, estimator: Any, inputs: list[Any], hint: str = "reg") -> str:
        """An inner regressor's prediction as ``[N, T]`` in the graph's float type."""
        (value,) = self.sub_estimator(estimator, inputs, 1, hint)
        value = self.op("Cast", [value], to=self.onnx_float)
        final = estimator
        while hasattr(final, "steps"):
            final = final.steps[-1][1]
        n_targets = _n_targets(final)
        return self.op("Reshape", [value, self.const(np.array([-1, n_targets], dtype=np.int64))])


def _n_targets(estimator: Any) -> int:
    """How many targets a fitted regressor predicts (1 unless it says otherwise)."""
    for attribute in ("n_outputs_",):
        value = getattr(estimator, attribute, None)
        if isinstance(value, int | np.integer):
            return int(value)
    coef = getattr(estimator, "coef_", None)
    if coef is not None and np.ndim(coef) == 2:
        return int(np.shape(coef)[0])
    return 1


def _n_features_out(transformer: Any) -> int | None:
    """How many columns a fitted transformer outputs, None if it does not say."""
    try:
        return len(transformer.get_feature_names_out())
    except Exception:  # not every transformer implements it; the shape stays open
        return None


_ERF_STEP = 0.25
_ERF_TABLE: list[np.ndarray] = []


def _erf_table() -> np.ndarray:
    """``[24, 13]`` polynomial coefficients of erf on ``[0.25 i, 0.25 (i + 1)]`` in the local
    variable ``t = x / 0.25 - i`` (fitted once, at Chebyshev nodes)."""
    if not _ERF_TABLE:
        from scipy.special import erf

        nodes = np.cos(np.pi * (np.arange(64) + 0.5) / 64) * 0.5 + 0.5
        rows = [
            np.polynomial.polynomial.polyfit(nodes, erf((i + nodes) * _ERF_STEP), 12)
            for i in range(24)
        ]
        _ERF_TABLE.append(np.asarray(rows))
    return _ERF_TABLE[0]
