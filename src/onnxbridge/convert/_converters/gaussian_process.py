"""GaussianProcessClassifier, binary and multiclass (one-vs-rest).

skl2onnx refuses more than two classes. Each binary Laplace model (``base_estimator_`` itself,
or every estimator of its one-vs-rest wrapper) gives, as scikit-learn's ``_BinaryGPCLaplace``:

- ``K* = k(X_train_, x)`` (``[M, N]``), ``f* = K*^T (y_train_ - pi_)``;
- ``v = L^-1 (W_sr * K*)`` (``A = L^-1 diag(W_sr)`` is precomputed), ``var = k(x, x) - sum(v**2)``;
- ``pi* = sum_i COEFS_i * sqrt(pi / a) * erf(l_i f* sqrt(a / (a + l_i**2))) / (2 sqrt(2 pi var))
  + COEFS.sum() / 2`` with ``a = 1 / (2 var)``.

Binary: ``probabilities = [1 - pi*, pi*]``, ``label = classes_[f* > 0]``. One-vs-rest:
``probabilities = pi*_c / sum_c pi*_c``, ``label = classes_[argmax]``. Everything is computed in
float64. Kernels: RBF, Matern (nu 0.5, 1.5, 2.5, inf), RationalQuadratic, DotProduct,
ConstantKernel, WhiteKernel and their sums, products and powers (``**``); ``one_vs_one`` (no
``predict_proba`` in scikit-learn) and other kernels are refused.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from onnx import TensorProto
from scipy.linalg import solve_triangular
from sklearn.datasets import make_classification
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process import kernels as gpk

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

# scikit-learn's approximation of the logistic-Gaussian integral (gaussian_process/_gpc.py).
_LAMBDAS = np.array([0.41, 0.4, 0.37, 0.44, 0.39]).reshape(1, -1)
_COEFS = np.array(
    [-1854.8214151, 3516.89893646, 221.29346712, 128.12323805, -2010.49422654]
).reshape(1, -1)
_KERNELS = (
    "RBF, Matern (nu in 0.5, 1.5, 2.5, inf), RationalQuadratic, DotProduct, ConstantKernel, "
    "WhiteKernel, and sums, products and powers of them"
)


class _Kernel:
    """Writes ``k(train, x)`` (``[N, M]``) and ``k(x, x)`` diagonal (``[N, 1]``) in float64."""

    def __init__(self, g: Nodes, x: str, owner: str) -> None:
        self.g = g
        self.x = x  # [N, F] float64
        self.owner = owner

    def _c(self, value: Any) -> str:
        return self.g.const(np.asarray(value, dtype=np.float64), dtype=np.float64)

    def _scaled_sqdist(self, kernel: Any, train: np.ndarray) -> str:
        scale = np.asarray(kernel.length_scale, dtype=np.float64).reshape(1, -1)
        xs = self.g.op("Div", [self.x, self._c(scale)])
        x3 = self.g.op("Unsqueeze", [xs, self.g.const(np.array([1]))])
        diff = self.g.op("Sub", [x3, self._c((train / scale)[np.newaxis])])
        return self.g.op("ReduceSumSquare", [diff, self.g.const(np.array([2]))], keepdims=0)

    def cross(self, kernel: Any, train: np.ndarray) -> str:
        g = self.g
        if isinstance(kernel, gpk.Sum):
            return g.op("Add", [self.cross(kernel.k1, train), self.cross(kernel.k2, train)])
        if isinstance(kernel, gpk.Product):
            return g.op("Mul", [self.cross(kernel.k1, train), self.cross(kernel.k2, train)])
        if isinstance(kernel, gpk.Exponentiation):
            return g.op("Pow", [self.cross(kernel.kernel, train), self._c(kernel.exponent)])
        if isinstance(kernel, gpk.ConstantKernel):
            ones = g.op("MatMul", [self.x, self._c(np.zeros((train.shape[1], len(train))))])
            return g.op("Add", [ones, self._c(kernel.constant_value)])
        if isinstance(kernel, gpk.WhiteKernel):
            # k(X, Y) with Y given is 0 (scikit-learn does not compare the points).
            return g.op("MatMul", [self.x, self._c(np.zeros((train.shape[1], len(train))))])
        if isinstance(kernel, gpk.DotProduct):
            dot = g.op("MatMul", [self.x, self._c(train.T)])
            return g.op("Add", [dot, self._c(kernel.sigma_0**2)])
        if isinstance(kernel, gpk.RationalQuadratic):
            scale = float(kernel.length_scale)
            alpha = float(kernel.alpha)
            x3 = g.op("Unsqueeze", [self.x, g.const(np.array([1]))])
            diff = g.op("Sub", [x3, self._c(train[np.newaxis])])
            sq = g.op("ReduceSumSquare", [diff, g.const(np.array([2]))], keepdims=0)
            base = g.op("Add", [g.op("Mul", [sq, self._c(1 / (2 * alpha * scale**2))]), self._c(1)])
            return g.op("Pow", [base, self._c(-alpha)])
        if isinstance(kernel, gpk.Matern):
            sq = self._scaled_sqdist(kernel, train)
            nu = kernel.nu
            if nu == np.inf:
                return g.op("Exp", [g.op("Mul", [sq, self._c(-0.5)])])
            dist = g.op("Sqrt", [sq])
            if nu == 0.5:
                return g.op("Exp", [g.op("Neg", [dist])])
            if nu == 1.5:
                k = g.op("Mul", [dist, self._c(math.sqrt(3))])
                return g.op("Mul", [g.op("Add", [k, self._c(1)]), g.op("Exp", [g.op("Neg", [k])])])
            if nu == 2.5:
                k = g.op("Mul", [dist, self._c(math.sqrt(5))])
                poly = g.op(
                    "Add",
                    [
                        g.op("Add", [k, self._c(1)]),
                        g.op("Mul", [g.op("Mul", [k, k]), self._c(1 / 3)]),
                    ],
                )
                return g.op("Mul", [poly, g.op("Exp", [g.op("Neg", [k])])])
            raise self._refuse(kernel)
        if isinstance(kernel, gpk.RBF):
            sq = self._scaled_sqdist(kernel, train)
            return g.op("Exp", [g.op("Mul", [sq, self._c(-0.5)])])
        raise self._refuse(kernel)

    def diag(self, kernel: Any) -> str:
        g = self.g
        if isinstance(kernel, gpk.Sum):
            return g.op("Add", [self.diag(kernel.k1), self.diag(kernel.k2)])
        if isinstance(kernel, gpk.Product):
            return g.op("Mul", [self.diag(kernel.k1), self.diag(kernel.k2)])
        if isinstance(kernel, gpk.Exponentiation):
            return g.op("Pow", [self.diag(kernel.kernel), self._c(kernel.exponent)])
        column = g.op(
            "ReduceSum",
            [g.op("Mul", [self.x, self._c(0.0)]), g.const(np.array([1]))],
            keepdims=1,
        )  # [N, 1] zeros
        if isinstance(kernel, gpk.ConstantKernel):
            return g.op("Add", [column, self._c(kernel.constant_value)])
        if isinstance(kernel, gpk.WhiteKernel):
            return g.op("Add", [column, self._c(kernel.noise_level)])
        if isinstance(kernel, gpk.DotProduct):
            sq = g.op("ReduceSumSquare", [self.x, g.const(np.array([1]))], keepdims=1)
            return g.op("Add", [sq, self._c(kernel.sigma_0**2)])
        if isinstance(kernel, gpk.Matern) and kernel.nu not in (0.5, 1.5, 2.5, np.inf):
            raise self._refuse(kernel)
        if isinstance(kernel, gpk.RBF | gpk.RationalQuadratic):  # Matern subclasses RBF
            return g.op("Add", [column, self._c(1.0)])
        raise self._refuse(kernel)

    def _refuse(self, kernel: Any) -> ConversionError:
        return ConversionError(
            f"{self.owner}(kernel={kernel!r}) cannot be converted; use kernels among {_KERNELS}"
        )


def _binary_parts(g: Nodes, k: _Kernel, binary: Any) -> tuple[str, str]:
    """``f*`` and ``pi*`` (both ``[N, 1]``) of one ``_BinaryGPCLaplace``."""
    train = np.asarray(binary.X_train_, dtype=np.float64)
    cross = k.cross(binary.kernel_, train)  # [N, M] = K*^T
    f_star = g.op("MatMul", [cross, k._c((binary.y_train_ - binary.pi_).reshape(-1, 1))])
    # v^T = K*^T (L^-1 diag(W_sr))^T
    a = solve_triangular(binary.L_, np.diag(binary.W_sr_), lower=True)
    v_t = g.op("MatMul", [cross, k._c(a.T)])
    var = g.op(
        "Sub",
        [
            k.diag(binary.kernel_),
            g.op("ReduceSumSquare", [v_t, g.const(np.array([1]))], keepdims=1),
        ],
    )
    alpha = g.op("Div", [k._c(0.5), var])  # 1 / (2 var)
    gamma = g.op("Mul", [f_star, k._c(_LAMBDAS)])  # [N, 5]
    ratio = g.op("Sqrt", [g.op("Div", [alpha, g.op("Add", [alpha, k._c(_LAMBDAS**2)])])])
    erf = g.erf64(g.op("Mul", [gamma, ratio]))
    front = g.op("Sqrt", [g.op("Div", [k._c(math.pi), alpha])])
    denominator = g.op("Mul", [g.op("Sqrt", [g.op("Mul", [var, k._c(2 * math.pi)])]), k._c(2.0)])
    integrals = g.op("Div", [g.op("Mul", [front, erf]), denominator])
    weighted = g.op("Mul", [integrals, k._c(_COEFS)])
    pi_star = g.op(
        "Add",
        [
            g.op("ReduceSum", [weighted, g.const(np.array([1]))], keepdims=1),
            k._c(0.5 * _COEFS.sum()),
        ],
    )
    return f_star, pi_star


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, len(model.classes_)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    classes = np.asarray(model.classes_)
    if len(classes) > 2 and model.multi_class == "one_vs_one":
        raise ConversionError(
            "GaussianProcessClassifier(multi_class='one_vs_one') cannot be converted (scikit-learn "
            "gives it no predict_proba); use multi_class='one_vs_rest' (the default)"
        )
    g = Nodes(scope, operator, container)
    x = g.op("Cast", [operator.inputs[0].full_name], to=TensorProto.DOUBLE)
    k = _Kernel(g, x, "GaussianProcessClassifier")
    if len(classes) == 2:
        f_star, pi_star = _binary_parts(g, k, model.base_estimator_)
        proba = g.op("Concat", [g.op("Sub", [k._c(1.0), pi_star]), pi_star], axis=1)
        positive = g.op("Greater", [f_star, k._c(0.0)])
        index = g.op(
            "Cast", [g.op("Squeeze", [positive, g.const(np.array([1]))])], to=TensorProto.INT64
        )
    else:
        columns = [_binary_parts(g, k, e)[1] for e in model.base_estimator_.estimators_]
        stacked = g.op("Concat", columns, axis=1)
        total = g.op("ReduceSum", [stacked, g.const(np.array([1]))], keepdims=1)
        proba = g.op("Div", [stacked, total])
        index = g.argmax(stacked)
    g.op("Cast", [proba], output=operator.outputs[1].full_name, to=g.onnx_float)
    g.labels(classes, index, output=operator.outputs[0].full_name)


def _example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=90, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    return GaussianProcessClassifier(random_state=0).fit(X, y), X


register_converter(
    ConverterSpec(
        GaussianProcessClassifier,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses more than two classes (one-vs-rest Laplace models)",
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
