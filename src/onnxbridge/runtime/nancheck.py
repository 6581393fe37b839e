"""Checking a large call for missing values after the run, on its output, where that is exact.

A model whose source refused missing values gets its input checked for NaN before each call
(``Predictor.prepare``). On a large call to a linear model that check is a large share of the
call: on 100 000 × 28 float32 rows it added ~0.4 ms to a ~1.3 ms call, more than the check alone
(0.15 ms) because it pulls the whole input through the cache once more (docs/benchmarks.md).

For some graphs a NaN anywhere in a row's input always shows as NaN in the row's output, so the
output — ``[N, C]``, a few columns — can be checked instead, and the input only when the output
has NaN (then the usual error names the rows and columns). That holds when:

1. every operator of the graph is one whose NaN flow does not depend on the values: linear
   models, elementwise arithmetic with constants, casts, shapes, softmax, L1 / L2 normalizers
   (:data:`NAN_CARRYING_OPS`; no trees, no ``Relu`` / ``Max`` / ``Clip``, whose NaN handling
   depends on the other operand);
2. and the session at hand shows it: a probe with one NaN feature per row, for every feature,
   in a small batch and at the end of a larger one (vectorised loops and their tails), gives
   NaN in the checked output on every probe row (:func:`session_shows_nan`).

Anything else keeps the input check.

A session running linear operators as dot products (:mod:`onnxbridge.runtime.linear`) has one
more output, a NaN flag over the whole call: when it shows NaN on every probe too
(:func:`flag_shows_nan`), the call checks that ``[1, 1]`` value instead of its ``[N, C]`` output
— which, on 10 000 rows of a logistic regression, took 6-10 µs of a ~60 µs call, since the
output comes back in fresh memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NAN_CARRYING_OPS", "flag_shows_nan", "graph_carries_nan", "session_shows_nan"]

# (domain, op type): operators through which NaN flows the same way whatever the other values.
NAN_CARRYING_OPS = frozenset(
    {
        ("ai.onnx.ml", "LinearClassifier"),
        ("ai.onnx.ml", "LinearRegressor"),
        ("ai.onnx.ml", "Scaler"),
        ("ai.onnx.ml", "Normalizer"),  # L1 / L2 only (checked below)
        ("ai.onnx.ml", "ArrayFeatureExtractor"),
        ("", "Add"),
        ("", "Sub"),
        ("", "Mul"),
        ("", "Div"),
        ("", "MatMul"),
        ("", "Gemm"),
        ("", "Cast"),
        ("", "Identity"),
        ("", "Reshape"),
        ("", "Flatten"),
        ("", "Squeeze"),
        ("", "Unsqueeze"),
        ("", "Concat"),
        ("", "Softmax"),
        ("", "ArgMax"),
    }
)


def graph_carries_nan(model: bytes) -> bool:
    """Whether every operator of the ONNX model ``model`` is in :data:`NAN_CARRYING_OPS`."""
    import onnx
    from onnx import helper

    try:
        graph = onnx.load_from_string(model).graph
    except Exception:  # not parseable here: keep the input check
        return False
    constants = {init.name for init in graph.initializer}
    if len([i for i in graph.input if i.name not in constants]) != 1:
        return False
    for node in graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        if (domain, node.op_type) not in NAN_CARRYING_OPS:
            return False
        if node.op_type == "Normalizer":
            norms = [helper.get_attribute_value(a) for a in node.attribute if a.name == "norm"]
            if not norms or norms[0] not in (b"L1", b"L2"):
                return False
    return bool(graph.node)


def session_shows_nan(
    session: Any, input_name: str, dtype: Any, width: int, output_index: int
) -> bool:
    """Whether ``session`` gives NaN in output ``output_index`` on every probe row: one NaN
    feature per row, each feature in turn, in a batch of ``width`` rows and at the end of a
    batch of ``3 * width + 17`` rows whose other rows are finite."""
    try:
        probe = np.zeros((width, width), dtype=dtype)
        np.fill_diagonal(probe, np.nan)
        padded = np.concatenate([np.ones((2 * width + 17, width), dtype=dtype), probe])
        for rows, nan_from in ((probe, 0), (padded, 2 * width + 17)):
            output = np.asarray(session.run(None, {input_name: rows})[output_index])
            output = output.reshape(len(rows), -1)
            if not np.isnan(output[nan_from:]).any(axis=1).all():
                return False
            if nan_from and np.isnan(output[:nan_from]).any():
                return False  # NaN that no input explains: not a clean probe
    except Exception:
        return False
    return True


def flag_shows_nan(session: Any, input_name: str, dtype: Any, width: int, flag: str) -> bool:
    """Whether ``session``'s output ``flag`` is NaN for a batch with one NaN, each feature in
    turn in the last of 18 rows, and not for the same batch without it."""
    try:
        batch = np.ones((18, width), dtype=dtype)

        def flagged() -> bool:
            return bool(np.isnan(session.run([flag], {input_name: batch})[0]).any())

        if flagged():
            return False
        for j in range(width):
            batch[-1, j] = np.nan
            if not flagged():
                return False
            batch[-1, j] = 1
    except Exception:
        return False
    return True
