"""The same fitted model converts to the same bytes on every run."""

from __future__ import annotations

from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from onnxbridge import convert_estimator


def test_converting_twice_gives_the_same_bytes() -> None:
    X, y = load_iris(return_X_y=True, as_frame=True)
    for model in (
        RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y),
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(X, y),
    ):
        first = convert_estimator(model, X.head(50)).model
        second = convert_estimator(model, X.head(50)).model
        assert first.SerializeToString() == second.SerializeToString()
        assert first.graph.name == type(model).__name__
