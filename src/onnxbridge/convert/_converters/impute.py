"""Missing values: MissingIndicator, KNNImputer, and the indicator columns imputers append.

MissingIndicator: skl2onnx has no converter for it. ``[N, F] -> transformed [N, K]``, K the
features kept at fit (``features_``: all of them, or only those that had missing values).
scikit-learn returns booleans; the graph returns 0.0 / 1.0 in the input's float type, the form
every downstream ONNX operator takes, equal to scikit-learn's mask value for value. What a graph
cannot do: raise as scikit-learn does (``error_on_new=True``) when a feature that had no missing
values at fit has some at transform; such a feature is not reported, as in scikit-learn's output
for ``error_on_new=False``.

An imputer fitted with ``add_indicator=True`` appends its ``indicator_`` (a MissingIndicator over
the features that had missing values at fit) after the imputed columns. skl2onnx's SimpleImputer
and KNNImputer converters leave those columns out while the next step (a scaler, a linear model)
was fitted on them, so the graph is one column short per indicator: it fails to build, refuses to
run, or (a step sized from its own constants) runs and answers wrongly. :func:`append_indicator`
writes them for KNNImputer (below) and SimpleImputer
(:mod:`onnxbridge.convert._converters.string_imputer`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.impute import KNNImputer, MissingIndicator

from onnxbridge.convert._converters._graph import Graph, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

__all__ = ["append_indicator", "indicator_width", "missing_mask", "numeric_marker"]


def numeric_marker(model: Any) -> float:
    """The model's ``missing_values`` when a numeric graph can test for it (NaN or a number).

    Raises:
        ConversionError: the marker is text or None.
    """
    marker = model.missing_values
    if isinstance(marker, (str, bytes)) or marker is None:
        raise ConversionError(
            f"{type(model).__name__}(missing_values={marker!r}) marks text entries; onnxbridge "
            "converts numeric inputs only: use missing_values=np.nan or a number"
        )
    return float(marker)


def missing_mask(g: Graph, x: str, marker: float) -> str:
    """``[N, F] -> [N, F]`` booleans: which entries of ``x`` are ``marker`` (NaN: IsNaN)."""
    output = g.name("is_missing")
    if np.isnan(marker):
        return g.node("IsNaN", [x], output)
    return g.node("Equal", [x, g.const(marker, hint="missing_value")], output)


def _indicator_features(indicator: Any) -> np.ndarray:
    return np.asarray(indicator.features_, dtype=np.int64)


def _indicator_columns(g: Graph, mask: str, indicator: Any, output: str | None = None) -> str:
    """``[N, F]`` booleans -> ``[N, K]`` 0.0 / 1.0: the mask of the indicator's features."""
    features = _indicator_features(indicator)
    # Distinct names: skl2onnx's KNNImputer graph writes plain ones ("isnan", "cast") that the
    # scope does not reserve.
    if len(features) < indicator.n_features_in_:
        kept = g.int64(features, hint="indicator_features")
        mask = g.node("Gather", [mask, kept], g.name("indicator_mask"), axis=1)
    return g.node("Cast", [mask], output or g.name("indicator"), to=g.onnx_type)


def indicator_width(model: Any) -> int:
    """How many indicator columns the imputer ``model`` appends (0 without ``add_indicator``)."""
    indicator = getattr(model, "indicator_", None)
    return 0 if indicator is None else len(_indicator_features(indicator))


def append_indicator(g: Graph, imputed: str, x: str, model: Any) -> None:
    """Write ``[imputed, indicator columns of x]`` to the operator's output (``imputed`` alone
    when the imputer has no indicator columns)."""
    if not indicator_width(model):
        g.node("Identity", [imputed], g.output())
        return
    mask = missing_mask(g, x, numeric_marker(model))
    columns = _indicator_columns(g, mask, model.indicator_)
    g.node("Concat", [imputed, columns], g.output(), axis=1)


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, len(operator.raw_operator.features_)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    marker = numeric_marker(model)
    g = Graph(scope, operator, container)
    _indicator_columns(g, missing_mask(g, g.input, marker), model, g.output())


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 5))
    # Every feature misses some values at fit: with the default error_on_new=True scikit-learn
    # refuses NaN anywhere else, and onnxbridge's missing-value probe would say so.
    X[rng.rand(60, 5) < [0.1, 0.2, 0.05, 0.3, 0.1]] = np.nan
    return MissingIndicator().fit(X), X


