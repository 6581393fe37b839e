"""Kernel approximations: other kernels and parameters than the common test's examples, and
the refused settings."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_regression
from sklearn.kernel_approximation import (
    AdditiveChi2Sampler,
    Nystroem,
    PolynomialCountSketch,
)

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, _ = make_regression(n_samples=50, n_features=4, random_state=4)
X_POS = np.abs(X)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        # Fewer components than the kernel's rank: more would only test float32 round-off on
        # the 1e6-fold normalisation scikit-learn applies to null directions.
        ("linear", {"n_components": 3}),
        ("poly", {"degree": 2, "coef0": 0.5, "gamma": 0.2, "n_components": 10}),
        ("polynomial", {"kernel_params": {"degree": 2}, "n_components": 10}),
        ("laplacian", {"gamma": 0.5}),
        ("sigmoid", {"gamma": 0.1}),
        ("cosine", {"n_components": 3}),
        ("chi2", {}),
        ("additive_chi2", {}),
    ],
)
def test_nystroem_kernels(assert_converts, kernel: str, params: dict, precision: str) -> None:
    data = X_POS if "chi2" in kernel else X
    params = {"n_components": 20, **params}
    model = Nystroem(kernel=kernel, random_state=0, **params).fit(data)
    assert_converts(model, data, precision)


def test_nystroem_callable_kernel_is_refused() -> None:
    model = Nystroem(kernel=lambda a, b: float(a @ b), n_components=5, random_state=0).fit(X)
    with pytest.raises(ConversionError, match=r"Nystroem\(kernel='<lambda>'\).*refit with one"):
        convert_estimator(model, X[:5])


@pytest.mark.parametrize("precision", ["float", "double"])
def test_count_sketch_degree_3_with_coef0(assert_converts, precision: str) -> None:
    model = PolynomialCountSketch(degree=3, coef0=1.0, gamma=0.5, n_components=40)
    assert_converts(model.set_params(random_state=1).fit(X), X, precision)


@pytest.mark.parametrize(("steps", "interval"), [(1, None), (3, None), (4, 0.3)])
def test_additive_chi2_steps(assert_converts, steps: int, interval: float | None) -> None:
    model = AdditiveChi2Sampler(sample_steps=steps, sample_interval=interval).fit(X_POS)
    got = assert_converts(model, X_POS)
    assert got["transformed"].shape == (50, 4 * (2 * steps - 1))


def test_additive_chi2_without_interval_is_refused() -> None:
    # scikit-learn checks this in fit, so only a parameter changed after fitting gets here.
    model = AdditiveChi2Sampler().fit(X_POS).set_params(sample_steps=5)
    with pytest.raises(ConversionError, match=r"sample_steps=5\) needs a sample_interval"):
        convert_estimator(model, X_POS[:5])
