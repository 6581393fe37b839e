"""OneHotEncoder and OrdinalEncoder, with missing values encoded as scikit-learn encodes them.

ONNX string tensors have no missing value: onnxbridge feeds a missing text value as ``""`` (see
``onnxbridge._meta.input_block``) and hands scikit-learn ``NaN``. skl2onnx's converters
know the NaN category only by its text ``"nan"``, so ``""`` was an unknown value (all zeros for
``handle_unknown="ignore"``) where scikit-learn uses the NaN category, and a text ``"nan"`` matched
the NaN category where scikit-learn calls it unknown.

These converters ask the fitted encoder itself what each value becomes: for every feature they
transform its categories (the NaN category as NaN) and one value it never saw, and store the rows
as a table. The graph looks up each value's row: a text value by its text (the NaN category by
``""``), a number by value (the NaN category by ``IsNaN``), anything else the unknown row. Every
option (``drop``, infrequent categories, ``handle_unknown``, ``unknown_value``,
``encoded_missing_value``, ``dtype``) is then what scikit-learn does, by construction. With
``handle_unknown="error"`` there is no unknown row: the lookup falls outside the table and ONNX
Runtime refuses the row, as scikit-learn raises.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import pandas as pd
from onnx import TensorProto
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

from onnxbridge.convert._converters._meta import Nodes
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.data import category_spellings

__all__: list[str] = []


def _is_nan(value: Any) -> bool:
    return isinstance(value, float | np.floating) and bool(np.isnan(value))


def _output_widths(model: Any) -> list[int]:
    """How many output columns each input feature gives."""
    if isinstance(model, OrdinalEncoder):
        return [1] * len(model.categories_)
    # The name combiner is public: naming every output column after its feature gives the
    # blocks, whatever drop and infrequent categories did to them.
    named = copy.copy(model)
    named.feature_name_combiner = lambda feature, category: str(feature)
    names = [str(n) for n in named.get_feature_names_out()]
    inputs = getattr(model, "feature_names_in_", None)
    if inputs is None:
        inputs = [f"x{i}" for i in range(len(model.categories_))]
    return [names.count(str(name)) for name in inputs]


def _unseen(categories: np.ndarray) -> Any:
    """A value the feature never had: text for text categories, else a number."""
    if categories.dtype.kind in "OUS":
        known = {str(c) for c in categories}
        value = "\x00unseen"
        while value in known:
            value += "\x00"
        return value
    finite = categories[np.isfinite(categories.astype(np.float64))]
    return float(finite.max()) + 1.0 if finite.size else 0.0


def _transform_rows(model: Any, j: int, values: list[Any]) -> np.ndarray:
    """``model.transform`` of rows that differ only in feature ``j``; ``[len(values), width]``."""
    n_features = len(model.categories_)
    table = np.empty((len(values), n_features), dtype=object)
    for k, categories in enumerate(model.categories_):
        table[:, k] = categories[0]
    table[:, j] = values
    kinds = [c.dtype.kind for c in model.categories_]
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        frame = pd.DataFrame(
            {
                name: pd.Series(table[:, k], dtype=object if kinds[k] in "OUS" else np.float64)
                for k, name in enumerate(names)
            }
        )
        rows: Any = frame
    else:
        rows = table if any(k in "OUS" for k in kinds) else table.astype(np.float64)
    with warnings.catch_warnings():
        # Unknown values warn with drop / infrequent categories: asking about them is the point.
        warnings.simplefilter("ignore")
        out = model.transform(rows)
    return np.asarray(out.toarray() if hasattr(out, "toarray") else out, dtype=np.float64)


def _feature_table(model: Any, j: int, first: int, width: int) -> np.ndarray:
    """The output columns ``first:first + width`` that feature ``j``'s categories become,
    one row per category, then the row of an unknown value unless unknown values raise."""
    categories = model.categories_[j]
    values = [np.nan if _is_nan(c) else c for c in categories]
    known = _transform_rows(model, j, values)[:, first : first + width]
    if model.handle_unknown == "error":
        return known
    unknown = _transform_rows(model, j, [_unseen(categories)])[:, first : first + width]
    return np.vstack([known, unknown])


def _columns(g: Nodes, operator: Any) -> list[tuple[str, Any]]:
    """One ``[N, 1]`` column per feature with its skl2onnx type (inputs may be several)."""
    columns: list[tuple[str, Any]] = []
    for variable in operator.inputs:
        width = variable.type.shape[1] if len(variable.type.shape) == 2 else 1
        width = 1 if width in (None, 0) else int(width)
        for k in range(width):
            source = variable.full_name if width == 1 else g.column(variable.full_name, k)
            columns.append((source, variable.type))
    return columns


def _text_index(g: Nodes, column: str, categories: np.ndarray) -> str:
    """``[N]`` row of each text value in the feature's table; ``len(categories)`` if none."""
    keys: dict[str, int] = {}
    for i, category in enumerate(categories):
        if _is_nan(category):
            keys.setdefault("", i)  # how a missing text value reaches the graph
            continue
        if category is None:  # scikit-learn is handed NaN for a missing value, never None
            continue
        for text in category_spellings(category):
            if text != "":  # a "" category is fed as missing, never as itself
                keys.setdefault(text, i)
    if not keys:
        flat = g.op("Reshape", [column, g.const(np.array([-1]))])
        return g.op("Expand", [g.const(np.array(len(categories))), g.op("Shape", [flat])])
    index = g.op(
        "LabelEncoder",
        [column],
        domain="ai.onnx.ml",
        op_version=2,
        keys_strings=list(keys),
        values_int64s=list(keys.values()),
        default_int64=len(categories),
    )
    return g.op("Reshape", [index, g.const(np.array([-1]))])


