"""KBinsDiscretizer: every encode and strategy, values exactly on an edge, float32 data."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.preprocessing import KBinsDiscretizer

RNG = np.random.RandomState(4)
X = np.column_stack([RNG.normal(size=200), RNG.exponential(size=200), RNG.randint(0, 9, 200)])


@pytest.mark.parametrize("strategy", ["uniform", "quantile", "kmeans"])
@pytest.mark.parametrize("encode", ["onehot", "onehot-dense", "ordinal"])
def test_encodes_and_strategies(assert_converts, encode: str, strategy: str) -> None:
    model = KBinsDiscretizer(
        n_bins=[4, 6, 3], encode=encode, strategy=strategy, quantile_method="linear"
    ).fit(X)
    got = assert_converts(model, X, "double")
    width = int(model.n_bins_.sum()) if "onehot" in encode else 3
    assert got["transformed"].shape == (len(X), width)


def test_values_on_an_edge_go_to_the_upper_bin(assert_converts) -> None:
    model = KBinsDiscretizer(n_bins=4, strategy="uniform", encode="ordinal").fit(X)
    edges = np.column_stack([e[1:-1] for e in model.bin_edges_])
    got = assert_converts(model, edges, "double")
    np.testing.assert_array_equal(got["transformed"], [[1, 1, 1], [2, 2, 2], [3, 3, 3]])


def test_float32_data_bins_as_scikit_learn(assert_converts) -> None:
    data = X.astype(np.float32)
    model = KBinsDiscretizer(n_bins=5, quantile_method="averaged_inverted_cdf").fit(data)
    assert_converts(model, data, "float")
