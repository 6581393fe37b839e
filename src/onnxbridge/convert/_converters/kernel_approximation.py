"""Kernel approximations: Nystroem, RBFSampler, SkewedChi2Sampler, AdditiveChi2Sampler,
PolynomialCountSketch. skl2onnx converts none of them. All are ``[N, F] -> transformed [N, K]``.

- Nystroem: ``kernel(X, components_) @ normalization_.T`` for the named kernels (see
  :data:`~onnxbridge.convert._converters._graph.KERNELS`); callable / precomputed are refused.
- RBFSampler: ``cos(X @ random_weights_ + random_offset_) * sqrt(2 / n_components)``.
- SkewedChi2Sampler: the same on ``log(X + skewedness)``; scikit-learn raises for
  ``X <= -skewedness``, the graph gives NaN there.
- AdditiveChi2Sampler: ``sqrt(x·L)``, then per step ``j`` the cosine and sine terms of
  Vedaldi & Zisserman's map; zero entries stay zero; negative input (which scikit-learn refuses)
  gives NaN.
- PolynomialCountSketch: the degree count sketches of ``[sqrt(gamma)·X, sqrt(coef0)]`` and their
  circular convolution, computed as scikit-learn's FFT product is, but with real DFT matrices
  (``[N, F] @ [F, 2K]`` per degree; a graph needs no complex numbers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.kernel_approximation import (
    AdditiveChi2Sampler,
    Nystroem,
    PolynomialCountSketch,
    RBFSampler,
    SkewedChi2Sampler,
)

from onnxbridge.convert._converters._graph import KERNELS, Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _data(positive: bool = False) -> np.ndarray:
    X, _ = make_classification(
        n_samples=80, n_features=6, n_informative=4, n_redundant=0, random_state=0
    )
    return np.abs(X) if positive else X


# -- Nystroem ----------------------------------------------------------------------------


def _nystroem_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.normalization_.shape[0]])


def _nystroem_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    kernel = model.kernel
    if callable(kernel) or kernel not in KERNELS:
        shown = getattr(kernel, "__name__", kernel)
        raise ConversionError(
            f"Nystroem(kernel={shown!r}) cannot be converted: a graph reproduces only the named "
            f"kernels {', '.join(KERNELS)}; refit with one of them"
        )
    # As Nystroem._get_kernel_params: kernel_params, overridden by the parameters that are set.
    params = dict(model.kernel_params or {})
    for key in ("gamma", "degree", "coef0"):
        if getattr(model, key) is not None:
            params[key] = getattr(model, key)
    g = Graph(scope, operator, container)
    components = np.asarray(model.components_, dtype=np.float64)
    gram = g.kernel(
        g.input,
        components,
        kernel,
        gamma=params.get("gamma"),
        degree=params.get("degree", 3),
        coef0=params.get("coef0", 1),
        n_features=components.shape[1],
    )
    normalization = np.asarray(model.normalization_, dtype=np.float64)
    g.matmul_const(gram, normalization.T.astype(g.dtype), g.output())


def _nystroem_example() -> tuple[Any, Any]:
    X = _data()
    return Nystroem(n_components=30, random_state=0).fit(X), X


# -- RBFSampler / SkewedChi2Sampler --------------------------------------------------------


def _sampler_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.random_weights_.shape[1]])


def _random_features(g: Graph, x: str, model: Any, scale: float) -> None:
    weights = np.asarray(model.random_weights_, dtype=np.float64)
    projection = g.affine(x, weights.astype(g.dtype), np.asarray(model.random_offset_))
    g.node("Mul", [g.node("Cos", [projection]), g.const(scale)], g.output())


def _rbf_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    _random_features(g, g.input, model, (2.0 / model.n_components) ** 0.5)


def _skewed_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    shifted = g.node("Log", [g.node("Add", [g.input, g.const(model.skewedness)])])
    _random_features(g, shifted, model, float(np.sqrt(2.0) / np.sqrt(model.n_components)))


def _rbf_example() -> tuple[Any, Any]:
    X = _data()
    return RBFSampler(random_state=0).fit(X), X


def _skewed_example() -> tuple[Any, Any]:
    X = _data()
    return SkewedChi2Sampler(skewedness=5.0, n_components=50, random_state=0).fit(X), X


# -- AdditiveChi2Sampler -------------------------------------------------------------------

_DEFAULT_INTERVALS = {1: 0.8, 2: 0.5, 3: 0.4}


def _interval(model: Any) -> float:
    if model.sample_interval is not None:
        return float(model.sample_interval)
    if model.sample_steps not in _DEFAULT_INTERVALS:
        raise ConversionError(
            f"AdditiveChi2Sampler(sample_steps={model.sample_steps}) needs a sample_interval "
            "(scikit-learn refuses to transform without one); set sample_interval and refit"
        )
    return _DEFAULT_INTERVALS[model.sample_steps]


def _additive_shape(operator: Any) -> None:
    model = operator.raw_operator
    set_float_output(operator, 0, [None, model.n_features_in_ * (2 * model.sample_steps - 1)])


def _additive_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    interval = _interval(model)
    g = Graph(scope, operator, container)
    x = g.input
    nonzero = g.node("Not", [g.node("Equal", [x, g.const(0.0)])])
    # Zeros are replaced by 1 before log / sqrt and their outputs set back to 0, as the
    # non-zero mask of scikit-learn does.
    safe = g.node("Where", [nonzero, x, g.const(1.0)])
    zero = g.const(0.0)
    parts = [
        g.node("Where", [nonzero, g.node("Sqrt", [g.node("Mul", [safe, g.const(interval)])]), zero])
    ]
    log_step = g.node("Mul", [g.node("Log", [safe]), g.const(interval)])
    step = g.node("Mul", [safe, g.const(2 * interval)])
    for j in range(1, model.sample_steps):
        factor = g.node("Sqrt", [g.node("Div", [step, g.const(np.cosh(np.pi * j * interval))])])
        angle = g.node("Mul", [log_step, g.const(float(j))])
        for fn in ("Cos", "Sin"):
            term = g.node("Mul", [factor, g.node(fn, [angle])])
            parts.append(g.node("Where", [nonzero, term, zero]))
    if len(parts) == 1:
        g.node("Identity", parts, g.output())
    else:
        g.node("Concat", parts, g.output(), axis=1)


def _additive_example() -> tuple[Any, Any]:
    X = _data(positive=True)
    X[::7, 2] = 0.0  # exact zeros take the masked path
    return AdditiveChi2Sampler().fit(X), X


# -- PolynomialCountSketch -----------------------------------------------------------------


def _sketch_shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.n_components])


def _sketch_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    m = int(model.n_components)
    n_inputs = model.indexHash_.shape[1]
    k = np.arange(m)
    angles = 2.0 * np.pi * np.outer(k, k) / m
    cos, sin = np.cos(angles), np.sin(angles)
    forward = np.hstack([cos, -sin])  # fft: real and imaginary parts side by side
    scale = np.sqrt(model.gamma)
    real = imag = None
    for d in range(model.degree):
        sketch = np.zeros((n_inputs, m))
        np.add.at(sketch, (np.arange(n_inputs), model.indexHash_[d]), model.bitHash_[d])
        spectrum = sketch @ forward  # [F(+1), 2m]
        # X_gamma = [sqrt(gamma)·X, sqrt(coef0)]: the constant column becomes a bias.
        weights = scale * spectrum[: model.n_features_in_]
        bias = np.sqrt(model.coef0) * spectrum[model.n_features_in_] if model.coef0 else None
        both = g.affine(g.input, weights.astype(g.dtype), bias)
        re_d = g.node("Slice", [both, g.int64([0]), g.int64([m]), g.int64([1])])
        im_d = g.node("Slice", [both, g.int64([m]), g.int64([2 * m]), g.int64([1])])
        if real is None or imag is None:
            real, imag = re_d, im_d
            continue
        real, imag = (
            g.node("Sub", [g.node("Mul", [real, re_d]), g.node("Mul", [imag, im_d])]),
            g.node("Add", [g.node("Mul", [real, im_d]), g.node("Mul", [imag, re_d])]),
        )
    assert real is not None and imag is not None  # degree >= 1: one sketch at least
    # Real part of the inverse fft: (Re @ cos - Im @ sin) / m.
    inverse_real = g.matmul_const(real, (cos / m).astype(g.dtype))
    inverse_imag = g.matmul_const(imag, (sin / m).astype(g.dtype))
    g.node("Sub", [inverse_real, inverse_imag], g.output())


def _sketch_example() -> tuple[Any, Any]:
    X = _data()
    return PolynomialCountSketch(n_components=64, random_state=0).fit(X), X


for _spec in (
    ConverterSpec(Nystroem, _nystroem_shape, _nystroem_convert, _nystroem_example),
    ConverterSpec(RBFSampler, _sampler_shape, _rbf_convert, _rbf_example),
    ConverterSpec(SkewedChi2Sampler, _sampler_shape, _skewed_convert, _skewed_example),
    ConverterSpec(AdditiveChi2Sampler, _additive_shape, _additive_convert, _additive_example),
    ConverterSpec(PolynomialCountSketch, _sketch_shape, _sketch_convert, _sketch_example),
):
    register_converter(_spec)
