"""OutputCodeClassifier: inner models scored by decision_function or predict_proba,
constant code columns, string labels; only the label role."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OutputCodeClassifier, _ConstantPredictor
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

from onnxbridge import convert_estimator

X, Y = make_classification(
    n_samples=120, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=0
)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_decision_scores_of_linear_models(assert_converts, precision: str) -> None:
    model = OutputCodeClassifier(LogisticRegression(), code_size=3.0, random_state=1).fit(X, Y)
    got = assert_converts(model, X, precision)
    assert list(got) == ["label"]


def test_probabilities_and_a_constant_code_column(assert_converts) -> None:
    model = OutputCodeClassifier(DecisionTreeClassifier(max_depth=3), code_size=1.5, random_state=0)
    model.fit(X, np.array(["red", "green", "blue"])[Y])
    assert any(isinstance(e, _ConstantPredictor) for e in model.estimators_)
    got = assert_converts(model, X, "double")
    assert set(got["label"]) <= {"red", "green", "blue"}


def test_score_only_classifier(assert_converts) -> None:
    model = OutputCodeClassifier(LinearSVC(), code_size=2.0, random_state=2).fit(X, Y)
    assert_converts(model, X, "float")


def test_boosting_decision_function(assert_converts) -> None:
    inner = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0)
    model = OutputCodeClassifier(inner, code_size=1.0, random_state=0).fit(X, Y)
    result = convert_estimator(model, X[:20])
    assert list(result.metadata.outputs) == ["label"]
    assert_converts(model, X, "double")
