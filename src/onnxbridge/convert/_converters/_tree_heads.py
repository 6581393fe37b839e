"""What every tree-ensemble converter shares: input precision, output types, and the heads that
turn raw scores into labels, probabilities and values.

``[N, F] -> raw [N, K]`` comes from :func:`onnxbridge.convert._tree_ensemble.add_raw_scores`; the
heads here finish the job in the input's precision:

* classifiers: ``raw -> probabilities [N, C]`` (as they are, logistic for a single score, softmax
  for several) and ``label [N] = classes[argmax]`` (the first of equal maxima, like numpy);
* regressors: ``raw -> value [N, K]`` through the inverse link (identity or exp).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.helper import make_tensor

from onnxbridge.convert._tree_ensemble import (
    TreeEnsembleSpec,
    add_float_forest_classifier,
    add_raw_scores,
)
from onnxbridge.errors import ConversionError

__all__ = [
    "CLASSIFIER_OPTIONS",
    "classifier_shape",
    "example_target",
    "is_double",
    "outlier_shape",
    "regressor_shape",
    "text_features",
    "write_classifier",
    "write_outlier",
    "write_regressor",
]

CLASSIFIER_OPTIONS: dict[str, list[Any]] = {
    "zipmap": [False, True, "columns"],
    "nocl": [False, True],
}


def example_target(score: np.ndarray, classes: int | None, rng: Any) -> np.ndarray:
    """A registry example's target: ``score`` plus noise, or ``classes`` quantile bins of it."""
    if classes is None:
        return score + rng.normal(scale=0.1, size=len(score))
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))


def is_double(operator: Any) -> bool:
    """Whether the operator's input is float64 (``precision="double"``).

    With one input per column (a table with category columns), whether its numeric inputs are.
    """
    from skl2onnx.common.data_types import DoubleTensorType

    return any(isinstance(v.type, DoubleTensorType) for v in operator.inputs)


def _tensor_type(operator: Any) -> type:
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    return DoubleTensorType if is_double(operator) else FloatTensorType


def _string_classes(classes: np.ndarray) -> bool:
    return np.asarray(classes).dtype.kind in "OUS"


def classifier_shape(operator: Any) -> None:
    """Label ``[N]`` (int64, or string for text classes) and probabilities ``[N, C]``."""
    from skl2onnx.common.data_types import Int64TensorType, StringTensorType

    classes = np.asarray(operator.raw_operator.classes_)
    label = StringTensorType if _string_classes(classes) else Int64TensorType
    operator.outputs[0].type = label([None])
    operator.outputs[1].type = _tensor_type(operator)([None, len(classes)])


def regressor_shape(operator: Any) -> None:
    """Value ``[N, K]`` in the input's precision."""
    width = getattr(operator.raw_operator, "n_outputs_", 1) or 1
    operator.outputs[0].type = _tensor_type(operator)([None, int(width)])


@dataclass(frozen=True)
class _TreeInput:
    """The model's features as the ensemble reads them.

    Attributes:
        x: ``[N, F]`` numbers in the graph's precision (a text column's place holds zeros).
        text: feature index -> ``[N, 1]`` string tensor of that text / category column.
    """

    x: str
    text: dict[int, str]


