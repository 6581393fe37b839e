"""GaussianProcessClassifier: multiclass (refused by skl2onnx) and binary, the kernels a graph
writes, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process import kernels as gpk

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, Y = make_classification(
    n_samples=80, n_features=3, n_informative=3, n_redundant=0, n_classes=3, random_state=2
)
ROWS = np.vstack([X, X[:10] * 3.0])  # far rows: large predictive variance

KERNELS = {
    "rbf-anisotropic": 1.0 * gpk.RBF([1.0, 2.0, 0.5]),
    "matern-0.5": gpk.Matern(nu=0.5),
    "matern-1.5": 2.0 * gpk.Matern(nu=1.5),
    "matern-2.5": gpk.Matern(length_scale=[1.0, 1.0, 1.0], nu=2.5),
    "rational-quadratic": gpk.RationalQuadratic(),
    "dot+white": gpk.DotProduct() + gpk.WhiteKernel(),
    "power": gpk.RBF() ** 2 + gpk.ConstantKernel(0.5),
}


@pytest.mark.parametrize("precision", ["float", "double"])
def test_multiclass_one_vs_rest(assert_converts, precision: str) -> None:
    model = GaussianProcessClassifier(random_state=0).fit(X, Y)
    got = assert_converts(model, ROWS, precision)
    assert got["probabilities"].shape == (len(ROWS), 3)


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels(assert_converts, name: str) -> None:
    model = GaussianProcessClassifier(kernel=KERNELS[name], optimizer=None).fit(X, Y)
    assert_converts(model, ROWS, "double")


def test_binary_labels_follow_the_latent_sign(assert_converts) -> None:
    labels = np.where(Y == 0, "no", "yes")
    model = GaussianProcessClassifier(random_state=0).fit(X, labels)
    got = assert_converts(model, ROWS, "double")
    assert set(got["label"]) == {"no", "yes"}


def test_refused_settings() -> None:
    ovo = GaussianProcessClassifier(multi_class="one_vs_one", random_state=0).fit(X, Y)
    with pytest.raises(ConversionError, match=r"multi_class='one_vs_one'.*use multi_class="):
        convert_estimator(ovo, X[:5])
    periodic = GaussianProcessClassifier(
        kernel=gpk.ExpSineSquared() + gpk.WhiteKernel(), optimizer=None
    ).fit(X, Y)
    with pytest.raises(ConversionError, match=r"ExpSineSquared.*use kernels among RBF"):
        convert_estimator(periodic, X[:5])
