"""Wrappers that predict with one fitted inner estimator: RandomizedSearchCV,
HalvingGridSearchCV, HalvingRandomSearchCV (``best_estimator_``) and FrozenEstimator
(``estimator``).

skl2onnx converts GridSearchCV but none of these. Their ``predict``, ``predict_proba``,
``decision_function`` and ``transform`` are the inner estimator's, so the parser hands the inner
model to skl2onnx in their place (options given for the wrapper, such as ``zipmap``, go with it)
and the inner model's own converter writes the graph: a classifier, regressor, clusterer or
transformer, pipelines included. A search fitted with ``refit=False`` has no model to predict
with and is refused.
"""

from __future__ import annotations

from typing import Any

from scipy.stats import loguniform
from sklearn.datasets import make_classification
from sklearn.experimental import enable_halving_search_cv  # noqa: F401  (exposes the classes)
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    HalvingGridSearchCV,
    HalvingRandomSearchCV,
    RandomizedSearchCV,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _inner(model: Any) -> Any:
    if isinstance(model, FrozenEstimator):
        return model.estimator
    inner = getattr(model, "best_estimator_", None)
    if inner is None:
        raise ConversionError(
            f"{type(model).__name__}(refit={model.refit!r}) keeps no fitted model to predict "
            "with; fit it with refit=True (the default) or convert the estimator you chose"
        )
    return inner


def _parser(scope: Any, model: Any, inputs: list[Any], custom_parsers: Any = None) -> Any:
    from skl2onnx._parse import _parse_sklearn

    inner = _inner(model)
    options = (scope.options or {}).get(id(model))
    if options:
        scope.add_options(id(inner), options)
    return _parse_sklearn(scope, inner, inputs, custom_parsers=custom_parsers)


def _never_shape(operator: Any) -> None:
    raise ConversionError(
        f"{type(operator.raw_operator).__name__} is converted through its inner estimator; "
        "its own shape calculator is never used"
    )


def _never_convert(scope: Any, operator: Any, container: Any) -> None:
    raise ConversionError(
        f"{type(operator.raw_operator).__name__} is converted through its inner estimator; "
        "its own converter is never used"
    )


def _data() -> tuple[Any, Any]:
    return make_classification(
        n_samples=150, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=0
    )


def _pipeline() -> Any:
    return make_pipeline(StandardScaler(), LogisticRegression())


def _randomized_example() -> tuple[Any, Any]:
    X, y = _data()
    grid = {"logisticregression__C": [0.01, 0.1, 1.0, 10.0]}
    search = RandomizedSearchCV(_pipeline(), grid, n_iter=3, cv=3, random_state=0)
    return search.fit(X, y), X


def _halving_grid_example() -> tuple[Any, Any]:
    X, y = _data()
    search = HalvingGridSearchCV(_pipeline(), {"logisticregression__C": [0.1, 1.0]}, cv=3)
    return search.fit(X, y), X


def _halving_random_example() -> tuple[Any, Any]:
    X, y = _data()
    grid = {"logisticregression__C": loguniform(0.01, 10.0)}
    search = HalvingRandomSearchCV(_pipeline(), grid, n_candidates=4, cv=3, random_state=0)
    return search.fit(X, y), X


def _frozen_example() -> tuple[Any, Any]:
    X, y = _data()
    return FrozenEstimator(_pipeline().fit(X, y)), X


_OPTIONS: dict[str, list[Any]] = {
    "zipmap": [False, True, "columns"],
    "nocl": [False, True],
    "raw_scores": [False, True],
}
for _estimator, _example in (
    (RandomizedSearchCV, _randomized_example),
    (HalvingGridSearchCV, _halving_grid_example),
    (HalvingRandomSearchCV, _halving_random_example),
    (FrozenEstimator, _frozen_example),
):
    register_converter(
        ConverterSpec(
            _estimator,
            _never_shape,
            _never_convert,
            _example,
            parser=_parser,
            options=_OPTIONS,
        )
    )
