"""Sparse coding: more pursuit steps, early stops where scikit-learn stops, thresholding,
split signs; the path solvers are refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_sparse_coded_signal
from sklearn.decomposition import DictionaryLearning, SparseCoder

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

Y, ATOMS, _ = make_sparse_coded_signal(
    n_samples=60, n_components=10, n_features=15, n_nonzero_coefs=4, random_state=1
)
NOISY = Y + 0.05 * np.random.RandomState(1).normal(size=Y.shape)


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("steps", [1, 4, 6])
def test_omp_steps(assert_converts, steps: int, precision: str) -> None:
    model = SparseCoder(dictionary=ATOMS, transform_n_nonzero_coefs=steps).fit(NOISY)
    got = assert_converts(model, NOISY, precision)
    assert ((got["transformed"] != 0).sum(axis=1) <= steps).all()


def test_early_stops_follow_scikit_learn(assert_converts) -> None:
    # Exactly 4-sparse signals: the residual (nearly) vanishes after 4 atoms, so a 6-step
    # pursuit stops early on most rows (scikit-learn warns about it).
    model = SparseCoder(dictionary=ATOMS, transform_n_nonzero_coefs=6).fit(Y)
    with pytest.warns(RuntimeWarning, match="ended prematurely"):
        got = assert_converts(model, Y)
    with pytest.warns(RuntimeWarning, match="ended prematurely"):
        expected = (model.transform(Y) != 0).sum(axis=1)
    nonzero = (got["transformed"] != 0).sum(axis=1)
    np.testing.assert_array_equal(nonzero, expected)
    assert (nonzero < 6).mean() > 0.5


@pytest.mark.parametrize("positive", [False, True])
def test_threshold_and_split_sign(assert_converts, positive: bool) -> None:
    model = SparseCoder(
        dictionary=ATOMS,
        transform_algorithm="threshold",
        transform_alpha=0.3,
        positive_code=positive,
        split_sign=True,
    ).fit(NOISY)
    got = assert_converts(model, NOISY)
    assert got["transformed"].shape == (60, 20)


@pytest.mark.parametrize("algorithm", ["lasso_lars", "lasso_cd", "lars"])
def test_path_solvers_are_refused(algorithm: str) -> None:
    model = DictionaryLearning(
        n_components=5, transform_algorithm=algorithm, max_iter=20, random_state=0
    )
    model.fit(NOISY)
    with pytest.raises(ConversionError, match=rf"transform_algorithm='{algorithm}'.*omp"):
        convert_estimator(model, NOISY[:5])