def _input(scope: Any, operator: Any, container: Any) -> _TreeInput:
    """The operator's inputs as one float tensor plus its text columns.

    One numeric input is used as it is (integers are cast to float). Several inputs (one per
    column, what onnxbridge gives a table with text or category columns) are joined in
    column order, numbers cast to the graph's precision.
    """
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, StringTensorType

    name = scope.get_unique_variable_name
    op = scope.get_unique_operator_name
    inputs = list(operator.inputs)
    if len(inputs) == 1 and not isinstance(inputs[0].type, StringTensorType):
        variable = inputs[0]
        if isinstance(variable.type, (FloatTensorType, DoubleTensorType)):
            return _TreeInput(variable.full_name, {})
        cast = name("x_float")
        container.add_node(
            "Cast", [variable.full_name], [cast], to=TensorProto.FLOAT, name=op("Cast")
        )
        return _TreeInput(cast, {})
    onnx_type = TensorProto.DOUBLE if is_double(operator) else TensorProto.FLOAT
    pieces: list[str] = []
    text: dict[int, str] = {}
    position = 0
    for variable in inputs:
        width = _width(variable)
        if isinstance(variable.type, StringTensorType):
            for offset in range(width):
                text[position + offset] = _column(
                    scope, container, variable.full_name, offset, width
                )
            shape, zeros = name("text_shape"), name("text_zeros")
            container.add_node("Shape", [variable.full_name], [shape], name=op("Shape"))
            container.add_node(
                "ConstantOfShape",
                [shape],
                [zeros],
                value=make_tensor("zero", onnx_type, [1], [0.0]),
                name=op("ConstantOfShape"),
            )
            pieces.append(zeros)
        else:
            cast = name("column_number")
            container.add_node("Cast", [variable.full_name], [cast], to=onnx_type, name=op("Cast"))
            pieces.append(cast)
        position += width
    joined = name("x_columns")
    container.add_node("Concat", pieces, [joined], axis=1, name=op("Concat"))
    return _TreeInput(joined, text)


def _width(variable: Any) -> int:
    shape = getattr(variable.type, "shape", None) or []
    if len(shape) != 2 or not isinstance(shape[1], int):
        raise ConversionError(
            f"input {variable.onnx_name!r} has shape {shape}; tree converters need [N, columns] "
            "with a known number of columns"
        )
    return int(shape[1])


def _column(scope: Any, container: Any, tensor: str, offset: int, width: int) -> str:
    """Column ``offset`` of ``tensor [N, width]`` as ``[N, 1]``."""
    if width == 1:
        return tensor
    index, out = (
        scope.get_unique_variable_name("column_index"),
        scope.get_unique_variable_name("text_column"),
    )
    container.add_initializer(index, TensorProto.INT64, [1], [offset])
    container.add_node(
        "Gather", [tensor, index], [out], axis=1, name=scope.get_unique_operator_name("Gather")
    )
    return out


def _import_target_opset(container: Any) -> None:
    """Import the default-domain opset asked for, as skl2onnx's tree converters do.

    The head's operators exist in older versions too, so skl2onnx would otherwise import a lower
    version than the target the user chose (``--opset 15`` would give a file saying 14).
    """
    target = getattr(container, "target_opset", None)
    pairs = getattr(container, "node_domain_version_pair_sets", None)
    if isinstance(target, int) and isinstance(pairs, set):
        pairs.add(("", target))


def _constant(scope: Any, container: Any, value: float, onnx_type: int) -> str:
    name = scope.get_unique_variable_name("const")
    container.add_initializer(name, onnx_type, [], [float(value)])
    return name


