"""TargetEncoder for every target type: binary, continuous and multiclass.

skl2onnx refuses multiclass targets. ``transform`` (the inference path; ``fit_transform``'s
cross-fitting only applies to training rows) replaces each category by its learnt encoding:

- feature ``j`` with categories ``c_j`` (``[K_j]``): ``index = position of x in c_j`` (NaN matches a
  NaN category; in a text column the NaN category is ``""``, how a missing text value is fed),
  unknown values get ``target_mean_``;
- binary / continuous: one column per feature, ``[N, F]``; multiclass: one column per feature and
  class, feature-major (``[N, F * C]``, as scikit-learn's ``feature0_class0, feature0_class1...``).

Numbers are matched in float64 whatever the input precision; text columns match as strings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.preprocessing import TargetEncoder

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _per_feature(model: Any) -> int:
    return len(model.classes_) if model.target_type_ == "multiclass" else 1


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    width = len(model.categories_) * _per_feature(model)
    operator.outputs[0].type = _out_type(operator)([None, width])


def _out_type(operator: Any) -> type:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, StringTensorType

    # Text inputs give floats of the model's precision: double when any input of the whole
    # graph is double (a float64 conversion), else float.
    for variable in operator.inputs:
        if isinstance(variable.type, DoubleTensorType):
            return DoubleTensorType
    if all(isinstance(v.type, StringTensorType) for v in operator.inputs):
        graph_inputs = getattr(getattr(operator, "scope_inst", None), "input_variables", [])
        if any(isinstance(v.type, DoubleTensorType) for v in graph_inputs):
            return DoubleTensorType
        return FloatTensorType
    return float_tensor_type(operator)


def _is_text(variable: Any) -> bool:
    from skl2onnx.common.data_types import StringTensorType

    return isinstance(variable.type, StringTensorType)


def _feature_columns(g: Nodes, operator: Any) -> list[tuple[str, bool]]:
    """One ``[N, 1]`` column per feature, with whether it is text (inputs may be several)."""
    columns: list[tuple[str, bool]] = []
    for variable in operator.inputs:
        width = variable.type.shape[1] if len(variable.type.shape) == 2 else 1
        width = 1 if width in (None, 0) else int(width)
        text = _is_text(variable)
        source = variable.full_name
        if not text:
            source = g.op("Cast", [source], to=TensorProto.DOUBLE)
        for k in range(width):
            columns.append((source if width == 1 else g.column(source, k), text))
    return columns


def _text_key(value: Any) -> str:
    if isinstance(value, float | np.floating) and np.isnan(value):
        return ""
    return str(value)


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    out_type = _out_type(operator)
    g.dtype = np.float64 if out_type.__name__.startswith("Double") else np.float32
    g.onnx_float = TensorProto.DOUBLE if g.dtype == np.float64 else TensorProto.FLOAT
    per = _per_feature(model)
    means = np.asarray(model.target_mean_, dtype=np.float64).reshape(1, per)
    pieces = []
    columns = _feature_columns(g, operator)
    for j, categories in enumerate(model.categories_):
        column, text = columns[j]
        table = np.column_stack([model.encodings_[j * per + c] for c in range(per)])
        values = np.asarray(categories)
        if text:
            # A missing text value reaches the graph as "" (metadata.input_block); the NaN
            # category is that one, not the text "nan".
            texts = np.array([_text_key(v) for v in values], dtype=object)
            hits = g.op("Equal", [column, g.const(texts.reshape(1, -1))])
        else:
            numbers = values.astype(np.float64)
            hits = g.op("Equal", [column, g.const(numbers.reshape(1, -1), dtype=np.float64)])
            if np.isnan(numbers).any():
                nan_slot = np.isnan(numbers).reshape(1, -1)
                hits = g.op("Or", [hits, g.op("And", [g.op("IsNaN", [column]), g.const(nan_slot)])])
        as_int = g.op("Cast", [hits], to=TensorProto.INT64)
        index = g.argmax(as_int)
        known = g.op(
            "Cast", [g.op("ReduceMax", [as_int, g.const(np.array([1]))], keepdims=1)], to=9
        )
        encoded = g.op("Gather", [g.const(table), index], axis=0)
        pieces.append(g.op("Where", [known, encoded, g.const(means)]))
    joined = pieces[0] if len(pieces) == 1 else g.op("Concat", pieces, axis=1)
    g.identity(joined, operator.outputs[0].full_name)


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = np.column_stack([rng.randint(0, 6, 200), rng.randint(0, 3, 200)]).astype(np.float64)
    y = (X[:, 0] + rng.randint(0, 3, 200)) % 3  # three classes
    return TargetEncoder().fit(X, y), X


register_converter(
    ConverterSpec(
        TargetEncoder,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses multiclass targets (one encoding column per class)",
    )
)
