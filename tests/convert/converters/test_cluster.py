"""Clusterers (and FeatureAgglomeration): settings beyond the common test's examples."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import (
    AffinityPropagation,
    Birch,
    BisectingKMeans,
    FeatureAgglomeration,
    MeanShift,
)
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

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


def test_feature_agglomeration_is_a_transformer(assert_converts) -> None:
    model = FeatureAgglomeration(n_clusters=2).fit(TRAIN)
    result = convert_estimator(model, TRAIN[:5])
    assert result.metadata.task == "transform"
    assert list(result.metadata.outputs) == ["transformed"]
    assert_converts(model, NEW)


def test_feature_agglomeration_other_pooling_is_refused() -> None:
    model = FeatureAgglomeration(n_clusters=2, pooling_func=np.max).fit(TRAIN)
    with pytest.raises(ConversionError, match=r"pooling_func=max\).*pooling_func=np.mean"):
        convert_estimator(model, TRAIN[:5])


@pytest.mark.parametrize(
    "estimator", [MeanShift(bandwidth=3.0), AffinityPropagation(random_state=0)]
)
def test_label_only_clusterers(assert_converts, estimator) -> None:
    model = estimator.fit(TRAIN)
    result = convert_estimator(model, TRAIN[:5])
    assert result.metadata.task == "cluster"
    assert list(result.metadata.outputs) == ["label"]
    got = assert_converts(model, NEW)
    assert got["label"].dtype == np.int64


def test_affinity_precomputed_is_refused() -> None:
    similarity = -((TRAIN[:, None, :] - TRAIN[None, :, :]) ** 2).sum(axis=2)
    model = AffinityPropagation(affinity="precomputed", random_state=0).fit(similarity)
    with pytest.raises(ConversionError, match=r"affinity='precomputed'.*affinity='euclidean'"):
        convert_estimator(model, similarity[:5])


def test_affinity_without_centres_is_refused() -> None:
    model = AffinityPropagation(random_state=0).fit(TRAIN)
    # What fit leaves when no exemplar emerged (scikit-learn then predicts -1 with a warning).
    model.cluster_centers_ = np.empty((0, TRAIN.shape[1]))
    with pytest.warns(ConvergenceWarning, match="does not have any cluster centers"):
        assert (model.predict(NEW) == -1).all()
    with pytest.raises(ConversionError, match=r"did not converge.*larger max_iter"):
        convert_estimator(model, TRAIN[:5])
