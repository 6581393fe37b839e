"""NMF / MiniBatchNMF: regularisation, early stops at the same iteration as scikit-learn, the
refused settings."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import NMF, MiniBatchNMF

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

RNG = np.random.RandomState(2)
X = np.abs(RNG.normal(size=(50, 5))) + RNG.rand(50, 1)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    "params",
    [
        {"alpha_W": 0.01, "l1_ratio": 0.5},
        {"alpha_W": 0.02, "l1_ratio": 0.0},
        # A loose tol stops the transform after a few iterations, far from convergence: the
        # graph must stop at the same one.
        {"tol": 5e-2},
    ],
)
def test_nmf_settings(assert_converts, params: dict, precision: str) -> None:
    model = NMF(n_components=2, init="nndsvda", max_iter=1000, random_state=0, **params)
    assert_converts(model.fit(X), X, precision)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize(
    "params",
    [{"alpha_W": 0.01, "l1_ratio": 0.5}, {"tol": 1e-2}, {"tol": 0.0, "transform_max_iter": 30}],
)
def test_minibatch_nmf_settings(assert_converts, params: dict, precision: str) -> None:
    model = MiniBatchNMF(n_components=2, max_iter=1000, random_state=0, **params).fit(X)
    assert_converts(model, X, precision)


def test_early_stop_depends_on_the_batch(assert_converts) -> None:
    model = NMF(n_components=2, init="nndsvda", tol=5e-2, random_state=0).fit(X)
    alone = assert_converts(model, X[:1])["transformed"]
    together = assert_converts(model, X)["transformed"][:1]
    # scikit-learn's own answer for a row depends on the batch; the graph's follows it.
    assert np.abs(alone - together).max() > 1e-3


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (NMF(n_components=2, solver="mu", max_iter=2000), r"solver='mu'.*solver='cd'"),
        (NMF(n_components=2, shuffle=True, random_state=0), r"shuffle=True.*shuffle=False"),
        (
            MiniBatchNMF(n_components=2, beta_loss="kullback-leibler", max_iter=1000),
            r"beta_loss='kullback-leibler'.*'frobenius'",
        ),
    ],
)
def test_refused_settings(model, message: str) -> None:
    model.fit(X)
    with pytest.raises(ConversionError, match=message):
        convert_estimator(model, X[:5])
