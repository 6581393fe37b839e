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

A multi-output classifier (MultiOutputClassifier, ClassifierChain) has, per target ``t`` in
target order, ``label_<t>`` ``[N]`` (``predict()[:, t]``) and ``probabilities_<t>`` ``[N, C_t]``
(``predict_proba()[t]``, or ``[1 - p, p]`` from the chain's positive-class column ``p``).

Tasks: ``classification``, ``regression``, ``cluster`` (clusterers and mixtures that predict),
``outlier`` (outlier detectors), ``transform`` (everything else that has ``transform``) and
``neighbors`` (NearestNeighbors: only ``kneighbors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxbridge._meta import role_parts, target_role
from onnxbridge.errors import ConversionError

__all__ = [
    "ROLE_ORDER",
    "TASKS",
    "expected_outputs",
    "model_task",
    "output_roles",
    "reference_method",
    "same_labels",
    "target_classes",
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


def target_classes(estimator: Any) -> list[np.ndarray] | None:
    """One class array per target for a fitted multi-output classifier (or a pipeline ending
    in one), else None."""
    classes = getattr(_final_step(estimator), "classes_", None)
    if isinstance(classes, list) and classes and np.ndim(classes[0]) > 0:
        return [np.asarray(c) for c in classes]
    return None


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
    per_target = target_classes(estimator)
    if task == "classification" and per_target is not None:
        return _target_roles(output_names, final, len(per_target))
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


def _target_roles(output_names: list[str], final: Any, n_targets: int) -> dict[str, str]:
    """``label_<t>`` (and ``probabilities_<t>``) per target, as the multi-output converters
    lay the outputs out: label then probabilities, target after target."""
    bases = ("label", "probabilities") if hasattr(final, "predict_proba") else ("label",)
    if len(output_names) != len(bases) * n_targets:
        raise ConversionError(
            f"the multi-output graph has outputs {output_names}; expected "
            f"{' and '.join(bases)} for each of {n_targets} targets"
        )
    names = iter(output_names)
    return {target_role(base, t): next(names) for t in range(n_targets) for base in bases}


def reference_method(estimator: Any, role: str) -> str:
    """The scikit-learn method whose result an output role is compared with."""
    role, _ = role_parts(role)
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


def _align(expected: np.ndarray, like: np.ndarray | None, estimator: Any = None) -> np.ndarray:
    """Lay scikit-learn's array out like the ONNX output where the convention is known.

    A binary ``decision_function`` is ``[N]`` (the positive class's score); converters write it
    as ``[N, 1]`` or as ``[N, 2]``, column ``c`` holding class ``c``'s score: ``[-d, d]``, or for
    OneVsOneClassifier ``[1 - d, d]`` (its two classes' votes plus confidences, which sum to 1;
    scikit-learn returns the second). A few transformers (SparsePCA) return one row as ``[K]``
    instead of ``[1, K]``.
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
            from sklearn.multiclass import OneVsOneClassifier

            if isinstance(_final_step(estimator), OneVsOneClassifier):
                return np.column_stack([1.0 - expected, expected])
            return np.column_stack([-expected, expected])
    if expected.ndim == 2 and expected.shape[1] == 1 and len(like_shape) == 1:
        return expected.reshape(-1)
    return expected


def same_labels(expected: Any, actual: Any) -> np.ndarray:
    """Element-wise: is each ONNX label the source model's? The one rule for comparing labels.

    Numbers and booleans compare as numbers (a graph writes boolean and integral float classes
    as int64: ``1`` is ``True`` and ``1.0``), anything else as text.
    """
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.dtype.kind in "iub" and actual.dtype.kind in "iub":
        return expected.astype(np.int64) == actual.astype(np.int64)
    if expected.dtype.kind in "iufb" and actual.dtype.kind in "iufb":
        return expected.astype(np.float64) == actual.astype(np.float64)
    return expected.astype(str) == actual.astype(str)


def _one_thread_if_it_matters(estimator: Any) -> Any:
    """One thread for a brute-force neighbours search, else nothing.

    scikit-learn's brute search splits the training rows among its threads when a call has few
    query rows, and which of several equally distant rows it keeps then depends on the thread
    count. Its one-thread answer keeps them in training order, the rule the ONNX graph
    reproduces (``converters/_kneighbors.py``), so that is the answer compared.
    """
    import contextlib

    final = estimator
    while hasattr(final, "steps"):
        final = final.steps[-1][1]
    if getattr(final, "_fit_method", None) != "brute":
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


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
    from onnxbridge.train import source_frame

    X = _documents(estimator, source_frame(estimator, X))
    results: dict[str, np.ndarray] = {}
    computed: dict[str, Any] = {}  # one call per method: every target reads the same result
    for role in roles:
        name = reference_method(estimator, role)
        if name not in computed:
            with _one_thread_if_it_matters(estimator):
                computed[name] = getattr(estimator, name)(X)
        value = computed[name]
        base, target = role_parts(role)
        if base in ("indices", "distances"):
            value = value[0 if base == "distances" else 1]
        if target is not None:
            value = _target_column(value, target, base, (target_classes(estimator) or [])[target])
        value = _dense(value)
        results[role] = _align(value, None if like is None else like.get(role), estimator)
    return results


def _documents(estimator: Any, X: Any) -> Any:
    """The rows of a model that starts with a text vectorizer, as it takes them: one document
    per row (a 1-D column), not the ``[N, 1]`` table the graph takes (a vectorizer iterates
    over what it is given: over a DataFrame, that is its column names)."""
    first = estimator.steps[0][1] if hasattr(estimator, "steps") else estimator
    if not hasattr(first, "build_analyzer") or np.ndim(X) != 2 or np.shape(X)[1] != 1:
        return X
    column = X.iloc[:, 0] if hasattr(X, "iloc") else np.asarray(X)[:, 0]
    return list(column)


def _target_column(value: Any, target: int, base: str, classes: np.ndarray) -> np.ndarray:
    """Target ``target``'s part of a multi-output result: ``predict`` ``[N, T]`` → ``[N]``;
    ``predict_proba`` as a list of ``[N, C_t]`` → ``[N, C_t]``, or as the chain's
    positive-class ``[N, T]`` → ``[N, 2] = [1 - p, p]``.

    ClassifierChain's ``predict`` holds integer labels in a float array (``1.0``): they are
    given the type of the target's classes (``1``), the labels the chain's classifiers predict.
    """
    if isinstance(value, list):
        return np.asarray(value[target])
    column = np.asarray(value)[:, target]
    if base == "probabilities":
        return np.column_stack([1.0 - column, column])
    if column.dtype.kind == "f" and classes.dtype.kind in "iub":
        typed = column.astype(classes.dtype)
        if np.array_equal(typed, column):
            return typed
    return column