def _number_index(g: Nodes, column: str, var_type: Any, categories: np.ndarray) -> str:
    """``[N]`` row of each number in the feature's table; ``len(categories)`` if none."""
    from skl2onnx.common.data_types import FloatTensorType

    numbers = categories.astype(np.float64)
    if isinstance(var_type, FloatTensorType):
        numbers = numbers.astype(np.float32).astype(np.float64)  # what float32 input can hold
    value = g.op("Cast", [column], to=TensorProto.DOUBLE)
    hits = g.op("Equal", [value, g.const(numbers.reshape(1, -1), dtype=np.float64)])
    if np.isnan(numbers).any():
        nan_slot = g.const(np.isnan(numbers).reshape(1, -1))
        hits = g.op("Or", [hits, g.op("And", [g.op("IsNaN", [value]), nan_slot])])
    as_int = g.op("Cast", [hits], to=TensorProto.INT64)
    # The first hit, and whether it is one: no ReduceMax, whose axes moved to an input in
    # opset 18, so that older pinned opsets build too.
    first = g.op("ArgMax", [as_int], axis=1, keepdims=1, select_last_index=0)
    found = g.op("Cast", [g.op("GatherElements", [as_int, first], axis=1)], to=TensorProto.BOOL)
    index = g.op("Where", [found, first, g.const(np.array([[len(categories)]]))])
    return g.op("Reshape", [index, g.const(np.array([-1]))])


def _out_dtype(model: Any) -> tuple[Any, Any]:
    """The output's numpy and skl2onnx types (skl2onnx's: int64 for an integer dtype)."""
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType

    if np.issubdtype(np.dtype(model.dtype), np.integer):
        return np.int64, Int64TensorType
    return np.float32, FloatTensorType


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    _, tensor_type = _out_dtype(model)
    width = sum(_output_widths(model))
    operator.outputs[0].type = tensor_type([operator.inputs[0].get_first_dimension(), width])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    from skl2onnx.common.data_types import StringTensorType

    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    out_dtype, _ = _out_dtype(model)
    widths = _output_widths(model)
    pieces, first = [], 0
    for j, (column, var_type) in enumerate(_columns(g, operator)):
        categories = np.asarray(model.categories_[j])
        width = widths[j]
        if width == 0:  # a feature whose only category is dropped
            continue
        table = _feature_table(model, j, first, width)
        first += width
        if isinstance(var_type, StringTensorType):
            index = _text_index(g, column, categories)
        else:
            index = _number_index(g, column, var_type, categories)
        pieces.append(g.op("Gather", [g.const(table, dtype=out_dtype), index], axis=0))
    joined = pieces[0] if len(pieces) == 1 else g.op("Concat", pieces, axis=1)
    g.identity(joined, operator.outputs[0].full_name)


def _example_frame() -> pd.DataFrame:
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(
        {
            "city": rng.choice(["paris", "rome", "oslo", "nan"], 60).astype(object),
            "job": rng.choice(["x", "y", "z"], 60).astype(object),
        }
    )
    frame.loc[rng.rand(60) < 0.2, "city"] = np.nan
    return frame


def _one_hot_example() -> tuple[Any, Any]:
    frame = _example_frame()
    return OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(frame), frame


def _ordinal_example() -> tuple[Any, Any]:
    frame = _example_frame()
    encoder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)
    return encoder.fit(frame), frame


_WHY = (
    "skl2onnx matches the NaN category by the text 'nan', so a missing text value (fed as '') "
    "is unknown to it while scikit-learn encodes it as the NaN category"
)

register_converter(ConverterSpec(OneHotEncoder, _shape, _convert, _one_hot_example, replaces=_WHY))
register_converter(
    ConverterSpec(
        OrdinalEncoder,
        _shape,
        _convert,
        _ordinal_example,
        replaces=_WHY + "; and it encodes that category as a code, not encoded_missing_value",
    )
)
