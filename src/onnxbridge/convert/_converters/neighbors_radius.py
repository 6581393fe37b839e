"""RadiusNeighborsClassifier and RadiusNeighborsRegressor, rows without a neighbour included.

skl2onnx's converters gather the neighbours by index and fail at run time (an index of -1) as
soon as a row has no training point within ``radius``. Here every training point takes part,
masked by ``d <= radius``, with no gather:

- ``D[N, M]``: distances to the training points, in float64 whatever the input precision
  (``euclidean``, ``manhattan``, ``chebyshev``, ``minkowski`` with any ``p``);
- weights ``W[N, M]``: ``uniform`` = the mask; ``distance`` = ``1 / d`` inside the radius, or,
  where a training point is at distance 0, 1 for those points and 0 for the others;
- classifier: ``probabilities = W @ onehot(y)`` normalized per row; a row without a neighbour
  gets probability 1 on ``outlier_label_`` (all zeros if that label is not a class), and its label
  is ``outlier_label_``. With ``outlier_label=None`` scikit-learn raises for such rows; a graph
  cannot, so it gives NaN probabilities (and the first class as label) — set ``outlier_label``
  to choose;
- regressor: ``value = W @ y / sum(W)``: NaN where no neighbour is found, as scikit-learn.

Multi-output classifiers and other metrics are refused with a clear message.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_classification, make_regression
from sklearn.neighbors import RadiusNeighborsClassifier, RadiusNeighborsRegressor

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

METRICS = ("euclidean", "manhattan", "chebyshev", "minkowski")


def metric_p(model: Any) -> float:
    """The Minkowski exponent of a fitted neighbours model (inf for chebyshev).

    Raises:
        ConversionError: a metric the graph does not compute.
    """
    metric = model.effective_metric_
    # w=None is the unweighted metric scikit-learn records by default.
    params = {k: v for k, v in (model.effective_metric_params_ or {}).items() if v is not None}
    if metric == "euclidean" and not params:
        return 2.0
    if metric == "manhattan" and not params:
        return 1.0
    if metric == "chebyshev" and not params:
        return float("inf")
    if metric == "minkowski" and set(params) == {"p"}:
        return float(params["p"])
    raise ConversionError(
        f"{type(model).__name__}(metric={model.metric!r}, metric_params={model.metric_params!r})"
        f" cannot be converted; use metric in {METRICS} (minkowski with p only)"
    )


def distances(g: Nodes, model: Any, x: str) -> str:
    """``D[N, M]`` float64 distances from the rows of ``x`` to the training points."""
    p = metric_p(model)
    train = np.asarray(model._fit_X, dtype=np.float64)
    x64 = g.op("Cast", [x], to=TensorProto.DOUBLE)
    x3 = g.op("Unsqueeze", [x64, g.const(np.array([1]))])
    diff = g.op("Sub", [x3, g.const(train[np.newaxis], dtype=np.float64)])  # [N, M, F]
    axis = g.const(np.array([2]))
    if p == 2.0:
        squared = g.op("ReduceSumSquare", [diff, axis], keepdims=0)
        return g.op("Sqrt", [squared])
    if p == 1.0:
        return g.op("ReduceL1", [diff, axis], keepdims=0)
    magnitude = g.op("Abs", [diff])
    if np.isinf(p):
        return g.op("ReduceMax", [magnitude, axis], keepdims=0)
    powered = g.op("Pow", [magnitude, g.const(np.array(p), dtype=np.float64)])
    summed = g.op("ReduceSum", [powered, axis], keepdims=0)
    return g.op("Pow", [summed, g.const(np.array(1.0 / p), dtype=np.float64)])


def neighbour_weights(g: Nodes, model: Any, dist: str, inside: str) -> str:
    """``W[N, M]`` float64 weights of the training points for each row (0 outside)."""
    zero = g.const(np.array(0.0), dtype=np.float64)
    one = g.const(np.array(1.0), dtype=np.float64)
    inside_f = g.op("Cast", [inside], to=TensorProto.DOUBLE)
    if model.weights == "uniform":
        return inside_f
    if model.weights != "distance":
        raise ConversionError(
            f"{type(model).__name__}(weights={model.weights!r}): a callable weight has no ONNX "
            "equivalent; use weights='uniform' or 'distance'"
        )
    at_zero = g.op("Equal", [dist, zero])
    exact = g.op("And", [at_zero, inside])
    has_exact = g.op(
        "Cast",
        [
            g.op(
                "ReduceMax",
                [g.op("Cast", [exact], to=TensorProto.DOUBLE), g.const(np.array([1]))],
                keepdims=1,
            )
        ],
        to=TensorProto.BOOL,
    )
    safe = g.op("Where", [at_zero, one, dist])
    inverse = g.op("Where", [inside, g.op("Div", [one, safe]), zero])
    return g.op("Where", [has_exact, g.op("Cast", [exact], to=TensorProto.DOUBLE), inverse])


def _inside(g: Nodes, model: Any, dist: str) -> str:
    return g.op("LessOrEqual", [dist, g.const(np.array(float(model.radius)), dtype=np.float64)])


def _check_single_output(model: Any) -> None:
    if getattr(model, "outputs_2d_", False):
        raise ConversionError(
            f"{type(model).__name__} fitted on a 2-D target (multi-output) cannot be converted; "
            "fit one model per target column"
        )


def _label_table(model: Any) -> np.ndarray:
    """classes_ followed by the outlier label (used when a row has all-zero probabilities)."""
    classes = np.asarray(model.classes_)
    extra = classes[:1] if model.outlier_label_ is None else np.asarray(model.outlier_label_[:1])
    if classes.dtype.kind in "OUS":
        return np.concatenate([classes.astype(object), extra.astype(object)])
    return np.concatenate([classes, extra]).astype(np.int64)


def _classifier_shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(_label_table(model))([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, len(model.classes_)])


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    _check_single_output(model)
    g = Nodes(scope, operator, container)
    classes = np.asarray(model.classes_)
    dist = distances(g, model, operator.inputs[0].full_name)
    inside = _inside(g, model, dist)
    weights = neighbour_weights(g, model, dist, inside)
    onehot = np.zeros((len(model._y), len(classes)))
    onehot[np.arange(len(model._y)), model._y] = 1.0
    counts = g.op("MatMul", [weights, g.const(onehot, dtype=np.float64)])  # [N, C]
    axis = g.const(np.array([1]))
    total = g.op("ReduceSum", [counts, axis], keepdims=1)
    zero = g.const(np.array(0.0), dtype=np.float64)
    outlier = g.op("Equal", [total, zero])  # [N, 1]: no neighbour in the radius
    if model.outlier_label_ is None:
        fallback = np.full((1, len(classes)), np.nan)
    else:
        fallback = (classes == model.outlier_label_[0]).astype(np.float64).reshape(1, -1)
    one = g.const(np.array(1.0), dtype=np.float64)
    normalized = g.op("Div", [counts, g.op("Where", [outlier, one, total])])
    proba = g.op("Where", [outlier, g.const(fallback, dtype=np.float64), normalized])
    g.op("Cast", [proba], output=operator.outputs[1].full_name, to=g.onnx_float)
    # predict: argmax, or the outlier label where every probability is 0.
    all_zero = g.op(
        "Equal", [g.op("ReduceMax", [proba, axis], keepdims=0), zero]
    )  # NaN rows are not all zero: they keep index 0
    index = g.op(
        "Where", [all_zero, g.const(np.array(len(classes), dtype=np.int64)), g.argmax(proba)]
    )
    g.labels(_label_table(model), index, output=operator.outputs[0].full_name)


def regressor_shape(operator: Any) -> None:
    """A neighbours regressor's output: ``[N, T]`` float, one column per target of ``_y``."""
    model = operator.raw_operator
    targets = 1 if np.ndim(model._y) == 1 else np.shape(model._y)[1]
    operator.outputs[0].type = float_tensor_type(operator)([None, targets])


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    y = np.asarray(model._y, dtype=np.float64)
    y = y.reshape(-1, 1) if y.ndim == 1 else y
    dist = distances(g, model, operator.inputs[0].full_name)
    weights = neighbour_weights(g, model, dist, _inside(g, model, dist))
    weighted = g.op("MatMul", [weights, g.const(y, dtype=np.float64)])
    total = g.op("ReduceSum", [weights, g.const(np.array([1]))], keepdims=1)
    value = g.op("Div", [weighted, total])  # 0 / 0 = NaN without neighbours, as scikit-learn
    g.op("Cast", [value], output=operator.outputs[0].full_name, to=g.onnx_float)


def _classifier_example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=150, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    model = RadiusNeighborsClassifier(radius=1.5, outlier_label="most_frequent").fit(X, y)
    # Shifted rows: some have no neighbour within the radius.
    return model, np.vstack([X, X[:20] + 4.0])


def _regressor_example() -> tuple[Any, Any]:
    X, y = make_regression(n_samples=150, n_features=4, random_state=0)
    return RadiusNeighborsRegressor(radius=2.0, weights="distance").fit(X, y), X


_OPTIONS: dict[str, list[Any]] = {"zipmap": [False, True, "columns"], "nocl": [False, True]}
register_converter(
    ConverterSpec(
        RadiusNeighborsClassifier,
        _classifier_shape,
        _classifier_convert,
        _classifier_example,
        replaces="skl2onnx's graph fails at run time (index -1) on rows without a neighbour in "
        "the radius instead of using outlier_label",
        options=_OPTIONS,
    )
)
register_converter(
    ConverterSpec(
        RadiusNeighborsRegressor,
        regressor_shape,
        _regressor_convert,
        _regressor_example,
        replaces="skl2onnx's graph fails at run time (index -1) on rows without a neighbour in "
        "the radius instead of predicting NaN",
    )
)
