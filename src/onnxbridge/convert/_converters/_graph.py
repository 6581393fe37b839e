"""Small helpers the converter modules share: node and constant creation, distances, kernels.

Not a converter module (it registers nothing). Every helper works in the input's float precision:
a float32 input gives float32 constants and arithmetic, a float64 input float64 throughout, so the
graph's outputs keep the input's dtype family. Shapes are written ``[N, F]`` (rows, features); the
batch dimension ``N`` is never fixed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxbridge.errors import ConversionError

__all__ = [
    "KERNELS",
    "Graph",
    "LoopBody",
    "SubgraphBody",
    "add_loop",
    "class_constant",
    "float_tensor_type",
    "gather_labels",
    "label_output_parser",
    "label_tensor_type",
    "set_float_output",
    "single_output_parser",
]

# Operators whose axes moved from an attribute to an input, and the opset that moved them.
_AXES_AS_INPUT = {
    "ReduceSum": 13,
    "Unsqueeze": 13,
    "Squeeze": 13,
    "ReduceMax": 18,
    "ReduceMean": 18,
    "ReduceMin": 18,
    "ReduceProd": 18,
    "ReduceSumSquare": 18,
}

# Kernels of sklearn.metrics.pairwise.pairwise_kernels that a graph reproduces.
KERNELS = (
    "additive_chi2",
    "chi2",
    "cosine",
    "laplacian",
    "linear",
    "poly",
    "polynomial",
    "rbf",
    "sigmoid",
)


def float_tensor_type(operator: Any) -> type:
    """skl2onnx's tensor type matching the operator's input precision (float or double)."""
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    if isinstance(operator.inputs[0].type, DoubleTensorType):
        return DoubleTensorType
    return FloatTensorType


def set_float_output(operator: Any, index: int, shape: list[int | None]) -> None:
    """Declare output ``index`` as a float tensor of the input's precision."""
    operator.outputs[index].type = float_tensor_type(operator)(shape)


