"""RadiusNeighborsTransformer: the dense radius-neighbours graph, both modes, rows with no
neighbour, duplicated training rows (neighbours at distance 0)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.neighbors import RadiusNeighborsTransformer

from onnxbridge import ConversionError, Predictor, convert_estimator

X, _ = make_classification(n_samples=120, n_features=4, n_redundant=0, random_state=3)
FIT = np.vstack([X[:80], X[:10]])  # duplicated training rows
ROWS = np.vstack([X[80:], X[:5], np.full((1, 4), 50.0)])  # training rows again; a far row


@pytest.mark.parametrize("mode", ["distance", "connectivity"])
@pytest.mark.parametrize("metric", ["euclidean", "manhattan"])
def test_dense_graph_equals_scikit_learn(assert_converts, mode: str, metric: str) -> None:
    model = RadiusNeighborsTransformer(radius=1.8, mode=mode, metric=metric).fit(FIT)
    got = assert_converts(model, ROWS, "double")
    expected = model.transform(ROWS).toarray()
    assert got["transformed"].shape == (len(ROWS), len(FIT))
    assert (got["transformed"][-1] == 0).all()  # no training point within the radius
    assert (expected > 0).sum() > len(ROWS)  # rows do have neighbours


def test_float_input_through_predictor() -> None:
    model = RadiusNeighborsTransformer(radius=1.8).fit(FIT)
    result = convert_estimator(model, FIT[:20], precision="float")
    transformed = Predictor(result.model.SerializeToString()).predict(ROWS).transformed
    np.testing.assert_allclose(transformed, model.transform(ROWS).toarray(), atol=1e-5, rtol=1e-5)


def test_other_metrics_are_refused() -> None:
    model = RadiusNeighborsTransformer(metric="cosine").fit(FIT)
    with pytest.raises(ConversionError, match=r"metric='cosine'.*use metric in"):
        convert_estimator(model, FIT[:5])
