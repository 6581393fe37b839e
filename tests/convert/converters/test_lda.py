"""LatentDirichletAllocation: documents converge one by one, as in scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import LatentDirichletAllocation

RNG = np.random.RandomState(5)
COUNTS = RNG.poisson(2.0, size=(50, 15)).astype(float)
COUNTS[3] = 0.0  # an empty document


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    "params",
    [
        {"n_components": 4},
        # A loose tolerance stops documents after a few iterations, each at its own.
        {"n_components": 5, "mean_change_tol": 0.05, "doc_topic_prior": 0.5},
        {"n_components": 3, "max_doc_update_iter": 3},
    ],
)
def test_settings(assert_converts, params: dict, precision: str) -> None:
    model = LatentDirichletAllocation(random_state=0, max_iter=10, **params).fit(COUNTS)
    got = assert_converts(model, COUNTS, precision)
    np.testing.assert_allclose(got["transformed"].sum(axis=1), 1.0, rtol=1e-6)


def test_a_document_does_not_depend_on_the_batch(assert_converts) -> None:
    model = LatentDirichletAllocation(n_components=4, random_state=0, max_iter=10).fit(COUNTS)
    alone = assert_converts(model, COUNTS[:1])["transformed"]
    together = assert_converts(model, COUNTS)["transformed"][:1]
    np.testing.assert_allclose(alone, together, rtol=1e-12, atol=1e-12)