def write_classifier(
    scope: Any,
    operator: Any,
    container: Any,
    spec: TreeEnsembleSpec,
    *,
    transform: str,
    scale: float = 1.0,
) -> None:
    """Add the ensemble and a classifier head.

    Args:
        transform: ``"none"`` (raw scores are probabilities, ``[N, C]``), ``"logistic"`` (one
            score ``[N, 1]`` -> ``[1 - p, p]``), ``"softmax"`` (``[N, C]`` -> softmax) or
            ``"ova"`` (a logistic per class, as they are).
        scale: multiplies the raw score before the logistic (LightGBM's ``sigmoid``,
            ``2`` for scikit-learn's exponential loss).
    """
    _import_target_opset(container)
    double = is_double(operator)
    onnx_type = TensorProto.DOUBLE if double else TensorProto.FLOAT
    name = scope.get_unique_variable_name
    op = scope.get_unique_operator_name
    probabilities = operator.outputs[1].full_name
    one_class = len(operator.raw_operator.classes_) == 1
    if transform == "none" and not double and not one_class:
        # The operator's own label output is not used: on two classes ONNX Runtime decides it
        # by its binary rule, not by the larger probability (labels flipped on string classes).
        # A model of one class takes the raw scores below: ONNX Runtime's classifier reads a
        # second label of its own on one class (a process abort on text labels).
        given = _input(scope, operator, container)
        add_float_forest_classifier(
            scope,
            container,
            given.x,
            spec,
            np.asarray(operator.raw_operator.classes_),
            name("ort_label"),
            probabilities,
            given.text,
        )
        _write_label(scope, operator, container, probabilities)
        return
    given = _input(scope, operator, container)
    raw = add_raw_scores(scope, container, given.x, spec, double=double, text_inputs=given.text)
    if scale != 1.0 and transform in ("logistic", "ova"):
        scaled = name("scaled")
        container.add_node(
            "Mul", [raw, _constant(scope, container, scale, onnx_type)], [scaled], name=op("Mul")
        )
        raw = scaled
    if transform == "none":
        container.add_node("Identity", [raw], [probabilities], name=op("Identity"))
    elif transform == "softmax":
        container.add_node("Softmax", [raw], [probabilities], axis=1, name=op("Softmax"))
    elif transform == "ova":
        container.add_node("Sigmoid", [raw], [probabilities], name=op("Sigmoid"))
    elif transform == "logistic":
        positive, negative = name("p_positive"), name("p_negative")
        container.add_node("Sigmoid", [raw], [positive], name=op("Sigmoid"))
        container.add_node(
            "Sub",
            [_constant(scope, container, 1.0, onnx_type), positive],
            [negative],
            name=op("Sub"),
        )
        container.add_node(
            "Concat", [negative, positive], [probabilities], axis=1, name=op("Concat")
        )
    else:  # pragma: no cover - converters pass one of the above
        raise ValueError(f"unknown transform {transform!r}")
    _write_label(scope, operator, container, probabilities)


def _write_label(scope: Any, operator: Any, container: Any, probabilities: str) -> None:
    """``label [N] = classes[argmax(probabilities)]``, the first of equal maxima (numpy's).

    Classes ``0 … C-1`` (ints, or bools and integral floats, which labels carry as int64) are
    their own indices: ArgMax writes the label and no lookup follows (one operator less per
    call, a few tenths of a microsecond of a one-row call).
    """
    name = scope.get_unique_variable_name
    op = scope.get_unique_operator_name
    label = operator.outputs[0].full_name
    classes = np.asarray(operator.raw_operator.classes_)
    strings = _string_classes(classes)
    if not strings and [int(c) for c in classes] == list(range(len(classes))):
        container.add_node(
            "ArgMax", [probabilities], [label], axis=1, keepdims=0, name=op("ArgMax")
        )
        return
    index = name("label_index")
    container.add_node("ArgMax", [probabilities], [index], axis=1, keepdims=0, name=op("ArgMax"))
    table = name("classes")
    if strings:
        container.add_initializer(
            table, TensorProto.STRING, [len(classes)], [str(c).encode() for c in classes]
        )
    else:
        container.add_initializer(
            table, TensorProto.INT64, [len(classes)], [int(c) for c in classes]
        )
    container.add_node("Gather", [table, index], [label], axis=0, name=op("Gather"))


def regression_link(
    model_name: str,
    objective: str,
    *,
    identity: tuple[str, ...],
    exp: tuple[str, ...],
    logistic: str,
) -> str:
    """The inverse link (``write_regressor``'s ``link``) of a booster's regression objective.

    Raises:
        ConversionError: an objective with none of the three links.
    """
    if objective in identity:
        return "identity"
    if objective in exp:
        return "exp"
    if objective == logistic:
        return "logistic"
    raise ConversionError(
        f"{model_name}(objective={objective!r}) cannot be converted; use one of "
        f"{', '.join(identity + exp)} or {logistic}"
    )


