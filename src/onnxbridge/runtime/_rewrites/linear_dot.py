"""Run one-column linear operators as a matrix-vector product over the batch, for large batches.

ONNX Runtime computes ``LinearClassifier`` and ``LinearRegressor`` with a general matrix
product of the rows ``[N, F]`` by the coefficients ``[F, K]``. With one or two columns (a
single-target regression, a binary classifier) its kernel still works through a panel of 16
columns, so most of its arithmetic is thrown away. The same product written the other way round
— the coefficients ``[1, F]`` times the rows transposed (``Gemm`` with ``transB=1``), which gives
``[1, N]``, the same memory as ``[N, 1]`` — runs on ONNX Runtime's one-row kernel, a dot product
per row, which is much faster from a few thousand rows. On a few rows the extra operators cost
more than they save, so, like trees in blocks, the rewrite is a *session setting*
(:attr:`SessionSettings.linear_gemv <onnxbridge.runtime._settings.SessionSettings>`) used for
large calls only.

What is rewritten, each with the operator's own outputs:

- ``LinearRegressor`` with one target and no post-transform;
- ``LinearClassifier`` with two classes whose two coefficient rows (and intercepts) are exact
  negatives of each other — what scikit-learn's binary linear classifiers convert to — and
  post-transform ``NONE``, ``LOGISTIC`` or ``SOFTMAX``: the scores are ``[-z, z]``, exactly as
  the operator's, the label is the second class where ``z > 0`` (the operator's first-maximum
  rule; a NaN score gives the first class, as there).

(``MatMul`` by a constant ``[F, 1]`` matrix, as SGDClassifier converts, was tried the same way
and was slower: ONNX Runtime packs a constant right-hand side once, at load.)

Only float inputs of known rank 2 qualify. Results differ from the operator's by the order of
float32 additions in the dot products (scores within a few units in the last place, a label only
where a score is that close to 0). Anything else is left as it is (:func:`gemv_linear_models`
returns None when nothing qualifies); the ``.onnx`` file is never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onnxbridge._onnxfile import unique_names
from onnxbridge.runtime._rewrites import Rewrite
from onnxbridge.runtime._rewrites.tree_blocks import ML_DOMAIN, attributes_of

# A rewritten operator: its nodes and their initializers.
_Nodes = tuple[list[Any], list[Any]]

__all__ = ["LINEAR_DOT", "LINEAR_GEMV_MIN_ROWS", "gemv_linear_models"]

# Calls from this many rows run on the rewrite: below it the extra operators cost more than the
# dot products save (measured on binary linear classifiers and single-target regressors).
LINEAR_GEMV_MIN_ROWS = 1024
# Opsets before 7 lack Greater on floats and the Reshape taking its shape as an input.
_MIN_OPSET = 7
_FLOAT = 1  # TensorProto.FLOAT


def _float_matrices(proto: Any) -> set[str]:
    """Names of the values the graph types as float tensors of rank 2 (after inference)."""
    import onnx

    # A model shape inference refuses raises here: the pass fails, and the failure is logged.
    inferred = onnx.shape_inference.infer_shapes(proto)
    graph = inferred.graph
    found = set()
    for value in [*graph.input, *graph.value_info, *graph.output]:
        tensor = value.type.tensor_type
        if (
            value.type.HasField("tensor_type")
            and tensor.elem_type == _FLOAT
            and tensor.HasField("shape")
            and len(tensor.shape.dim) == 2
        ):
            found.add(value.name)
    return found


def _dot_rows(
    x: str, weights: np.ndarray, bias: float, out: str, name: Callable[[str], str]
) -> tuple[list[Any], list[Any]]:
    """Nodes and initializers computing ``out [1, N] = weights [F] · x [N, F] + bias``, the
    one-row kernel's product (a dot product per row of ``x``)."""
    from onnx import helper, numpy_helper

    w, b = name("gemv_w"), name("gemv_b")
    inits = [
        numpy_helper.from_array(weights.astype(np.float32).reshape(1, -1), w),
        numpy_helper.from_array(np.array([bias], dtype=np.float32), b),
    ]
    return [helper.make_node("Gemm", [w, x, b], [out], name=name("gemv"), transB=1)], inits


def _row_product(
    x: str, weights: np.ndarray, bias: float, out: str, name: Callable[[str], str]
) -> _Nodes:
    """Nodes and initializers computing ``out [N, 1] = x [N, F] @ weights [F] + bias``."""
    from onnx import helper, numpy_helper

    flat, row = name("gemv_shape"), name("gemv_row")
    nodes, inits = _dot_rows(x, weights, bias, row, name)
    inits.append(numpy_helper.from_array(np.array([-1, 1], dtype=np.int64), flat))
    nodes.append(helper.make_node("Reshape", [row, flat], [out], name=name("gemv_column")))
    return nodes, inits


def _regressor(node: Any, name: Callable[[str], str]) -> _Nodes | None:
    attrs = attributes_of(node)
    coefficients = attrs.get("coefficients")
    intercepts = attrs.get("intercepts", np.zeros(1, dtype=np.float32))
    if (
        coefficients is None
        or attrs.get("targets", 1) != 1
        or attrs.get("post_transform", "NONE") != "NONE"
        or len(intercepts) > 1
    ):
        return None
    bias = float(intercepts[0]) if len(intercepts) else 0.0
    return _row_product(node.input[0], coefficients, bias, node.output[0], name)