class Graph:
    """Adds the nodes of one converted operator to skl2onnx's container.

    Attributes:
        dtype: numpy float type of the arithmetic (float32 or float64, from the input).
        onnx_type: the matching ONNX element type.
    """

    def __init__(self, scope: Any, operator: Any, container: Any) -> None:
        from skl2onnx.common.data_types import DoubleTensorType

        self.scope = scope
        self.operator = operator
        self.container = container
        double = isinstance(operator.inputs[0].type, DoubleTensorType)
        self.dtype: type = np.float64 if double else np.float32
        self.onnx_type = TensorProto.DOUBLE if double else TensorProto.FLOAT
        # The default-domain opset the model is built for (a user may ask for an older one).
        self.opset = int(getattr(container, "target_opset", None) or 22)
        self._int_values: dict[str, list[int]] = {}

    @property
    def input(self) -> str:
        """Name of the operator's first input ``[N, F]``."""
        return self.operator.inputs[0].full_name

    def output(self, index: int = 0) -> str:
        """Name of the operator's output ``index``."""
        return self.operator.outputs[index].full_name

    def name(self, hint: str) -> str:
        """A fresh variable name."""
        return self.scope.get_unique_variable_name(hint)

    def const(self, value: Any, dtype: Any = None, hint: str = "c") -> str:
        """An initializer holding ``value`` (in the graph's float type unless ``dtype``)."""
        array = np.asarray(value, dtype=self.dtype if dtype is None else dtype)
        name = self.name(hint)
        self.container.add_initializer(name, None, None, numpy_helper.from_array(array, name))
        return name

    def int64(self, values: Any, hint: str = "i") -> str:
        """An int64 initializer (axes, shapes, indices)."""
        name = self.const(values, dtype=np.int64, hint=hint)
        self._int_values[name] = np.asarray(values, dtype=np.int64).ravel().tolist()
        return name

    def node(self, op_type: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        """Add one node with one output; returns the output's name.

        Written in the newest form; for older target opsets, axes given as an input become the
        attribute the older operator takes, and ``Shape(start, end)`` becomes ``Shape`` + ``Slice``.
        """
        output = output or self.name(op_type.lower())
        since = _AXES_AS_INPUT.get(op_type)
        if since is not None and self.opset < since and len(inputs) == 2:
            attrs = {**attrs, "axes": self._int_values[inputs[1]]}
            inputs = inputs[:1]
        if op_type == "Shape" and self.opset < 15 and ("start" in attrs or "end" in attrs):
            full = self.node("Shape", inputs)
            start, end = attrs.get("start", 0), attrs.get("end", np.iinfo(np.int64).max)
            return self.node("Slice", [full, self.int64([start]), self.int64([end])], output)
        self.container.add_node(
            op_type,
            inputs,
            [output],
            name=self.scope.get_unique_operator_name(op_type),
            **attrs,
        )
        return output

    def fill_rows(self, x: str, value: int, output: str | None = None) -> str:
        """``[N, F] -> [N]``: the int64 ``value`` once per row of ``x``."""
        rows = self.node("Shape", [x], start=0, end=1)
        fill = helper.make_tensor("value", TensorProto.INT64, [1], [int(value)])
        return self.node("ConstantOfShape", [rows], output, value=fill)

    def solve_spd(self, system: str, rhs: str, k: int, pivots: list[str] | None = None) -> str:
        """``[N, k, k], [N, k, 1] -> [N, k, 1]``: every row's symmetric positive definite system
        solved by Gauss-Jordan elimination, unrolled over the ``k`` pivots (positive definite:
        no pivoting needed).

        ``pivots``, if given, receives the ``[N, 1, 1]`` pivot of each step: the last one is the
        Schur complement of the leading block (the square of Cholesky's last diagonal entry).
        """
        augmented = self.node("Concat", [system, rhs], axis=2)  # [N, k, k + 1]
        for p in range(k):
            pivot_row = self.node(
                "Slice", [augmented, self.int64([p]), self.int64([p + 1]), self.int64([1])]
            )
            pivot = self.node(
                "Slice", [pivot_row, self.int64([p]), self.int64([p + 1]), self.int64([2])]
            )
            if pivots is not None:
                pivots.append(pivot)
            normalised = self.node("Div", [pivot_row, pivot])  # [N, 1, k + 1]
            factor = self.node(
                "Slice", [augmented, self.int64([p]), self.int64([p + 1]), self.int64([2])]
            )
            eliminated = self.node("Sub", [augmented, self.node("Mul", [factor, normalised])])
            is_pivot = self.const((np.arange(k) == p).reshape(1, k, 1), dtype=bool)
            augmented = self.node("Where", [is_pivot, normalised, eliminated])
        return self.node(
            "Slice", [augmented, self.int64([k]), self.int64([k + 1]), self.int64([2])]
        )

    # -- building blocks -------------------------------------------------------------------

    def matmul_const(self, x: str, matrix: np.ndarray, output: str | None = None) -> str:
        """``x @ matrix``."""
        return self.node("MatMul", [x, self.const(matrix, hint="w")], output)

    def affine(
        self, x: str, matrix: np.ndarray, bias: np.ndarray | None, output: str | None = None
    ) -> str:
        """``x @ matrix + bias``."""
        if bias is None:
            return self.matmul_const(x, matrix, output)
        return self.node("Add", [self.matmul_const(x, matrix), self.const(bias, hint="b")], output)

    def sub_const(self, x: str, value: Any, output: str | None = None) -> str:
        """``x - value`` (value broadcast along rows)."""
        return self.node("Sub", [x, self.const(value)], output)

    def row_sum_squares(self, x: str) -> str:
        """``[N, F] -> [N, 1]``: the squared norm of each row."""
        return self.node("ReduceSumSquare", [x, self.int64([1])], keepdims=1)

    def squared_euclidean(self, x: str, centers: np.ndarray) -> str:
        """``[N, F] -> [N, K]``: scikit-learn's ``euclidean_distances(x, centers, squared=True)``.

        Same expansion and order as scikit-learn (``-2 x·c + |x|² + |c|²``, clipped at 0).
        """
        centers = np.asarray(centers, dtype=np.float64)
        cross = self.matmul_const(x, (-2.0 * centers.T).astype(self.dtype))
        with_x = self.node("Add", [cross, self.row_sum_squares(x)])
        norms = (centers**2).sum(axis=1).reshape(1, -1)
        total = self.node("Add", [with_x, self.const(norms)])
        return self.node("Max", [total, self.const(0.0)])

    def euclidean(self, x: str, centers: np.ndarray, output: str | None = None) -> str:
        """``[N, F] -> [N, K]``: ``euclidean_distances(x, centers)``."""
        return self.node("Sqrt", [self.squared_euclidean(x, centers)], output)

    def manhattan(self, x: str, points: np.ndarray) -> str:
        """``[N, F] -> [N, M]``: ``manhattan_distances(x, points)`` (an ``[N, M, F]`` tensor)."""
        diff = self.pairwise_difference(x, points)
        return self.node("ReduceSum", [self.node("Abs", [diff]), self.int64([2])], keepdims=0)

    def pairwise_difference(self, x: str, points: np.ndarray) -> str:
        """``[N, F] -> [N, M, F]``: ``x[:, None, :] - points[None, :, :]``."""
        column = self.node("Unsqueeze", [x, self.int64([1])])
        return self.node("Sub", [column, self.const(np.asarray(points)[None, :, :])])

    def normalize_rows(self, x: str) -> str:
        """``sklearn.preprocessing.normalize(x)``: rows of zero norm stay zero."""
        norm = self.node("Sqrt", [self.row_sum_squares(x)])
        zero = self.node("Equal", [norm, self.const(0.0)])
        safe = self.node("Where", [zero, self.const(1.0), norm])
        return self.node("Div", [x, safe])

    def kernel(
        self,
        x: str,
        points: np.ndarray,
        kernel: str,
        *,
        gamma: float | None,
        degree: float,
        coef0: float,
        n_features: int,
    ) -> str:
        """``[N, F] -> [N, M]``: ``pairwise_kernels(x, points, metric=kernel, ...)``.

        ``gamma=None`` takes scikit-learn's default (``1 / n_features``; 1 for ``chi2``).

        Raises:
            ConversionError: a kernel other than :data:`KERNELS`.
        """
        points = np.asarray(points, dtype=np.float64)
        if kernel not in KERNELS:
            raise ConversionError(
                f"kernel={kernel!r} cannot be converted; use one of {', '.join(KERNELS)}"
            )
        if gamma is None:
            gamma = 1.0 if kernel == "chi2" else 1.0 / n_features
        if kernel == "linear":
            return self.matmul_const(x, points.T.astype(self.dtype))
        if kernel in ("poly", "polynomial", "sigmoid"):
            dot = self.matmul_const(x, points.T.astype(self.dtype))
            times_gamma = self.node("Mul", [dot, self.const(gamma)])
            scaled = self.node("Add", [times_gamma, self.const(coef0)])
            if kernel == "sigmoid":
                return self.node("Tanh", [scaled])
            return self.node("Pow", [scaled, self.const(degree)])
        if kernel == "rbf":
            scaled = self.node("Mul", [self.squared_euclidean(x, points), self.const(-gamma)])
            return self.node("Exp", [scaled])
        if kernel == "laplacian":
            scaled = self.node("Mul", [self.manhattan(x, points), self.const(-gamma)])
            return self.node("Exp", [scaled])
        if kernel == "cosine":
            unit_points = points / _safe_norm(points)
            return self.matmul_const(self.normalize_rows(x), unit_points.T.astype(self.dtype))
        # chi2 / additive_chi2: -sum((x - y)² / (x + y)), terms with x + y == 0 count 0.
        diff = self.pairwise_difference(x, points)
        column = self.node("Unsqueeze", [x, self.int64([1])])
        total = self.node("Add", [column, self.const(points[None, :, :])])
        zero = self.node("Equal", [total, self.const(0.0)])
        num = self.node("Where", [zero, self.const(0.0), self.node("Mul", [diff, diff])])
        den = self.node("Where", [zero, self.const(1.0), total])
        summed = self.node("ReduceSum", [self.node("Div", [num, den]), self.int64([2])], keepdims=0)
        if kernel == "additive_chi2":
            return self.node("Neg", [summed])
        return self.node("Exp", [self.node("Mul", [summed, self.const(-gamma)])])


def _safe_norm(points: np.ndarray) -> np.ndarray:
    norm = np.sqrt((points**2).sum(axis=1, keepdims=True))
    norm[norm == 0] = 1.0
    return norm


def label_tensor_type(classes: np.ndarray) -> type:
    """skl2onnx's tensor type for class labels: strings stay strings, numbers become int64."""
    from skl2onnx.common.data_types import Int64TensorType, StringTensorType

    return StringTensorType if np.asarray(classes).dtype.kind in "OUS" else Int64TensorType


def class_constant(classes: np.ndarray, owner: str) -> np.ndarray:
    """The fitted classes as an array ONNX can hold (``str`` objects or int64).

    Raises:
        ConversionError: classes that are neither strings nor integral numbers.
    """
    classes = np.asarray(classes)
    if classes.dtype.kind in "OUS":
        return np.array([str(c) for c in classes], dtype=object)
    if classes.dtype.kind in "iub" or np.all(np.mod(classes, 1) == 0):
        return classes.astype(np.int64)
    raise ConversionError(
        f"{owner} has classes {classes[:5].tolist()} that are neither strings nor integers; "
        "ONNX labels are int64 or strings: encode the target (e.g. LabelEncoder) and refit"
    )


def gather_labels(g: Graph, index: str, classes: np.ndarray, owner: str, output: str) -> str:
    """``classes[index]`` for an int64 index ``[N]``: the label output ``[N]``."""
    table = class_constant(classes, owner)
    if table.dtype == object:
        # skl2onnx copies only raw_data from a TensorProto; strings live in string_data.
        name = g.name("classes")
        encoded = [c.encode("utf-8") for c in table]
        g.container.add_initializer(name, TensorProto.STRING, [len(table)], encoded)
    else:
        name = g.int64(table, hint="classes")
    return g.node("Gather", [name, index], output, axis=0)


def single_output_parser(
    scope: Any, model: Any, inputs: list[Any], custom_parsers: Any = None
) -> list[Any]:
    """A skl2onnx parser declaring one output (``variable``), whatever mixins the estimator has.

    skl2onnx's default parser gives every ``ClusterMixin`` a label and a score output; transformers
    that are clusterers too (FeatureAgglomeration) only transform.
    """
    from skl2onnx._supported_operators import get_model_alias
    from skl2onnx.common.data_types import guess_tensor_type

    operator = scope.declare_local_operator(get_model_alias(type(model)), model)
    operator.inputs = inputs
    output = scope.declare_local_variable("variable", guess_tensor_type(inputs[0].type))
    operator.outputs.append(output)
    return operator.outputs


def label_output_parser(
    scope: Any, model: Any, inputs: list[Any], custom_parsers: Any = None
) -> list[Any]:
    """A skl2onnx parser declaring only a ``label`` output (clusterers without scores)."""
    from skl2onnx._supported_operators import get_model_alias
    from skl2onnx.common.data_types import Int64TensorType

    operator = scope.declare_local_operator(get_model_alias(type(model)), model)
    operator.inputs = inputs
    operator.outputs.append(scope.declare_local_variable("label", Int64TensorType()))
    return operator.outputs


class SubgraphBody:
    """The body of a ``Loop`` or ``Scan`` under construction: its nodes and constants.

    Its own constants are ``Constant`` nodes, so it reads nothing from the outer graph but what
    it is given; ``node`` moves axes given as an input to the attribute for older opsets.
    """

    def __init__(self, prefix: str, opset: int = 22) -> None:
        self.prefix = prefix
        self.nodes: list[Any] = []
        self.count = 0
        self.opset = opset
        self._int_values: dict[str, list[int]] = {}

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}_{hint}_{self.count}"

    def const(self, value: Any, dtype: Any = np.float64) -> str:
        out = self.name("c")
        array = np.asarray(value, dtype=dtype)
        tensor = numpy_helper.from_array(array, out)
        self.nodes.append(helper.make_node("Constant", [], [out], value=tensor))
        if array.dtype == np.int64:
            self._int_values[out] = array.ravel().tolist()
        return out

    def node(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        """Add one node; its output name, or the list of ``n_out`` names."""
        outputs = [self.name(op_type.lower()) for _ in range(n_out)]
        since = _AXES_AS_INPUT.get(op_type)
        if since is not None and self.opset < since and len(inputs) == 2:
            attrs = {**attrs, "axes": self._int_values[inputs[1]]}
            inputs = inputs[:1]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, **attrs))
        return outputs[0] if n_out == 1 else outputs