def write_regressor(
    scope: Any, operator: Any, container: Any, spec: TreeEnsembleSpec, *, link: str = "identity"
) -> None:
    """Add the ensemble and a regressor head.

    ``link`` is the inverse link applied to the raw score: ``"identity"``, ``"exp"`` or
    ``"logistic"``.
    """
    _import_target_opset(container)
    double = is_double(operator)
    given = _input(scope, operator, container)
    raw = add_raw_scores(scope, container, given.x, spec, double=double, text_inputs=given.text)
    out = operator.outputs[0].full_name
    op = scope.get_unique_operator_name
    if link == "exp":
        container.add_node("Exp", [raw], [out], name=op("Exp"))
    elif link == "logistic":
        container.add_node("Sigmoid", [raw], [out], name=op("Sigmoid"))
    elif link == "identity":
        container.add_node("Identity", [raw], [out], name=op("Identity"))
    else:  # pragma: no cover - converters pass one of the above
        raise ValueError(f"unknown link {link!r}")


def outlier_shape(operator: Any) -> None:
    """Label ``[N]`` (int64: 1 inlier, -1 outlier) and the decision function ``[N, 1]``."""
    from skl2onnx.common.data_types import Int64TensorType

    operator.outputs[0].type = Int64TensorType([None])
    operator.outputs[1].type = _tensor_type(operator)([None, 1])


def write_outlier(
    scope: Any,
    operator: Any,
    container: Any,
    spec: TreeEnsembleSpec,
    *,
    scale: float,
    shift: float,
    offset: float,
) -> None:
    """Add the ensemble and an isolation forest's head: ``decision = -exp(scale * raw + shift)
    - offset`` (``raw`` the sum over trees of the path lengths), ``label = -1`` where
    ``decision < 0``, else 1."""
    _import_target_opset(container)
    double = is_double(operator)
    onnx_type = TensorProto.DOUBLE if double else TensorProto.FLOAT
    name = scope.get_unique_variable_name
    op = scope.get_unique_operator_name
    given = _input(scope, operator, container)
    raw = add_raw_scores(scope, container, given.x, spec, double=double, text_inputs=given.text)
    scaled, shifted, grown, score = name("scaled"), name("shifted"), name("grown"), name("score")
    container.add_node(
        "Mul", [raw, _constant(scope, container, scale, onnx_type)], [scaled], name=op("Mul")
    )
    container.add_node(
        "Add", [scaled, _constant(scope, container, shift, onnx_type)], [shifted], name=op("Add")
    )
    container.add_node("Exp", [shifted], [grown], name=op("Exp"))
    container.add_node("Neg", [grown], [score], name=op("Neg"))
    decision = operator.outputs[1].full_name
    container.add_node(
        "Sub", [score, _constant(scope, container, offset, onnx_type)], [decision], name=op("Sub")
    )
    below, flat, axes = name("outlier"), name("outlier_flat"), name("axes")
    container.add_node(
        "Less", [decision, _constant(scope, container, 0.0, onnx_type)], [below], name=op("Less")
    )
    container.add_initializer(axes, TensorProto.INT64, [1], [1])
    container.add_node("Squeeze", [below, axes], [flat], name=op("Squeeze"))
    minus, plus = name("minus_one"), name("plus_one")
    container.add_initializer(minus, TensorProto.INT64, [], [-1])
    container.add_initializer(plus, TensorProto.INT64, [], [1])
    container.add_node(
        "Where", [flat, minus, plus], [operator.outputs[0].full_name], name=op("Where")
    )


def text_features(operator: Any) -> list[int]:
    """The feature indices that arrive as text (a table's category and text columns), in order.

    They are the positions :func:`_input` hands to the graph as text columns.
    """
    from skl2onnx.common.data_types import StringTensorType

    inputs = list(operator.inputs)
    if not any(isinstance(v.type, StringTensorType) for v in inputs):
        return []
    found: list[int] = []
    position = 0
    for variable in inputs:
        width = _width(variable)
        if isinstance(variable.type, StringTensorType):
            found.extend(range(position, position + width))
        position += width
    return found
