"""scikit-learn's trees and tree ensembles: decision trees, extra trees, random forests,
extra-trees forests and gradient boosting, classifiers and regressors, and isolation forests.

Replaces skl2onnx's converters, which drop the missing-value direction the trees learned
(scikit-learn >= 1.3 ``missing_go_to_left``: NaN rows go the wrong way) and whose float64 graphs do
not load in ONNX Runtime (the kernel outputs float where the graph declares double). ``[N, F] ->
label [N], probabilities [N, C]`` / ``value [N, K]``. scikit-learn compares ``float32(x) <= t``:
float graphs round thresholds down to float32, double graphs round the input to float32 first,
so both keep every decision. Cases onnxbridge does not handle itself (multi-output classifiers,
gradient boosting with a custom ``init`` estimator) go to skl2onnx's converter.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.datasets import make_classification, make_regression
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    IsolationForest,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)

from onnxbridge.convert._converters._tree_heads import (
    CLASSIFIER_OPTIONS,
    classifier_shape,
    outlier_shape,
    regressor_shape,
    write_classifier,
    write_outlier,
    write_regressor,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.convert._tree_ensemble import (
    TreeEnsembleSpec,
    from_sklearn_trees,
    member_features,
)

REPLACES = (
    "skl2onnx drops the NaN routing scikit-learn trees learn (missing_go_to_left) and its "
    "float64 tree graphs do not load in ONNX Runtime"
)

_SINGLE_TREES = (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)


def _upstream(model: Any, what: str) -> Any:
    """skl2onnx's own shape calculator or converter for ``model`` (the fallback)."""
    from skl2onnx.common._registration import get_converter, get_shape_calculator

    alias = f"Sklearn{type(model).__name__}"
    return get_shape_calculator(alias) if what == "shape" else get_converter(alias)


def _trees(model: Any) -> list[Any]:
    if isinstance(model, _SINGLE_TREES):
        return [model]
    return list(model.estimators_)


def _handled(model: Any, operator: Any = None, container: Any = None) -> bool:
    """Whether onnxbridge converts this model itself (else skl2onnx's converter does)."""
    if operator is not None and len(operator.outputs) > (2 if hasattr(model, "classes_") else 1):
        return False  # skl2onnx's decision_path / decision_leaf outputs
    if container is not None and hasattr(model, "classes_"):
        options = container.get_options(model, {"raw_scores": False})
        if options.get("raw_scores"):
            return False
    if isinstance(model, (GradientBoostingClassifier, GradientBoostingRegressor)):
        init = model.init_
        return isinstance(init, str) or isinstance(init, (DummyClassifier, DummyRegressor))
    if hasattr(model, "classes_"):
        return getattr(model, "n_outputs_", 1) == 1
    return True


def _proba(values: np.ndarray) -> np.ndarray:
    """``[L, 1, C]`` leaf class weights -> ``[L, C]`` probabilities, as predict_proba divides."""
    rows = np.asarray(values[:, 0, :], dtype=np.float64)
    total = rows.sum(axis=1, keepdims=True)
    return rows / np.where(total > 0, total, 1.0)


def forest_spec(model: Any) -> TreeEnsembleSpec:
    """The spec of a fitted tree, forest or gradient-boosting model (raw scores)."""
    if isinstance(model, (GradientBoostingClassifier, GradientBoostingRegressor)):
        stages = np.asarray(model.estimators_)
        k = stages.shape[1]
        base = np.asarray(model._raw_predict_init(np.zeros((1, model.n_features_in_))), float)
        rate = float(model.learning_rate)
        return from_sklearn_trees(
            list(stages.ravel()),
            lambda v: rate * np.asarray(v[:, 0, 0], dtype=np.float64),
            1,
            base.reshape(-1),
            tree_output=np.tile(np.arange(k), stages.shape[0]),
        )
    trees = _trees(model)
    average = not isinstance(model, _SINGLE_TREES)
    if hasattr(model, "classes_"):
        n_classes = len(model.classes_)
        return from_sklearn_trees(trees, _proba, n_classes, np.zeros(n_classes), average=average)
    k = int(getattr(model, "n_outputs_", 1))
    return from_sklearn_trees(
        trees, lambda v: np.asarray(v[:, :, 0], float), k, np.zeros(k), average=average
    )


def average_path_length(samples: np.ndarray) -> np.ndarray:
    """The average path length of an unsuccessful search in a binary tree of ``samples`` rows
    (the isolation forest paper's ``c(n)``, as scikit-learn computes it): 0 for at most one
    row, 1 for two, else ``2 (ln(n - 1) + γ) - 2 (n - 1) / n``."""
    n = np.asarray(samples, dtype=np.float64)
    many = np.maximum(n, 3.0)
    longer = 2.0 * (np.log(many - 1.0) + np.euler_gamma) - 2.0 * (many - 1.0) / many
    return np.where(n <= 1, 0.0, np.where(n == 2, 1.0, longer))


def isolation_spec(model: Any) -> TreeEnsembleSpec:
    """An isolation forest's trees, each leaf holding its path length (its depth, counting the
    root as 1, plus :func:`average_path_length` of its training rows, minus 1), features mapped
    to the model's where its trees saw a subset. The sum over trees is scikit-learn's
    ``depths``."""
    trees = list(model.estimators_)
    spec = from_sklearn_trees(trees, lambda v: np.zeros((len(v), 1)), 1, np.zeros(1))
    lengths = [
        np.asarray(t.tree_.compute_node_depths(), dtype=np.float64)
        + average_path_length(t.tree_.n_node_samples)
        - 1.0
        for t in trees
    ]
    values = np.concatenate(lengths).reshape(-1, 1)
    n_features = int(model.n_features_in_)
    used = model.estimators_features_
    feature = spec.feature
    if any(len(f) != n_features for f in used):  # scikit-learn indexes X[:, features] then
        feature = member_features(spec, used)
    return replace(
        spec,
        values=np.where(spec.is_leaf[:, None], values, 0.0),
        feature=feature,
        n_features=n_features,
    )


