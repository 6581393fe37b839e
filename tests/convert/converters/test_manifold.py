"""Isomap and LocallyLinearEmbedding: settings beyond the common examples; refusals."""

from __future__ import annotations

import pytest
from sklearn.datasets import make_s_curve
from sklearn.manifold import Isomap, LocallyLinearEmbedding

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

X, _ = make_s_curve(n_samples=150, noise=0.05, random_state=1)
TRAIN, NEW = X[:100], X[100:]


@pytest.mark.parametrize("precision", ["float", "double"])
def test_more_neighbours(assert_converts, precision: str) -> None:
    model = Isomap(n_neighbors=8, n_components=3).fit(TRAIN)
    got = assert_converts(model, NEW, precision)
    assert got["transformed"].shape == (50, 3)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_neighbors": None, "radius": 1.0}, r"radius=1.0.*refit with n_neighbors"),
        ({"metric": "manhattan"}, r"metric='manhattan'.*euclidean metric"),
    ],
)
def test_refused_settings(params: dict, message: str) -> None:
    model = Isomap(**params).fit(TRAIN)
    with pytest.raises(ConversionError, match=message):
        convert_estimator(model, TRAIN[:5])


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("method", ["standard", "modified"])
def test_lle_methods_on_training_rows(assert_converts, method: str, precision: str) -> None:
    model = LocallyLinearEmbedding(n_neighbors=8, method=method, random_state=0).fit(TRAIN)
    # Training rows: each is its own nearest neighbour (a zero row in the local system).
    assert_converts(model, TRAIN, precision)
