"""What each output of a converted model is, and what scikit-learn computes for it.

A converted model's outputs have *roles*, recorded in its metadata (role → graph output name):

=================  ==========================================  ===============================
role               holds                                       scikit-learn's side
=================  ==========================================  ===============================
``label``          ``[N]`` predicted class / cluster / inlier   ``predict``
``probabilities``  ``[N, C]`` class (or component) probability  ``predict_proba``
``scores``         ``[N, C]`` decision scores or distances      ``decision_function``, else
                                                                ``transform`` (KMeans distances)
``value``          ``[N]`` or ``[N, T]`` regression output      ``predict``
``transformed``    ``[N, K]`` a transformer's output            ``transform``
``indices``        ``[N, k]`` int64 nearest training rows       ``kneighbors()[1]``
``distances``      ``[N, k]`` their distances, ascending        ``kneighbors()[0]``
=================  ==========================================  ===============================

Tasks: ``classification``, ``regression``, ``cluster`` (clusterers and mixtures that predict),
``outlier`` (outlier detectors), ``transform`` (everything else that has ``transform``) and
``neighbors`` (NearestNeighbors: only ``kneighbors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from onnxbridge.errors import ConversionError

__all__ = [
    "ROLE_ORDER",
    "TASKS",
    "expected_outputs",
    "model_task",
    "output_roles",
    "reference_method",
    "source_rows",
]

TASKS = ("classification", "regression", "cluster", "outlier", "transform", "neighbors")
ROLE_ORDER = (
    "label",
    "probabilities",
    "scores",
    "value",
    "transformed",
    "indices",
    "distances",
)


def _final_step(estimator: Any) -> Any:
    while hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    return estimator


def model_task(estimator: Any) -> str:
    """The task of a fitted estimator or pipeline (one of :data:`TASKS`).

    Raises:
        ConversionError: an estimator that neither predicts nor transforms.
    """
    from sklearn.base import is_classifier, is_clusterer, is_outlier_detector, is_regressor
    from sklearn.feature_selection import SelectorMixin

    # RFE / RFECV pass their inner estimator's kind up, but convert as a column selector.
    if isinstance(_final_step(estimator), SelectorMixin):
        return "transform"
    if is_classifier(estimator):
        return "classification"
    if is_regressor(estimator):
        return "regression"
    if is_outlier_detector(estimator):
        return "outlier"
    final = _final_step(estimator)
    # Clusterers that only label their training rows (fit_predict) have nothing to convert.
    if hasattr(final, "predict") and (is_clusterer(estimator) or hasattr(final, "predict_proba")):
        return "cluster"
    if hasattr(estimator, "transform"):
        return "transform"
    if hasattr(final, "kneighbors"):
        return "neighbors"
    raise ConversionError(
        f"{type(estimator).__name__} has neither predict nor transform; there is nothing to "
        "convert (pass a fitted classifier, regressor, clusterer, outlier detector or transformer)"
    )


def output_roles(output_names: list[str], estimator: Any, task: str) -> dict[str, str]:
    """Role → graph output name, from the graph's outputs in order.

    Predicting models put the label first, then probabilities (when the estimator has
    ``predict_proba``) or scores; regressors and transformers have one output. A classifier
    with only ``predict`` (OutputCodeClassifier) has only the label role, and so has a clusterer
    with neither ``transform`` nor ``decision_function`` (MeanShift, AffinityPropagation):
    scikit-learn gives nothing to compare scores with.

    Raises:
        ConversionError: the graph has fewer outputs than the task needs.
    """
    if task in ("regression", "transform"):
        if not output_names:
            raise ConversionError("the converted graph has no outputs")
        return {"value" if task == "regression" else "transformed": output_names[0]}
    if task == "neighbors":
        # skl2onnx's parser declares NearestNeighbors' outputs as (indices, distances).
        if len(output_names) < 2:
            raise ConversionError(
                f"the neighbors graph has outputs {output_names}; expected indices and distances"
            )
        return {"indices": output_names[0], "distances": output_names[1]}
    final = _final_step(estimator)
    if task == "cluster" and len(output_names) == 1:
        return {"label": output_names[0]}
    if (
        task == "classification"
        and output_names
        and not any(hasattr(final, m) for m in ("predict_proba", "decision_function", "transform"))
    ):
        # Label-only classifiers (OutputCodeClassifier): a second output, if any, has no
        # scikit-learn method to be compared with.
        return {"label": output_names[0]}
    if len(output_names) < 2:
        raise ConversionError(
            f"the {task} graph has outputs {output_names}; expected a label and scores"
        )
    # Without predict_proba (SVC(), RidgeClassifier, KMeans, IsolationForest, ...) the second
    # output holds decision scores (or distances), not probabilities.
    second = "probabilities" if hasattr(final, "predict_proba") else "scores"
    return {"label": output_names[0], second: output_names[1]}


def reference_method(estimator: Any, role: str) -> str:
    """The scikit-learn method whose result an output role is compared with."""
    if role in ("label", "value"):
        return "predict"
    if role == "probabilities":
        return "predict_proba"
    if role == "transformed":
        return "transform"
    if role == "scores":
        return "decision_function" if hasattr(estimator, "decision_function") else "transform"
    if role in ("indices", "distances"):
        return "kneighbors"
    raise ConversionError(f"unknown output role {role!r}; expected one of {', '.join(ROLE_ORDER)}")


def _dense(values: Any) -> np.ndarray:
    if hasattr(values, "toarray"):  # scipy.sparse (OneHotEncoder, vectorizers, ...)
        values = values.toarray()
    return np.asarray(values)


def _align(expected: np.ndarray, like: np.ndarray | None) -> np.ndarray:
    """Lay scikit-learn's array out like the ONNX output where the convention is known.

    A binary ``decision_function`` is ``[N]`` (the positive class's score); converters write it
    as ``[N, 1]`` or as ``[N, 2] = [-d, d]``. A few transformers (SparsePCA) return one row as
    ``[K]`` instead of ``[1, K]``.
    """
    if like is None or expected.shape == np.shape(like):
        return expected
    like_shape = np.shape(like)
    if expected.ndim == 1 and like_shape == (1, expected.size):
        return expected.reshape(1, -1)
    if expected.ndim == 1 and len(like_shape) == 2:
        if like_shape[1] == 1:
            return expected.reshape(-1, 1)
        if like_shape[1] == 2 and expected.dtype.kind == "f":
            return np.column_stack([-expected, expected])
    if expected.ndim == 2 and expected.shape[1] == 1 and len(like_shape) == 1:
        return expected.reshape(-1)
    return expected


def source_rows(estimator: Any, X: Any) -> Any:
    """``X`` as the source model takes it: a numeric category column back as numbers.

    onnxbridge carries a category column as text (``str(value)``, see
    :func:`onnxbridge.data.normalize_features`). A HistGradientBoosting model fitted on a
    pandas ``category`` column of numbers knows its categories as numbers and would read the
    text ``"3"`` as an unseen category, so such a column goes back to numbers (a text that is
    no number becomes missing, which the model routes as it routes an unseen category).
    Other models and columns are returned as they are.
    """
    preprocessor = getattr(estimator, "_preprocessor", None)
    categorical = getattr(estimator, "is_categorical_", None)
    if preprocessor is None or categorical is None or not isinstance(X, pd.DataFrame):
        return X
    encoder = preprocessor.named_transformers_.get("encoder")
    columns = np.flatnonzero(np.asarray(categorical, dtype=bool))
    if encoder is None or len(columns) != len(encoder.categories_) or X.shape[1] <= max(columns):
        return X
    changed = X
    for column, known in zip(columns, encoder.categories_, strict=True):
        values = X.iloc[:, column]
        if np.asarray(known).dtype.kind in "fiu" and values.dtype == object:
            if changed is X:
                changed = X.copy()
            changed.isetitem(int(column), pd.to_numeric(values, errors="coerce"))
    return changed


def expected_outputs(
    estimator: Any,
    X: Any,
    roles: dict[str, str] | list[str],
    *,
    like: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """scikit-learn's result for every output role, laid out like the ONNX outputs.

    Args:
        estimator: the fitted source model.
        X: ``[N, F]`` rows as the source model takes them.
        roles: the roles to compute (a role → output name mapping, or a list of roles).
        like: ONNX results by role; where given, scikit-learn's arrays are shaped like them
            (binary scores ``[N]`` → ``[N, 1]`` or ``[N, 2]``).

    Returns:
        role → array (dense; sparse transformer output is densified).
    """
    results: dict[str, np.ndarray] = {}
    X = source_rows(estimator, X)
    for role in roles:
        method = getattr(estimator, reference_method(estimator, role))
        value = method(X)
        if role in ("indices", "distances"):
            value = value[0 if role == "distances" else 1]
        value = _dense(value)
        results[role] = _align(value, None if like is None else like.get(role))
    return results
