"""Decompositions: settings the common test's examples do not reach."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA, FastICA, SparsePCA

RNG = np.random.RandomState(7)
X = np.c_[np.sin(np.linspace(0, 9, 90)), RNG.laplace(size=90)] @ RNG.normal(size=(2, 4))
# whiten=False expects data whitened beforehand.
X_WHITE = PCA(n_components=2, whiten=True).fit_transform(X)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("whiten", [False, "arbitrary-variance"])
def test_fast_ica_whitening(assert_converts, whiten, precision: str) -> None:
    data = X_WHITE if whiten is False else X
    n_components = None if whiten is False else 2
    model = FastICA(n_components=n_components, whiten=whiten, random_state=0, tol=1e-3)
    assert_converts(model.fit(data), data, precision)


def test_sparse_pca_ridge_alpha(assert_converts) -> None:
    model = SparsePCA(n_components=2, ridge_alpha=5.0, random_state=0).fit(X)
    assert_converts(model, X)
