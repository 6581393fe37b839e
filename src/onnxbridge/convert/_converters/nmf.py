"""NMF and MiniBatchNMF: ``transform`` solves for ``W >= 0`` with the components fixed.

skl2onnx has no converter. Neither transform is a closed form: scikit-learn iterates, and its
stopping rule looks at the whole batch (the iteration count, hence every row's result, depends
on the other rows of the call). The graph runs the same iterations in an ONNX ``Loop`` with the
same batch-wide stopping rule, in float64 whatever the input precision (the output is cast back to
the input's float type), so it stops at the iteration scikit-learn stops at.
``[N, F] -> transformed [N, n_components]``.

- NMF (``solver="cd"``, the default): coordinate descent from ``W = 0``; per iteration one pass
  over the components (each updates its column of W for all rows at once, as the rows are
  independent), the projected-gradient ``violation`` summed over the batch; stop when
  ``violation / violation_of_iteration_1 <= tol`` or after ``max_iter``.
- MiniBatchNMF: multiplicative updates from ``W = sqrt(mean(X) / n_components)``; stop when
  ``|W - W_previous| / |W| <= tol`` (Frobenius norms) or after ``transform_max_iter``.

Only the Frobenius loss (``beta_loss="frobenius"``, the default) converts; NMF's ``solver="mu"``
and ``shuffle=True`` are refused with the setting to use instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.decomposition import NMF, MiniBatchNMF

from onnxbridge.convert._converters._graph import Graph, LoopBody, add_loop, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

# scikit-learn's floor for zero denominators in the multiplicative update.
_EPSILON = float(np.finfo(np.float32).eps)
_DOUBLE = TensorProto.DOUBLE


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.components_.shape[0]])


def _check(model: Any) -> None:
    name = type(model).__name__
    if model._beta_loss != 2:
        raise ConversionError(
            f"{name}(beta_loss={model.beta_loss!r}) cannot be converted yet; only "
            "beta_loss='frobenius' (the default) is: refit with it"
        )
    if isinstance(model, NMF) and not isinstance(model, MiniBatchNMF):
        if model.solver != "cd":
            raise ConversionError(
                f"NMF(solver={model.solver!r}) cannot be converted yet; only solver='cd' (the "
                "default) is: refit with it"
            )
        if model.shuffle:
            raise ConversionError(
                "NMF(shuffle=True) draws a new order of the components on every call; refit "
                "with shuffle=False (the default)"
            )


def _regularization(model: Any) -> tuple[float, float]:
    l1_reg, _, l2_reg, _ = model._compute_regularization(np.empty((1, model.n_features_in_)))
    return float(l1_reg), float(l2_reg)


def _gram(model: Any, l2_reg: float) -> np.ndarray:
    """``H @ H.T``, plus ``l2_reg`` on the diagonal (the coordinate descent's regularisation)."""
    components = np.asarray(model.components_, dtype=np.float64)
    hht = components @ components.T
    if l2_reg != 0:
        hht = hht + l2_reg * np.eye(len(components))
    return hht


def _nmf_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check(model)
    g = Graph(scope, operator, container)
    components = np.asarray(model.components_, dtype=np.float64)  # H [K, F]
    n_components = components.shape[0]
    l1_reg, l2_reg = _regularization(model)
    x = g.node("Cast", [g.input], to=_DOUBLE)
    xht = g.node("MatMul", [x, g.const(components.T, dtype=np.float64)])
    if l1_reg != 0:
        xht = g.node("Sub", [xht, g.const(l1_reg, dtype=np.float64)])
    hht = _gram(model, l2_reg)
    w0 = g.node("Mul", [xht, g.const(0.0, dtype=np.float64)])  # the cd solver starts at W = 0

    body = LoopBody(g.name("nmf_cd"), ["w_in", "v_in", "xht_in"], g.opset)
    w, v_in, xht_in = body.inputs
    violation = body.const(0.0)
    for t in range(n_components):
        column = body.const(np.array([t]), dtype=np.int64)
        w_t = body.node("Gather", [w, column], axis=1)  # [N, 1]
        xht_t = body.node("Gather", [xht_in, column], axis=1)
        products = body.node("MatMul", [w, body.const(hht[:, [t]])])
        grad = body.node("Add", [body.node("Neg", [xht_t]), products])
        at_zero = body.node("Equal", [w_t, body.const(0.0)])
        negative_part = body.node("Min", [grad, body.const(0.0)])
        projected = body.node("Where", [at_zero, negative_part, grad])
        total = body.node("ReduceSum", [body.node("Abs", [projected])], keepdims=0)
        violation = body.node("Add", [violation, total])
        if hht[t, t] != 0:
            moved = body.node("Sub", [w_t, body.node("Div", [grad, body.const(hht[t, t])])])
            new_t = body.node("Max", [moved, body.const(0.0)])
            mask = body.const((np.arange(n_components) == t).reshape(1, -1), dtype=bool)
            w = body.node("Where", [mask, new_t, w])
    first = body.node("Equal", [body.iteration, body.const(0, dtype=np.int64)])
    v_out = body.node("Where", [first, violation, v_in])
    converged = body.node(
        "Or",
        [
            body.node("Equal", [v_out, body.const(0.0)]),
            body.node("LessOrEqual", [body.node("Div", [violation, v_out]), body.const(model.tol)]),
        ],
    )
    cond_out = body.node("Not", [converged])
    outputs = [w, v_out, body.node("Identity", [xht_in])]
    w_final, _, _ = add_loop(
        g, body, int(model.max_iter), [w0, g.const(0.0, dtype=np.float64), xht], cond_out, outputs
    )
    g.node("Cast", [w_final], g.output(), to=g.onnx_type)


def _minibatch_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check(model)
    g = Graph(scope, operator, container)
    components = np.asarray(model.components_, dtype=np.float64)
    n_components = components.shape[0]
    l1_reg, l2_reg = _regularization(model)
    x = g.node("Cast", [g.input], to=_DOUBLE)
    xht = g.node("MatMul", [x, g.const(components.T, dtype=np.float64)])
    # W starts at sqrt(mean(X) / n_components): the mean of the whole batch.
    mean = g.node("ReduceMean", [x], keepdims=0)
    start = g.node("Sqrt", [g.node("Div", [mean, g.const(float(n_components), dtype=np.float64)])])
    w0 = g.node("Add", [g.node("Mul", [xht, g.const(0.0, dtype=np.float64)]), start])

    body = LoopBody(g.name("nmf_mu"), ["w_in", "xht_in"], g.opset)
    w_in, xht_in = body.inputs
    denominator = body.node("MatMul", [w_in, body.const(_gram(model, 0.0))])
    if l1_reg > 0:
        denominator = body.node("Add", [denominator, body.const(l1_reg)])
    if l2_reg > 0:
        denominator = body.node("Add", [denominator, body.node("Mul", [w_in, body.const(l2_reg)])])
    is_zero = body.node("Equal", [denominator, body.const(0.0)])
    denominator = body.node("Where", [is_zero, body.const(_EPSILON), denominator])
    w = body.node("Mul", [w_in, body.node("Div", [xht_in, denominator])])
    change = body.node(
        "Sqrt", [body.node("ReduceSumSquare", [body.node("Sub", [w, w_in])], keepdims=0)]
    )
    size = body.node("Sqrt", [body.node("ReduceSumSquare", [w], keepdims=0)])
    if model.tol > 0:
        converged = body.node(
            "LessOrEqual", [body.node("Div", [change, size]), body.const(model.tol)]
        )
        cond_out = body.node("Not", [converged])
    else:
        cond_out = body.const(True, dtype=bool)
    outputs = [w, body.node("Identity", [xht_in])]
    w_final, _ = add_loop(g, body, int(model._transform_max_iter), [w0, xht], cond_out, outputs)
    g.node("Cast", [w_final], g.output(), to=g.onnx_type)


def _example_nmf() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = np.abs(rng.normal(size=(60, 6))) + rng.rand(60, 1)
    return NMF(n_components=3, init="nndsvda", random_state=0, max_iter=500).fit(X), X


def _example_minibatch() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = np.abs(rng.normal(size=(60, 6))) + rng.rand(60, 1)
    return MiniBatchNMF(n_components=3, random_state=0, max_iter=2000).fit(X), X


for _spec in (
    ConverterSpec(NMF, _shape, _nmf_convert, _example_nmf),
    ConverterSpec(MiniBatchNMF, _shape, _minibatch_convert, _example_minibatch),
):
    register_converter(_spec)
