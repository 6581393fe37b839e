"""Which skl2onnx options onnxbridge passes: zipmap only to converters that declare it."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectFromModel
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import TargetEncoder
from sklearn.svm import LinearSVC

from onnxbridge.convert._registry import accepts_option


class _Unknown(BaseEstimator):
    pass


def test_accepts_option() -> None:
    assert accepts_option(LogisticRegression(), "zipmap")
    assert not accepts_option(LinearSVC(), "zipmap")  # declares nocl, not zipmap
    assert not accepts_option(SelectFromModel(LogisticRegression()), "zipmap")
    # No converter at all: say yes, so the missing converter is the error reported.
    assert accepts_option(_Unknown(), "zipmap")


def test_transformer_fitted_on_classes_converts(assert_converts) -> None:
    # TargetEncoder has classes_ but no zipmap option; skl2onnx used to be asked for it.
    X = np.random.RandomState(0).randint(0, 4, (60, 2)).astype(float)
    y = (X[:, 0] > 1).astype(int)
    model = TargetEncoder().fit(X, y)
    assert hasattr(model, "classes_")
    assert_converts(model, X, "float")
