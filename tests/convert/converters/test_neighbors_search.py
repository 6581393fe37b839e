"""NearestNeighbors with its defaults and other metrics: kneighbors indices and distances."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.neighbors import NearestNeighbors

from onnxbridge import convert_estimator
from onnxbridge.convert import model_task
from onnxbridge.errors import ConversionError

X, _ = make_blobs(n_samples=120, n_features=3, centers=4, random_state=1)
QUERIES = X[::3] + np.random.RandomState(0).normal(scale=0.3, size=X[::3].shape)


@pytest.mark.parametrize("precision", ["float", "double"])
def test_defaults(assert_converts, precision: str) -> None:
    model = NearestNeighbors().fit(X)
    assert (model.radius, model.n_neighbors) == (1.0, 5)  # what skl2onnx refuses
    assert model_task(model) == "neighbors"
    result = convert_estimator(model, X[:10], precision=precision)
    assert set(result.metadata.outputs) == {"indices", "distances"}
    got = assert_converts(model, QUERIES, precision)
    assert got["indices"].dtype == np.int64
    assert got["indices"].shape == (len(QUERIES), 5)


@pytest.mark.parametrize(("metric", "p"), [("minkowski", 1), ("minkowski", 3), ("chebyshev", 2)])
def test_metrics(assert_converts, metric: str, p: int) -> None:
    model = NearestNeighbors(n_neighbors=3, metric=metric, p=p).fit(X)
    assert_converts(model, QUERIES, "double")


def test_too_many_neighbours_is_refused() -> None:
    model = NearestNeighbors(n_neighbors=500).fit(X)
    with pytest.raises(ConversionError, match=r"n_neighbors=500.*use n_neighbors <="):
        convert_estimator(model, X[:5])