register_converter(ConverterSpec(MissingIndicator, _shape, _convert, _example))


# KNNImputer. skl2onnx's graph leaves out the indicator columns, runs on float32 only (its local
# functions hold float32 constants) and fails in ONNX Runtime on rows it finds no donor for
# ("GatherElements op: Out of range value in index tensor"). This one follows
# KNNImputer.transform: nan-euclidean distances to the training rows; for each feature, the
# k nearest training rows that have it (fewer if fewer have it), averaged (uniform weights, or
# 1 / distance, a zero distance taking all the weight); the feature's mean at fit when no such
# row shares a present feature with the row; then the features kept at fit and the indicator.


def _knn_kept(model: Any) -> np.ndarray:
    """Which features had a value at fit (KNNImputer drops the others, or with
    ``keep_empty_features`` outputs them as zeros)."""
    return np.asarray(model._valid_mask, dtype=bool)


def _knn_shape(operator: Any) -> None:
    model = operator.raw_operator
    width = model.n_features_in_ if model.keep_empty_features else int(_knn_kept(model).sum())
    set_float_output(operator, 0, [None, width + indicator_width(model)])


def _knn_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if model.metric != "nan_euclidean" or model.weights not in ("uniform", "distance"):
        raise ConversionError(
            f"KNNImputer(metric={model.metric!r}, weights={model.weights!r}) cannot be "
            "converted; use metric='nan_euclidean' and weights='uniform' or 'distance'"
        )
    g = Graph(scope, operator, container)
    marker = numeric_marker(model)
    mask = missing_mask(g, g.input, marker)  # in the input's type: a marker like 0.1 matches
    # The neighbours are found and averaged in float64 also for a float32 input: float32
    # distances from |x|² - 2x·y + |y|² lose the digits that rank near neighbours (a feature
    # with mean 100 and spread 1 reordered 2 % of the imputed values).
    work = Graph(scope, operator, container)
    work.dtype, work.onnx_type = np.float64, TensorProto.DOUBLE
    x = g.input
    if g.dtype != np.float64:
        x = work.node("Cast", [x], to=TensorProto.DOUBLE)
    imputed = _knn_imputed(work, model, x, mask)
    if g.dtype != np.float64:
        imputed = g.node("Cast", [imputed], to=g.onnx_type)
    append_indicator(g, imputed, g.input, model)


def _knn_imputed(g: Graph, model: Any, x: str, mask: str) -> str:
    """``[N, F']`` float64: the features KNNImputer keeps, missing entries imputed."""
    fit = np.asarray(model._fit_X, dtype=np.float64)
    fit_missing = np.asarray(model._mask_fit_X, dtype=bool)
    fit_present = (~fit_missing).astype(np.float64)
    fit_zero = np.where(fit_missing, 0.0, fit)
    n_features = fit.shape[1]

    zero = g.const(0.0)
    x_zero = g.node("Where", [mask, zero, x])
    present = g.node("Cast", [g.node("Not", [mask])], to=g.onnx_type)
    # sklearn.metrics.pairwise.nan_euclidean_distances, in its order: the squared distance of
    # the zero-filled rows, less the terms of features one of the two rows lacks, over the
    # features both have, scaled to all features.
    squares = g.node("Mul", [x_zero, x_zero])
    total = g.node("MatMul", [x_zero, g.const(-2.0 * fit_zero.T)])
    total = g.node("Add", [total, g.node("ReduceSum", [squares, g.int64([1])], keepdims=1)])
    total = g.node("Add", [total, g.const(np.einsum("ij,ij->i", fit_zero, fit_zero)[None, :])])
    total = g.node("Max", [total, zero])
    total = g.node("Sub", [total, g.node("MatMul", [squares, g.const(fit_missing.T)])])
    lacking = g.node("Cast", [mask], to=g.onnx_type)
    total = g.node("Sub", [total, g.node("MatMul", [lacking, g.const((fit_zero**2).T)])])
    total = g.node("Max", [total, zero])
    shared = g.node("MatMul", [present, g.const(fit_present.T)])
    scaled = g.node("Div", [total, g.node("Max", [shared, g.const(1.0)])])
    distance = g.node("Sqrt", [g.node("Mul", [scaled, g.const(float(n_features))])])
    # No shared feature: scikit-learn's NaN distance, never a neighbour (+inf here).
    no_shared = g.node("Equal", [shared, zero])
    distance = g.node("Where", [no_shared, g.const(np.inf), distance])

    kept = _knn_kept(model)
    columns = []
    for feature in range(n_features):
        if not kept[feature]:
            if model.keep_empty_features:
                x_column = g.node("Gather", [x_zero, g.int64([feature])], axis=1)
                columns.append(g.node("Mul", [x_column, zero]))
            continue
        columns.append(_knn_column(g, model, x, mask, distance, feature, fit, fit_missing))
    return g.node("Concat", columns, axis=1) if len(columns) > 1 else columns[0]