class LoopBody(SubgraphBody):
    """An ONNX ``Loop`` body under construction: its carried float64 inputs, nodes, constants."""

    def __init__(self, prefix: str, carried: list[str], opset: int = 22) -> None:
        super().__init__(prefix, opset)
        self.iteration = self.name("iteration")
        self.cond_in = self.name("cond_in")
        self.inputs = [self.name(hint) for hint in carried]

    def graph(self, cond_out: str, outputs: list[str]) -> Any:
        def value(name: str, elem_type: int) -> Any:
            return helper.make_tensor_value_info(name, elem_type, None)

        return helper.make_graph(
            self.nodes,
            self.prefix,
            [
                helper.make_tensor_value_info(self.iteration, TensorProto.INT64, []),
                helper.make_tensor_value_info(self.cond_in, TensorProto.BOOL, []),
            ]
            + [value(name, TensorProto.DOUBLE) for name in self.inputs],
            [helper.make_tensor_value_info(cond_out, TensorProto.BOOL, [])]
            + [value(name, TensorProto.DOUBLE) for name in outputs],
        )


def add_loop(
    g: Graph, body: LoopBody, max_iter: int, initial: list[str], cond_out: str, outputs: list[str]
) -> list[str]:
    """Run ``body`` at most ``max_iter`` times from ``initial``; the final carried values."""
    finals = [g.name("loop_out") for _ in initial]
    g.container.add_node(
        "Loop",
        [g.int64(max_iter), g.const(True, dtype=bool), *initial],
        finals,
        name=g.scope.get_unique_operator_name("Loop"),
        body=body.graph(cond_out, outputs),
    )
    return finals
