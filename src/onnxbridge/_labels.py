"""LabelEncodedClassifier: fit a classifier on labels ``0 … K-1``, answer in the data's labels.

A module of its own so that importing :mod:`onnxbridge.train` does not import scikit-learn
(it is reached as ``onnxbridge.train.LabelEncodedClassifier``). A ``.skops`` file names the class
``onnxbridge._labels.LabelEncodedClassifier``, which is on the reviewed trust list.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin

__all__ = ["LabelEncodedClassifier"]


class LabelEncodedClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A classifier fitted on labels encoded as ``0 … K-1`` that answers in the original labels.

    For libraries that take only some label types: XGBoost wants the integers ``0 … K-1``, and
    CatBoost's ONNX export carries integer and string labels only. ``train`` wraps such a model
    when the target needs it; wrap one yourself to fit XGBoost on text labels::

        LabelEncodedClassifier(XGBClassifier()).fit(X, ["yes", "no", ...]).predict(X)

    Its converter reuses the inner model's graph and maps the label index to ``classes_``.

    Args:
        estimator: the classifier to fit on the encoded labels (cloned by ``fit``).

    Attributes:
        estimator_: the fitted inner classifier (its classes are ``0 … K-1``).
        classes_: the original labels, sorted; column ``k`` of ``predict_proba`` is ``classes_[k]``.
    """

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator

    def fit(self, X: Any, y: Any, **fit_params: Any) -> LabelEncodedClassifier:
        """Fit a clone of ``estimator`` on ``y`` encoded as ``0 … K-1``.

        Raises:
            ValueError: ``y`` is not a classification target (scikit-learn's check).
        """
        from sklearn.base import clone
        from sklearn.preprocessing import LabelEncoder
        from sklearn.utils.multiclass import check_classification_targets

        labels = np.asarray(y).reshape(-1) if not isinstance(y, pd.Series) else y.to_numpy()
        check_classification_targets(labels)
        encoder = LabelEncoder().fit(labels)
        self.classes_ = encoder.classes_
        self.estimator_ = clone(self.estimator).fit(X, encoder.transform(labels), **fit_params)
        self.n_features_in_ = self.estimator_.n_features_in_
        names = getattr(self.estimator_, "feature_names_in_", None)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """``[N, F] -> [N]`` the inner model's prediction, in the original labels."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        index = np.asarray(self.estimator_.predict(X)).reshape(-1).astype(np.intp)
        return self.classes_[index]

    def predict_proba(self, X: Any) -> np.ndarray:
        """``[N, F] -> [N, K]``, the inner model's probabilities (column order: ``classes_``)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        return self.estimator_.predict_proba(X)
