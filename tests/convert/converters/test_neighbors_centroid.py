"""NearestCentroid: priors, string and binary classes, shrinkage; manhattan is refused."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import make_classification
from sklearn.neighbors import NearestCentroid

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, Y = make_classification(
    n_samples=120,
    n_features=4,
    n_informative=3,
    n_redundant=0,
    n_classes=3,
    weights=[0.6, 0.3, 0.1],
    random_state=2,
)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_empirical_priors_decide_by_discriminant(assert_converts, precision: str) -> None:
    model = NearestCentroid(priors="empirical").fit(X, Y)
    got = assert_converts(model, X, precision)
    # With unequal priors the label is the argmax of the discriminant, not the nearest centroid.
    plain = NearestCentroid().fit(X, Y).predict(X)
    assert (got["label"] != plain).any()


def test_string_binary_classes_and_shrinkage(assert_converts) -> None:
    labels = np.where(Y == 0, "no", "yes")
    model = NearestCentroid(shrink_threshold=0.2).fit(X, labels)
    got = assert_converts(model, X)
    assert got["label"].dtype == object
    assert got["probabilities"].shape == (120, 2)


def test_manhattan_is_refused() -> None:
    model = NearestCentroid(metric="manhattan").fit(X, Y)
    with pytest.raises(ConversionError, match=r"metric='manhattan'.*refit with metric='euclidean'"):
        convert_estimator(model, X[:5])


def test_zipmap_keeps_class_labels() -> None:
    labels = np.array(["a", "b", "c"])[Y]
    model = NearestCentroid().fit(X, labels)
    result = convert_estimator(model, X[:5], zipmap=True)
    assert result.zipmap
    session = ort.InferenceSession(result.model.SerializeToString())
    label, probabilities = session.run(None, {"input": X[:4].astype(np.float32)})
    np.testing.assert_array_equal(label, model.predict(X[:4]))
    assert sorted(probabilities[0]) == ["a", "b", "c"]
    np.testing.assert_allclose(
        [[row[c] for c in "abc"] for row in probabilities], model.predict_proba(X[:4]), atol=1e-5
    )
