"""Search and frozen wrappers convert as their inner estimator: classifiers without ZipMap,
regressors, transformers, onnxbridge's own converters inside; refit=False refused."""

from __future__ import annotations

import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import VotingClassifier
from sklearn.experimental import enable_halving_search_cv  # noqa: F401
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import HalvingGridSearchCV, RandomizedSearchCV
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import StandardScaler

from onnxbridge import convert_estimator
from onnxbridge.errors import ConversionError

XC, YC = make_classification(
    n_samples=120, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=4
)
XR, YR = make_regression(n_samples=120, n_features=4, random_state=4)


def test_classifier_search_has_no_zipmap(assert_converts) -> None:
    search = RandomizedSearchCV(
        LogisticRegression(), {"C": [0.1, 1.0, 10.0]}, n_iter=2, cv=3, random_state=0
    ).fit(XC, YC)
    result = convert_estimator(search, XC[:10])
    assert "ZipMap" not in {n.op_type for n in result.model.graph.node}
    assert set(result.metadata.outputs) == {"label", "probabilities"}
    assert_converts(search, XC, "float")


@pytest.mark.parametrize("precision", ["float", "double"])
def test_frozen_regressor_and_transformer(assert_converts, precision: str) -> None:
    got = assert_converts(FrozenEstimator(Ridge().fit(XR, YR)), XR, precision)
    assert "value" in got
    got = assert_converts(FrozenEstimator(StandardScaler().fit(XR)), XR, precision)
    assert got["transformed"].shape == XR.shape


def test_search_over_an_onnxbridge_converter(assert_converts) -> None:
    voting = VotingClassifier([("lr", LogisticRegression()), ("nb", GaussianNB())], voting="soft")
    search = HalvingGridSearchCV(voting, {"weights": [[1, 1], [2, 1]]}, cv=3).fit(XC, YC)
    assert_converts(search, XC, "double")


def test_search_without_refit_is_refused() -> None:
    search = RandomizedSearchCV(Ridge(), {"alpha": [0.1, 1.0]}, n_iter=2, refit=False, cv=3)
    search.fit(XR, YR)
    with pytest.raises(ConversionError, match=r"RandomizedSearchCV\(refit=False\) keeps no"):
        convert_estimator(search, XR[:5])
