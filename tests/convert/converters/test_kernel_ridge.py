"""KernelRidge: every named kernel converts; callable and precomputed kernels are refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_regression
from sklearn.kernel_ridge import KernelRidge

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, Y = make_regression(n_samples=60, n_features=4, n_targets=2, noise=1.0, random_state=1)
X_POS = np.abs(X)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("linear", {}),
        ("rbf", {}),
        ("rbf", {"gamma": 0.3}),
        ("poly", {"degree": 2, "coef0": 0.5}),
        ("polynomial", {}),
        ("laplacian", {}),
        ("sigmoid", {"gamma": 0.05}),
        ("cosine", {}),
        ("chi2", {"gamma": 0.5}),
        ("additive_chi2", {"alpha": 200.0}),
    ],
)
def test_kernels(assert_converts, kernel: str, params: dict, precision: str) -> None:
    data = X_POS if "chi2" in kernel else X
    model = KernelRidge(kernel=kernel, **params).fit(data, Y[:, 0] / 100)
    assert_converts(model, data, precision)


def test_multi_target(assert_converts) -> None:
    model = KernelRidge(kernel="rbf", gamma=0.2).fit(X, Y / 100)
    got = assert_converts(model, X)
    assert got["value"].shape == (60, 2)


@pytest.mark.parametrize("kernel", ["precomputed", np.dot])
def test_unconvertible_kernels_are_refused(kernel) -> None:
    data = X @ X.T if kernel == "precomputed" else X
    model = KernelRidge(kernel=kernel).fit(data, Y[:, 0])
    with pytest.raises(ConversionError, match=r"KernelRidge\(kernel=.*refit with one of them"):
        convert_estimator(model, data[:5])
