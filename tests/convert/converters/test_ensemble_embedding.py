"""RandomTreesEmbedding: the default sparse output, dense output, and rows at the thresholds."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomTreesEmbedding

RNG = np.random.RandomState(4)
X = RNG.normal(size=(120, 3)) * [1.0, 1e3, 1e-2]


def _rows_at_thresholds(model) -> np.ndarray:
    """For every split: rows at its threshold and one float64 step either side of it."""
    rows = []
    for tree in model.estimators_:
        t = tree.tree_
        for node in np.flatnonzero(t.children_left >= 0):
            for value in np.nextafter(t.threshold[node], [-np.inf, 0.0, np.inf]):
                row = X[0].copy()
                row[t.feature[node]] = value
                rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("sparse_output", [True, False])
def test_rows_at_thresholds(assert_converts, sparse_output: bool, precision: str) -> None:
    model = RandomTreesEmbedding(
        n_estimators=5, max_depth=4, sparse_output=sparse_output, random_state=0
    ).fit(X)
    probes = _rows_at_thresholds(model)
    got = assert_converts(model, np.vstack([X, probes]), precision)
    # One leaf per tree: each row has exactly n_estimators ones.
    np.testing.assert_array_equal(got["transformed"].sum(axis=1), 5.0)