def _isolation_shape(operator: Any) -> None:
    if len(operator.outputs) > 2:  # skl2onnx's score_samples output: its converter
        _upstream(operator.raw_operator, "shape")(operator)
        return
    outlier_shape(operator)


def _isolation_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if len(operator.outputs) > 2:
        _upstream(model, "convert")(scope, operator, container)
        return
    spec = isolation_spec(model)
    expected = float(average_path_length(np.array([model.max_samples_]))[0])
    denominator = len(model.estimators_) * expected
    # score_samples = -2 ** (-depths / denominator); scikit-learn takes -depths / denominator
    # as -1 when the denominator is 0 (one training row).
    scale, shift = (-np.log(2.0) / denominator, 0.0) if denominator else (0.0, -np.log(2.0))
    write_outlier(
        scope, operator, container, spec, scale=scale, shift=shift, offset=float(model.offset_)
    )


def _isolation_example() -> tuple[Any, Any]:
    X, _ = _regression()
    return IsolationForest(n_estimators=10, max_features=0.8, random_state=0).fit(X), X


def _classifier_shape(operator: Any) -> None:
    if not _handled(operator.raw_operator, operator):
        _upstream(operator.raw_operator, "shape")(operator)
        return
    classifier_shape(operator)


def _regressor_shape(operator: Any) -> None:
    if not _handled(operator.raw_operator, operator):
        _upstream(operator.raw_operator, "shape")(operator)
        return
    regressor_shape(operator)


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if not _handled(model, operator, container):
        _upstream(model, "convert")(scope, operator, container)
        return
    spec = forest_spec(model)
    if isinstance(model, GradientBoostingClassifier):
        exponential = model.loss == "exponential"
        if spec.n_outputs == 1:
            write_classifier(
                scope,
                operator,
                container,
                spec,
                transform="logistic",
                scale=2.0 if exponential else 1.0,
            )
        else:
            write_classifier(scope, operator, container, spec, transform="softmax")
        return
    write_classifier(scope, operator, container, spec, transform="none")


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if not _handled(model, operator, container):
        _upstream(model, "convert")(scope, operator, container)
        return
    write_regressor(scope, operator, container, forest_spec(model))


def _nan_rows(X: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.RandomState(seed)
    X = X.astype(np.float32).astype(np.float64)
    X[rng.rand(*X.shape) < 0.1] = np.nan
    return X


def _classification() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=200, n_features=5, n_informative=3, n_classes=3, random_state=0
    )
    return _nan_rows(X, 1), y


def _regression() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(n_samples=200, n_features=5, noise=1.0, random_state=0)
    return _nan_rows(X, 2), y / 100


def _example(cls: type, **params: Any) -> Any:
    def build() -> tuple[Any, Any]:
        is_classifier = "Classifier" in cls.__name__
        X, y = _classification() if is_classifier else _regression()
        if cls in (GradientBoostingClassifier, GradientBoostingRegressor):
            X = np.nan_to_num(X)  # gradient boosting does not take NaN
        return cls(random_state=0, **params).fit(X, y), X

    return build


# skl2onnx's options for tree classifiers stay accepted; setting one hands over to its converter.
_TREE_CLASSIFIER_OPTIONS: dict[str, list[Any]] = {
    **CLASSIFIER_OPTIONS,
    "raw_scores": [False, True],
    "decision_path": [False, True],
    "decision_leaf": [False, True],
    "output_class_labels": [False, True],
}
_ENSEMBLE = {"n_estimators": 10, "max_depth": 5}
for _cls, _params in (
    (DecisionTreeClassifier, {"max_depth": 6}),
    (DecisionTreeRegressor, {"max_depth": 6}),
    (ExtraTreeClassifier, {"max_depth": 6}),
    (ExtraTreeRegressor, {"max_depth": 6}),
    (RandomForestClassifier, _ENSEMBLE),
    (RandomForestRegressor, _ENSEMBLE),
    (ExtraTreesClassifier, _ENSEMBLE),
    (ExtraTreesRegressor, _ENSEMBLE),
    (GradientBoostingClassifier, {"n_estimators": 10, "max_depth": 3}),
    (GradientBoostingRegressor, {"n_estimators": 10, "max_depth": 3}),
):
    _is_classifier = "Classifier" in _cls.__name__
    register_converter(
        ConverterSpec(
            _cls,
            _classifier_shape if _is_classifier else _regressor_shape,
            _classifier_convert if _is_classifier else _regressor_convert,
            _example(_cls, **_params),
            replaces=REPLACES,
            options=_TREE_CLASSIFIER_OPTIONS if _is_classifier else None,
            family=__name__,
        )
    )
register_converter(
    ConverterSpec(
        IsolationForest,
        _isolation_shape,
        _isolation_convert,
        _isolation_example,
        options={"score_samples": [False, True]},
        replaces=(
            "skl2onnx's graph sends NaN rows another way than the trees learned and its float64 "
            "graph does not build"
        ),
        family=__name__,
    )
)