def _knn_column(
    g: Graph,
    model: Any,
    x: str,
    mask: str,
    distance: str,
    feature: int,
    fit: np.ndarray,
    fit_missing: np.ndarray,
) -> str:
    """``[N, 1]``: feature ``feature`` of ``x``, its missing entries imputed."""
    donors = np.flatnonzero(~fit_missing[:, feature])
    k = min(int(model.n_neighbors), len(donors))
    candidates = g.node("Gather", [distance, g.int64(donors)], axis=1)
    nearest, index = g.name("knn_distance"), g.name("knn_index")
    g.container.add_node(
        "TopK",
        [candidates, g.int64([k])],
        [nearest, index],
        name=g.scope.get_unique_operator_name("TopK"),
        axis=-1,
        largest=0,
        sorted=1,
    )
    values = g.node("Gather", [g.const(fit[donors, feature]), index], axis=0)
    if model.weights == "uniform":
        weights = g.node("Cast", [g.node("Not", [g.node("IsInf", [nearest])])], to=g.onnx_type)
    else:
        inverse = g.node("Reciprocal", [nearest])
        at_zero = g.node("Cast", [g.node("Equal", [nearest, g.const(0.0)])], to=g.onnx_type)
        any_zero = g.node("ReduceMax", [at_zero, g.int64([1])], keepdims=1)
        has_zero = g.node("Greater", [any_zero, g.const(0.0)])
        weights = g.node("Where", [has_zero, at_zero, inverse])
    axis = g.int64([1])
    weighted = g.node("ReduceSum", [g.node("Mul", [weights, values]), axis], keepdims=1)
    weight = g.node("ReduceSum", [weights, axis], keepdims=1)
    mean = float(fit[donors, feature].mean())
    average = g.node("Div", [weighted, g.node("Max", [weight, g.const(np.finfo(g.dtype).tiny)])])
    no_donor = g.node("Equal", [weight, g.const(0.0)])
    fill = g.node("Where", [no_donor, g.const(mean), average])
    column = g.int64([feature])
    missing = g.node("Gather", [mask, column], axis=1)
    return g.node("Where", [missing, fill, g.node("Gather", [x, column], axis=1)])


def _knn_example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 4))
    X[rng.rand(60, 4) < [0.15, 0.0, 0.2, 0.1]] = np.nan
    X[0] = np.nan  # a row that shares no feature with any training row: the feature means
    return KNNImputer(n_neighbors=3, add_indicator=True).fit(X), X


register_converter(
    ConverterSpec(
        KNNImputer,
        _knn_shape,
        _knn_convert,
        _knn_example,
        replaces="skl2onnx's KNNImputer leaves out the add_indicator columns, takes float32 "
        "input only and fails in ONNX Runtime on rows without a donor",
    )
)
