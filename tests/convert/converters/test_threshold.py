"""TunedThresholdClassifierCV honours best_threshold_; FixedThresholdClassifier with decision
scores, string labels and a positive label that is classes_[0]."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV
from sklearn.svm import LinearSVC

X, Y = make_classification(
    n_samples=400, n_features=6, n_informative=4, weights=[0.85, 0.15], random_state=3
)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_tuned_threshold_is_honoured(assert_converts, precision: str) -> None:
    model = TunedThresholdClassifierCV(
        LogisticRegression(), scoring="balanced_accuracy", random_state=0
    ).fit(X, Y)
    got = assert_converts(model, X, precision)
    # The case skl2onnx gets wrong: the tuned labels are not the inner estimator's.
    inner = model.estimator_.predict(X)
    assert (got["label"] != inner).sum() > 10
    np.testing.assert_array_equal(got["label"], model.predict(X))


def test_decision_scores_and_first_class_as_positive(assert_converts) -> None:
    labels = np.array(["spam", "ham"])[Y]  # classes_ = ["ham", "spam"]
    model = FixedThresholdClassifier(LinearSVC(), threshold=0.5, pos_label="ham").fit(X, labels)
    # skl2onnx converts LinearSVC in float32 only.
    got = assert_converts(model, X, "float")
    assert set(got["label"]) == {"ham", "spam"}


def test_fixed_auto_threshold_on_probabilities(assert_converts) -> None:
    model = FixedThresholdClassifier(LogisticRegression(), pos_label=0).fit(X, Y)
    got = assert_converts(model, X, "float")
    assert got["probabilities"].shape == (len(X), 2)
