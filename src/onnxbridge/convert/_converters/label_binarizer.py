"""LabelBinarizer: a label column to its indicator columns.

scikit-learn's ``transform(y)`` gives ``[N, C]`` (``[N, 1]`` for two classes: the second class's
column), ``pos_label`` where the label is that class and ``neg_label`` elsewhere; a label it never
saw gets ``neg_label`` everywhere. skl2onnx's converter takes int64 or string input only, and a
label column of numbers reaches the graph as floats; it is replaced.

The graph compares the ``[N, 1]`` label column with the classes (``Equal``, numbers or strings),
takes the matching class's row of ``transform(classes_)`` — the fitted model's own answer for
each class, so every ``pos_label`` / ``neg_label`` rule holds — and ``neg_label`` for a label
that matches no class. Multilabel binarizers (fitted on an indicator matrix) are refused.
One difference a fixed graph cannot avoid: for two classes, scikit-learn widens its answer to
``[N, 2]`` when the rows it is given hold a third label; the graph keeps ``[N, 1]`` (``neg_label``
for that row).

``[N, 1] -> [N, C]`` (``[N, 1]`` for two classes), in the graph's float type.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.preprocessing import LabelBinarizer

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _table(model: Any) -> np.ndarray:
    """``transform(classes_)``: the output row of each class, ``[C, K]``."""
    rows = model.transform(model.classes_)
    return np.asarray(rows.toarray() if hasattr(rows, "toarray") else rows, dtype=np.float64)


def _check(model: Any) -> None:
    if model.y_type_ not in ("binary", "multiclass"):
        raise ConversionError(
            f"LabelBinarizer fitted on a {model.y_type_} target cannot be converted; fit it on "
            "one label column"
        )


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    _check(model)
    operator.outputs[0].type = float_tensor_type(operator)([None, _table(model).shape[1]])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check(model)
    g = Nodes(scope, operator, container)
    label = operator.inputs[0].full_name
    classes = np.asarray(model.classes_)
    if classes.dtype.kind in "OUS":
        keys = g.const(classes.astype(str).reshape(1, -1))
    else:
        # The input column holds numbers in the graph's float type; so do the keys.
        label = g.cast_float(label)
        keys = g.const(classes.astype(np.float64).reshape(1, -1), dtype=g.dtype)
    hits = g.cast_float(g.op("Equal", [label, keys]))  # [N, C], 1 at the label's class
    index = g.op("ArgMax", [hits], axis=1, keepdims=0)
    matches = g.op("MatMul", [hits, g.const(np.ones((len(classes), 1)))])  # [N, 1]
    found = g.op("Greater", [matches, g.const(np.array(0.0))])
    table = _table(model)
    rows = g.op("Gather", [g.const(table), index], axis=0)  # [N, K]
    unseen = g.const(np.full((1, table.shape[1]), float(model.neg_label)))
    g.op("Where", [found, rows, unseen], output=operator.outputs[0].full_name)


def _example() -> tuple[Any, Any]:
    labels = np.random.RandomState(0).choice(["cat", "dog", "fish"], 60)
    return LabelBinarizer(neg_label=-1, pos_label=2).fit(labels), labels.reshape(-1, 1)


register_converter(
    ConverterSpec(
        LabelBinarizer,
        _shape,
        _convert,
        _example,
        replaces=(
            "skl2onnx's LabelBinarizer converter takes int64 or string input only; a label "
            "column of numbers comes as floats"
        ),
    )
)
