"""SelfTrainingClassifier with a pipeline inside; LabelPropagation and
LabelSpreading with both kernels; callable kernels refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.semi_supervised import LabelPropagation, LabelSpreading, SelfTrainingClassifier

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, Y = make_classification(
    n_samples=160, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=11
)
PARTIAL = np.where(np.random.RandomState(1).rand(len(Y)) < 0.6, -1, Y)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_self_training_with_a_pipeline(assert_converts, precision: str) -> None:
    inner = make_pipeline(StandardScaler(), LogisticRegression())
    model = SelfTrainingClassifier(inner, threshold=0.6).fit(X, PARTIAL)
    assert_converts(model, X, precision)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("estimator", [LabelPropagation, LabelSpreading])
@pytest.mark.parametrize("kernel", ["rbf", "knn"])
def test_label_propagation_kernels(assert_converts, estimator, kernel: str, precision) -> None:
    model = estimator(kernel=kernel, gamma=0.5, n_neighbors=5, max_iter=2000).fit(X, PARTIAL)
    got = assert_converts(model, X + 0.05, precision)
    assert got["probabilities"].shape == (len(X), 3)


def test_callable_kernel_is_refused() -> None:
    def kernel(a, b):
        return np.exp(-np.square(a[:, None, :] - b[None]).sum(axis=2))

    model = LabelSpreading(kernel=kernel).fit(X, PARTIAL)
    with pytest.raises(ConversionError, match="callable kernel has no ONNX equivalent; use"):
        convert_estimator(model, X[:5])
