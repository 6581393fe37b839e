"""SimpleImputer: numeric and text columns, with the ``add_indicator`` columns.

skl2onnx's converter is replaced for three reasons:

- It converts a SimpleImputer on a string input only when ``missing_values`` is itself a string,
  so the imputer of a mixed-type pipeline (``--preprocess auto``) does not convert. ONNX string
  tensors have no missing value: onnxbridge feeds a missing text value as ``""`` (see
  ``onnxbridge._meta.input_block``), and this converter fills ``""`` with the
  imputer's statistic.
- It leaves out the indicator columns of ``add_indicator=True`` (see
  :mod:`onnxbridge.convert._converters.impute`) and keeps the features scikit-learn drops (no
  value at fit, ``keep_empty_features=False``), so the step after it gets the wrong width.
- Its ``ai.onnx.ml`` ``Imputer`` holds the fill values as float32, and ONNX Runtime runs it on
  float32 only.

Numeric input (float or double): ``Where(missing, statistics, x)`` in the input's precision, the
features scikit-learn keeps, then the indicator columns: ``[N, F] -> [N, F' + K]``. Text input:
``[N, F] strings -> [N, F'] strings``; an indicator (numbers) cannot share a string tensor and is
refused. Integer input goes to skl2onnx's converter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from onnx import TensorProto
from sklearn.impute import SimpleImputer

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._converters.impute import (
    append_indicator,
    indicator_width,
    missing_mask,
    numeric_marker,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _input_kind(operator: Any) -> str:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, StringTensorType

    kind = operator.inputs[0].type
    if isinstance(kind, StringTensorType):
        return "string"
    if isinstance(kind, (FloatTensorType, DoubleTensorType)):
        return "float"
    return "other"


def _kept(model: Any) -> np.ndarray:
    """Indices of the features scikit-learn's transform keeps (it drops those whose statistic
    is missing, i.e. that had no value at fit, unless ``keep_empty_features``)."""
    statistics = np.asarray(model.statistics_)
    if model.keep_empty_features:
        return np.arange(len(statistics))
    return np.flatnonzero(~pd.isna(statistics.astype(object)))


def _n_inputs(operator: Any) -> int | None:
    total = 0
    for variable in operator.inputs:
        width = variable.type.shape[1] if len(variable.type.shape) > 1 else None
        if width is None:
            return None
        total += width
    return total


def _shape(operator: Any) -> None:
    from skl2onnx.shape_calculators.imputer import calculate_sklearn_imputer_output_shapes

    kind = _input_kind(operator)
    if kind == "other":
        calculate_sklearn_imputer_output_shapes(operator)
        return
    model = operator.raw_operator
    width = len(_kept(model)) + indicator_width(model)
    if kind == "string":
        operator.outputs[0].type = type(operator.inputs[0].type)([None, width])
    else:
        set_float_output(operator, 0, [None, width])


def _joined(g: Graph, operator: Any) -> str:
    inputs = [v.full_name for v in operator.inputs]
    return g.node("Concat", inputs, axis=1) if len(inputs) > 1 else inputs[0]


def _keep_columns(g: Graph, x: str, model: Any) -> str:
    kept = _kept(model)
    if len(kept) == len(model.statistics_):
        return x
    return g.node("Gather", [x, g.int64(kept)], axis=1)


def _convert_numeric(g: Graph, operator: Any, model: Any) -> None:
    marker = numeric_marker(model)
    x = _joined(g, operator)
    kept = _kept(model)
    # The fill values in the input's precision: float64 statistics stay exact in a double graph.
    fill = g.const(np.asarray(model.statistics_, dtype=np.float64)[kept].reshape(1, -1))
    kept_x = _keep_columns(g, x, model)
    imputed = g.node("Where", [missing_mask(g, kept_x, marker), fill, kept_x])
    append_indicator(g, imputed, x, model)


def _strings(g: Graph, values: list[str], shape: list[int], hint: str) -> str:
    name = g.name(hint)
    g.container.add_initializer(name, TensorProto.STRING, shape, [v.encode() for v in values])
    return name


def _convert_text(g: Graph, operator: Any, model: Any) -> None:
    missing = model.missing_values
    if indicator_width(model):
        raise ConversionError(
            "SimpleImputer(add_indicator=True) on text columns cannot be converted: its "
            "indicator columns are numbers and an ONNX tensor holds one type; use "
            "add_indicator=False and a MissingIndicator on the numeric columns"
        )
    if isinstance(missing, str):
        fill_missing = missing
    elif missing is None or (isinstance(missing, float) and np.isnan(missing)):
        fill_missing = ""  # how onnxbridge feeds a missing text value
    else:
        raise ConversionError(
            f"SimpleImputer(missing_values={missing!r}) on a text column cannot be converted; "
            "use missing_values=np.nan (the default) or a string"
        )
    kept = _kept(model)
    fill = [str(v) for v in np.asarray(model.statistics_, dtype=object)[kept].ravel()]
    kept_x = _keep_columns(g, _joined(g, operator), model)
    row = _strings(g, fill, [1, len(fill)], "fill")
    g.node("Where", [_text_mask(g, kept_x, fill_missing), row, kept_x], g.output())


def _text_mask(g: Graph, x: str, marker: str) -> str:
    """``[N, F]`` booleans: which entries of the string tensor ``x`` are ``marker``."""
    if g.opset >= 19:  # Equal takes strings from opset 19
        return g.node("Equal", [x, _strings(g, [marker], [], "missing")])
    flags = g.name("is_missing_flag")
    g.container.add_node(
        "LabelEncoder",
        [x],
        [flags],
        name=g.scope.get_unique_operator_name("LabelEncoder"),
        op_domain="ai.onnx.ml",
        op_version=2,
        keys_strings=[marker],
        values_int64s=[1],
        default_int64=0,
    )
    return g.node("Cast", [flags], to=TensorProto.BOOL)


def _convert(scope: Any, operator: Any, container: Any) -> None:
    from skl2onnx.operator_converters.imputer_op import convert_sklearn_imputer

    model = operator.raw_operator
    kind = _input_kind(operator)
    if kind == "other":
        if indicator_width(model) or len(_kept(model)) < len(model.statistics_):
            raise ConversionError(
                f"SimpleImputer on {type(operator.inputs[0].type).__name__} input with "
                "add_indicator=True or features without values at fit cannot be converted; "
                "feed the columns as floats"
            )
        convert_sklearn_imputer(scope, operator, container)
        return
    g = Graph(scope, operator, container)
    if kind == "string":
        _convert_text(g, operator, model)
    else:
        _convert_numeric(g, operator, model)


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    colours = np.array(["red", "green", "blue", None], dtype=object)
    values = rng.choice(colours, size=(40, 2)).astype(object)
    frame = pd.DataFrame(values, columns=["colour", "shade"])
    return SimpleImputer(strategy="most_frequent").fit(frame), frame


register_converter(
    ConverterSpec(
        SimpleImputer,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses SimpleImputer on text columns unless missing_values is a "
        "string, which scikit-learn's default (NaN) is not, and leaves out the add_indicator "
        "columns",
    )
)
