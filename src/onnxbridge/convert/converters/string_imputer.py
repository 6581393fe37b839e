"""SimpleImputer on text columns whose missing values are NaN / None (scikit-learn's default).

skl2onnx converts a SimpleImputer on a string input only when ``missing_values`` is itself a
string, so the imputer of a mixed-type pipeline (``--preprocess auto``) does not convert. ONNX
string tensors have no missing value: onnxbridge feeds a missing text value as ``""`` (see
``onnxbridge.convert.metadata.input_block``), and this converter fills ``""`` with the imputer's
statistic: ``[N, C] strings -> [N, C] strings``. Numeric inputs go to skl2onnx's own converter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from onnx import TensorProto
from sklearn.impute import SimpleImputer

from onnxbridge.convert.registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _is_string_input(operator: Any) -> bool:
    from skl2onnx.common.data_types import StringTensorType

    return isinstance(operator.inputs[0].type, StringTensorType)


def _shape(operator: Any) -> None:
    from skl2onnx.shape_calculators.imputer import calculate_sklearn_imputer_output_shapes

    calculate_sklearn_imputer_output_shapes(operator)


def _convert(scope: Any, operator: Any, container: Any) -> None:
    from skl2onnx.operator_converters.imputer_op import convert_sklearn_imputer

    model = operator.raw_operator
    missing = model.missing_values
    if not _is_string_input(operator) or isinstance(missing, str):
        convert_sklearn_imputer(scope, operator, container)
        return
    if not (missing is None or (isinstance(missing, float) and np.isnan(missing))):
        raise ConversionError(
            f"SimpleImputer(missing_values={missing!r}) on a text column cannot be converted; "
            "use missing_values=np.nan (the default) or a string"
        )
    fill = [str(v) for v in np.asarray(model.statistics_, dtype=object).ravel()]
    name = scope.get_unique_variable_name
    inputs = [v.full_name for v in operator.inputs]
    if len(inputs) > 1:
        joined = name("joined")
        container.add_node(
            "Concat", inputs, [joined], axis=1, name=scope.get_unique_operator_name("Concat")
        )
    else:
        joined = inputs[0]
    empty, row, mask = name("empty"), name("fill"), name("is_missing")
    container.add_initializer(empty, TensorProto.STRING, [], [b""])
    container.add_initializer(row, TensorProto.STRING, [1, len(fill)], [f.encode() for f in fill])
    container.add_node(
        "Equal", [joined, empty], [mask], name=scope.get_unique_operator_name("Equal")
    )
    container.add_node(
        "Where",
        [mask, row, joined],
        [operator.outputs[0].full_name],
        name=scope.get_unique_operator_name("Where"),
    )


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    values = rng.choice(["red", "green", "blue", None], size=(40, 2)).astype(object)
    frame = pd.DataFrame(values, columns=["colour", "shade"])
    return SimpleImputer(strategy="most_frequent").fit(frame), frame


register_converter(
    ConverterSpec(
        SimpleImputer,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses SimpleImputer on text columns unless missing_values is a "
        "string, which scikit-learn's default (NaN) is not",
    )
)