def _classifier(node: Any, name: Callable[[str], str]) -> _Nodes | None:
    from onnx import helper

    attrs = attributes_of(node)
    coefficients = attrs.get("coefficients")
    intercepts = attrs.get("intercepts")
    labels = attrs.get("classlabels_ints", attrs.get("classlabels_strings"))
    transform = attrs.get("post_transform", "NONE")
    if (
        coefficients is None
        or intercepts is None
        or labels is None
        or len(labels) != 2
        or len(intercepts) != 2
        or len(coefficients) % 2
        or transform not in ("NONE", "LOGISTIC", "SOFTMAX")
    ):
        return None
    first, second = coefficients.reshape(2, -1)
    if not (np.array_equal(first, -second) and intercepts[0] == -intercepts[1]):
        return None
    # z [1, N]: the second class's score of every row (the first's is -z).
    z = name("gemv_z")
    nodes, inits = _dot_rows(node.input[0], second, float(intercepts[1]), z, name)
    scores_out = node.output[1] if len(node.output) > 1 else ""
    if scores_out:
        # [-z; z] as two rows [2, N] (whole-row copies), the transform on those, then
        # transposed to [N, 2]: concatenating [N, 1] columns instead copies value by value.
        negative, pair, transformed = (
            name("gemv_negative"),
            name("gemv_pair"),
            name("gemv_transformed"),
        )
        nodes += [
            helper.make_node("Neg", [z], [negative], name=name("gemv_neg")),
            helper.make_node("Concat", [negative, z], [pair], name=name("gemv_rows"), axis=0),
        ]
        if transform == "LOGISTIC":
            nodes.append(helper.make_node("Sigmoid", [pair], [transformed], name=name("gemv_p")))
        else:
            transformed = pair
        # Softmax comes after the transpose: over the two classes of each row of [N, 2] (axis 1
        # means that in every opset).
        transposed = name("gemv_transposed") if transform == "SOFTMAX" else scores_out
        nodes.append(
            helper.make_node(
                "Transpose", [transformed], [transposed], name=name("gemv_scores"), perm=[1, 0]
            )
        )
        if transform == "SOFTMAX":
            nodes.append(
                helper.make_node("Softmax", [transposed], [scores_out], name=name("gemv_p"), axis=1)
            )
    if node.output[0]:
        label_nodes, label_inits = _label_nodes(z, labels, node.output[0], name)
        nodes += label_nodes
        inits += label_inits
    return nodes, inits


def _label_nodes(
    z: str, labels: np.ndarray, label_out: str, name: Callable[[str], str]
) -> tuple[list[Any], list[Any]]:
    """Nodes and initializers computing the label: the second class where ``z > 0`` (the
    operator's first-maximum rule; NaN gives the first class)."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []
    zero, positive, index, flat = (
        name("gemv_zero"),
        name("gemv_positive"),
        name("gemv_index"),
        name("gemv_flat"),
    )
    ints = labels.dtype != object
    plain = ints and labels.tolist() == [0, 1]
    indices = label_out if plain else name("gemv_label_index")
    inits += [
        numpy_helper.from_array(np.array(0, dtype=np.float32), zero),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), flat),
    ]
    nodes += [
        helper.make_node("Greater", [z, zero], [positive], name=name("gemv_greater")),
        helper.make_node("Cast", [positive], [index], name=name("gemv_cast"), to=TensorProto.INT64),
        helper.make_node("Reshape", [index, flat], [indices], name=name("gemv_labels")),
    ]
    if not plain:
        table = name("gemv_classes")
        if ints:
            inits.append(numpy_helper.from_array(labels.astype(np.int64), table))
        else:
            tensor = helper.make_tensor(table, TensorProto.STRING, [2], labels.tolist())
            inits.append(tensor)
        nodes.append(
            helper.make_node("Gather", [table, indices], [label_out], name=name("gemv_class"))
        )
    return nodes, inits


def gemv_linear_models(model: bytes) -> bytes | None:
    """``model`` with its one-column linear operators as row products, or None.

    Args:
        model: a serialized ONNX model.

    Returns:
        The rewritten model's bytes, or None when no operator qualifies (see the module
        docstring).
    """
    import onnx

    if not _has_linear_operator(model):
        return None
    proto = onnx.load_model_from_string(model)
    graph = proto.graph
    opsets = {o.domain or "ai.onnx": o.version for o in proto.opset_import}
    if opsets.get("ai.onnx", _MIN_OPSET) < _MIN_OPSET:
        return None
    kinds = {"LinearRegressor", "LinearClassifier"}
    if not any(n.domain == ML_DOMAIN and n.op_type in kinds for n in graph.node):
        return None
    matrices = _float_matrices(proto)
    unique = unique_names(graph)
    rewritten: list[Any] = []
    added: list[Any] = []
    for node in graph.node:
        found = None
        if node.input and node.input[0] in matrices:
            if node.domain == ML_DOMAIN and node.op_type == "LinearRegressor":
                found = _regressor(node, unique)
            elif node.domain == ML_DOMAIN and node.op_type == "LinearClassifier":
                found = _classifier(node, unique)
        if found is None:
            rewritten.append(node)
            continue
        rewritten.extend(found[0])
        added.extend(found[1])
    if not added:
        return None
    del graph.node[:]
    graph.node.extend(rewritten)
    graph.initializer.extend(added)
    if "ai.onnx" not in opsets:
        proto.opset_import.append(onnx.helper.make_opsetid("", 13))
    return proto.SerializeToString()


def _has_linear_operator(model: bytes) -> bool:
    """Whether ``model`` may hold an operator this pass rewrites (a byte search: parsing a large
    forest only to find none takes far longer)."""
    return b"LinearClassifier" in model or b"LinearRegressor" in model


LINEAR_DOT = Rewrite("linear_dot", _has_linear_operator, gemv_linear_models)
