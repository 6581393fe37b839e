"""Fold per-feature scaling into the linear model after it: one pass over the rows fewer.

skl2onnx writes a scaler (StandardScaler, RobustScaler, MaxAbsScaler: an ``ai.onnx.ml`` ``Scaler``;
MinMaxScaler: ``Mul`` then ``Add`` by constants) as its own operator, and a linear model after it
(LogisticRegression, LinearSVC, Ridge, …) as ``LinearClassifier`` / ``LinearRegressor``. ONNX
Runtime's ``Scaler`` kernel is slow: on 100 000 × 28 float32 rows it took 7.1 ms against 1.45 ms
for the ``LinearClassifier`` after it (2 cores, docs/benchmarks.md). A per-feature affine map
``z = a * x + c`` followed by ``score = W z + b`` is the linear model ``(W a) x + (b + W c)``, so
the scaling folds into the coefficients and the graph reads each row once.

Folding changes float32 rounding: ``W z`` sums terms of the size of the scaled features, the
folded ``(W a) x`` terms of the size of ``W a x``, which is larger where the shift ``c`` is large
(a feature far from zero compared with its spread, like a year with a standard deviation of 5:
``c = -mean / std = -400``) and the two large parts cancel. A chain is folded only when every
``|c|`` is at most :data:`MAX_SHIFT` (``16``: at most 4 bits of the score's float32 precision;
a standard-scaled feature whose mean is within 16 standard deviations of zero), and only on
float32 input. Anything else is left as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_SHIFT", "fold_scaling_into_linear"]

# The largest |c| of z = a * x + c folded into a linear model (see the module docstring).
MAX_SHIFT = 16.0

_ML_DOMAIN = "ai.onnx.ml"
_LINEAR = ("LinearClassifier", "LinearRegressor")


def fold_scaling_into_linear(model: Any) -> list[str]:
    """Fold per-feature affine nodes into the ``LinearClassifier`` / ``LinearRegressor`` they
    feed, in place; returns one line per fold (for the conversion's notes)."""
    from onnx import numpy_helper

    graph = model.graph
    linears = [n for n in graph.node if n.domain == _ML_DOMAIN and n.op_type in _LINEAR]
    if not linears:  # most graphs: no shape inference, no copies of the initializers
        return []
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    float_inputs, widths = _float32_tensors(model)
    done = []
    for linear in linears:
        chain, start = _affine_chain(graph, linear.input[0], constants)
        if not chain or start not in float_inputs:
            continue
        width, scale, shift = _compose(chain)
        coefficients, intercepts = _linear_weights(linear)
        if not intercepts.size:
            continue
        if width is None:
            if not coefficients.size or coefficients.size % len(intercepts):
                continue
            width = coefficients.size // len(intercepts)
        if coefficients.size != width * len(intercepts) or width == 0:
            continue
        # A graph whose constants disagree with the tensor's width is wrong already; folded, it
        # would run and answer wrongly instead of failing.
        if widths.get(start, width) != width:
            continue
        scale = np.broadcast_to(scale, (width,)).astype(np.float64)
        shift = np.broadcast_to(shift, (width,)).astype(np.float64)
        if not (np.all(np.isfinite(scale)) and np.all(np.isfinite(shift))):
            continue
        if np.max(np.abs(shift)) > MAX_SHIFT:
            continue
        matrix = coefficients.reshape(len(intercepts), width)
        new_coefficients = matrix * scale
        new_intercepts = intercepts + matrix @ shift
        if not (np.all(np.isfinite(new_coefficients)) and np.all(np.isfinite(new_intercepts))):
            continue
        _set_floats(linear, "coefficients", new_coefficients.ravel())
        _set_floats(linear, "intercepts", new_intercepts)
        linear.input[0] = start
        names = " + ".join(node.op_type for node, _ in reversed(chain))
        for node, _ in chain:
            graph.node.remove(node)
        done.append(f"folded the scaling ({names}) into {linear.op_type}: one pass less per call")
    if done:
        _drop_unused_initializers(graph)
    return done


def _float32_tensors(model: Any) -> tuple[set[str], dict[str, int]]:
    """Names of the graph's float32 tensors known from its inputs and shape inference, and the
    width (last dimension) of those whose width is known."""
    import onnx

    float_type = onnx.TensorProto.FLOAT
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # a graph inference does not understand: its inputs are still known
        inferred = model.graph
    values = list(inferred.input) + list(inferred.value_info)
    floats = [v for v in values if v.type.tensor_type.elem_type == float_type]
    widths = {}
    for value in floats:
        dims = value.type.tensor_type.shape.dim
        if len(dims) == 2 and dims[1].HasField("dim_value"):
            widths[value.name] = int(dims[1].dim_value)
    return {v.name for v in floats}, widths


def _affine_chain(graph: Any, name: str, constants: dict[str, np.ndarray]) -> tuple[list, str]:
    """The per-feature affine nodes that end in tensor ``name``, last first, each used only by
    the next, as ``(node, (a, c))`` pairs, and the tensor the chain starts from."""
    outputs = {o.name for o in graph.output}
    chain: list[tuple[Any, tuple[np.ndarray, np.ndarray]]] = []
    while name not in outputs and _consumers(graph, name) == 1:
        node = _producer(graph, name)
        step = _affine(node, constants) if node is not None else None
        if step is None:
            break
        chain.append((node, step))
        name = _variable_input(node, constants)
    return chain, name


def _producer(graph: Any, name: str) -> Any:
    for node in graph.node:
        if name in node.output:
            return node
    return None


def _consumers(graph: Any, name: str) -> int:
    return sum(list(node.input).count(name) for node in graph.node)


def _variable_input(node: Any, constants: dict[str, np.ndarray]) -> str:
    return next(name for name in node.input if name not in constants)


def _affine(node: Any, constants: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(a, c)`` with ``node(x) = a * x + c`` per feature (1-D or scalar arrays), or None."""
    from onnx import helper

    if node.domain == _ML_DOMAIN and node.op_type == "Scaler" and len(node.input) == 1:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        offset = np.asarray(attrs.get("offset", [0.0]), dtype=np.float64)
        scale = np.asarray(attrs.get("scale", [1.0]), dtype=np.float64)
        if offset.size not in (1, scale.size) and scale.size != 1:
            return None
        return scale, -offset * scale  # (x - offset) * scale
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("Add", "Sub", "Mul", "Div"):
        return None
    if len(node.input) != 2 or sum(name in constants for name in node.input) != 1:
        return None
    constant_first = node.input[0] in constants
    value = constants[node.input[0] if constant_first else node.input[1]]
    if value.dtype.kind != "f" or value.ndim > 2 or (value.ndim == 2 and value.shape[0] != 1):
        return None
    value = value.astype(np.float64).reshape(-1)
    one, zero = np.ones_like(value), np.zeros_like(value)
    if node.op_type == "Add":
        return one, value
    if node.op_type == "Mul":
        return value, zero
    if node.op_type == "Sub":
        return (-one, value) if constant_first else (one, -value)
    if constant_first or np.any(value == 0):  # c / x is not affine; x / 0 is not foldable
        return None
    return 1.0 / value, zero


def _compose(chain: list[Any]) -> tuple[int | None, Any, Any]:
    """``(width, a, c)`` of the whole chain (first node applied first); width None when every
    step is a scalar."""
    scale: Any = np.ones(1)
    shift: Any = np.zeros(1)
    width = None
    for _, (a, c) in reversed(chain):
        for part in (a, c):
            if part.size > 1:
                if width not in (None, part.size):
                    return None, np.nan, np.nan
                width = part.size
        scale, shift = scale * a, shift * a + c  # a * (scale * x + shift) + c
    return width, scale, shift


def _linear_weights(node: Any) -> tuple[np.ndarray, np.ndarray]:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    coefficients = np.asarray(attrs.get("coefficients", []), dtype=np.float64)
    # Without intercepts the number of coefficient rows is not certain: such nodes are skipped.
    intercepts = np.asarray(attrs.get("intercepts", []), dtype=np.float64)
    return coefficients, intercepts


def _set_floats(node: Any, name: str, values: np.ndarray) -> None:
    from onnx import helper

    for i, attribute in enumerate(node.attribute):
        if attribute.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, [float(v) for v in values]))


def _drop_unused_initializers(graph: Any) -> None:
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    # An initializer also listed as a graph input (older IR) is the input's default: keep it.
    used |= {i.name for i in graph.input}
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)
