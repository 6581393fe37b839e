"""Birch and BisectingKMeans: settings beyond the common test's examples."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import Birch, BisectingKMeans
from sklearn.datasets import make_blobs

X, _ = make_blobs(n_samples=200, centers=6, n_features=4, cluster_std=1.2, random_state=3)
TRAIN, NEW = X[:100], X[100:]


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("strategy", ["biggest_inertia", "largest_cluster"])
def test_bisecting_strategies(assert_converts, strategy: str, precision: str) -> None:
    model = BisectingKMeans(n_clusters=6, bisecting_strategy=strategy, random_state=0)
    got = assert_converts(model.fit(TRAIN), NEW, precision)
    assert len(np.unique(got["label"])) > 3


def test_bisecting_single_cluster(assert_converts) -> None:
    model = BisectingKMeans(n_clusters=1, random_state=0).fit(TRAIN)
    got = assert_converts(model, NEW)
    np.testing.assert_array_equal(got["label"], np.zeros(100, dtype=np.int64))


def test_birch_without_global_clustering(assert_converts) -> None:
    model = Birch(n_clusters=None, threshold=1.5).fit(TRAIN)
    got = assert_converts(model, NEW)
    assert got["scores"].shape == (100, len(model.subcluster_centers_))
