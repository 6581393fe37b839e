"""KernelRidge: ``predict = kernel(X, X_fit_) @ dual_coef_``.

skl2onnx has no converter. The kernel is one of scikit-learn's named kernels (``linear``, ``poly``
/ ``polynomial``, ``rbf``, ``laplacian``, ``sigmoid``, ``cosine``, ``chi2``, ``additive_chi2``) with
the model's ``gamma`` / ``degree`` / ``coef0``; a callable or ``precomputed`` kernel is refused.
The training rows are stored in the graph: ``[N, F] -> value [N, T]`` (``T = 1`` for one target);
for the linear kernel (the default) they fold into one ``[F, T]`` matrix instead.
``laplacian`` and the chi² kernels build an ``[N, M, F]`` tensor (M training rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_regression
from sklearn.kernel_ridge import KernelRidge

from onnxbridge.convert._converters._graph import KERNELS, Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _n_targets(model: Any) -> int:
    dual = np.asarray(model.dual_coef_)
    return 1 if dual.ndim == 1 else dual.shape[1]


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, _n_targets(operator.raw_operator)])


def _check_kernel(model: Any) -> str:
    kernel = model.kernel
    if callable(kernel) or kernel not in KERNELS:
        shown = getattr(kernel, "__name__", kernel)
        raise ConversionError(
            f"KernelRidge(kernel={shown!r}) cannot be converted: a graph reproduces only the "
            f"named kernels {', '.join(KERNELS)}; refit with one of them"
        )
    return kernel


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    kernel = _check_kernel(model)
    g = Graph(scope, operator, container)
    points = np.asarray(model.X_fit_, dtype=np.float64)
    dual = np.asarray(model.dual_coef_, dtype=np.float64).reshape(points.shape[0], -1)
    if kernel == "linear":
        # (x @ X_fit_.T) @ dual == x @ (X_fit_.T @ dual): one [F, T] matrix, folded in float64.
        # Same value, but float32 no longer sums M large terms of both signs.
        g.matmul_const(g.input, (points.T @ dual).astype(g.dtype), g.output())
        return
    gram = g.kernel(
        g.input,
        points,
        kernel,
        gamma=model.gamma,
        degree=model.degree,
        coef0=model.coef0,
        n_features=points.shape[1],
    )
    g.matmul_const(gram, dual.astype(g.dtype), g.output())


def _example() -> tuple[Any, Any]:
    X, y = make_regression(n_samples=80, n_features=5, noise=5.0, random_state=0)
    return KernelRidge(kernel="rbf", alpha=0.5, gamma=0.1).fit(X, y / 50.0), X


register_converter(ConverterSpec(KernelRidge, _shape, _convert, _example))
