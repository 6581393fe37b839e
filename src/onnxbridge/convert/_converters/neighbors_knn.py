"""KNeighborsClassifier and KNeighborsRegressor: exact on tied distances, in bounded memory.

skl2onnx's converters compute a full ``[N, M]`` distance matrix (``N`` query rows, ``M``
training rows: 17 GB for 20 000 rows against 58 000) with the ``|x|^2 - 2 x.y + |y|^2``
expansion, and let ``TopK`` pick among equal distances by training index, which is not the row
scikit-learn keeps when it searches a KD tree or ball tree (``algorithm="auto"`` on up to 15
features). Here the search is :func:`onnxbridge.convert._converters._kneighbors.kneighbors`:
float64 distances summed as scikit-learn sums them, query rows in blocks, and scikit-learn's
neighbour heap replayed in the order its search meets the training rows, so equally far rows
are kept as scikit-learn keeps them. On the ``k`` neighbours ``[N, k]``:

- weights: ``uniform`` = 1; ``distance`` = ``1 / d``, or, where a neighbour is at distance 0,
  1 for those neighbours and 0 for the others (scikit-learn's ``_get_weights``);
- classifier: ``probabilities = sum of weights per class / sum of weights``, label = the first
  class with the largest probability (scikit-learn's mode: the smallest class on a tie);
- regressor: ``value = sum(w y) / sum(w)`` per target.

A classifier fitted on a 2-D target (multi-output) and callable weights are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from onnxbridge.convert._converters._graph import (
    Graph,
    float_tensor_type,
    gather_labels,
    label_tensor_type,
)
from onnxbridge.convert._converters._kneighbors import kneighbors, reduced_to_distance
from onnxbridge.convert._converters.neighbors_radius import regressor_shape
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _weights(g: Graph, model: Any, rdist: str) -> str:
    """``[N, k]`` float64 weights of the neighbours."""
    if model.weights == "uniform":
        return g.node("Cast", [g.node("Equal", [rdist, rdist])], to=TensorProto.DOUBLE)
    if model.weights != "distance":
        raise ConversionError(
            f"{type(model).__name__}(weights={model.weights!r}): a callable weight has no ONNX "
            "equivalent; use weights='uniform' or 'distance'"
        )
    dist = reduced_to_distance(g, rdist, model)
    zero, one = g.const(0.0, dtype=np.float64), g.const(1.0, dtype=np.float64)
    at_zero = g.node("Equal", [dist, zero])
    exact = g.node("Cast", [at_zero], to=TensorProto.DOUBLE)
    any_exact = g.node("ReduceMax", [exact, g.int64([1])], keepdims=1)
    has_exact = g.node("Equal", [any_exact, one])
    inverse = g.node("Div", [one, g.node("Where", [at_zero, one, dist])])
    return g.node("Where", [has_exact, exact, inverse])


def _classifier_shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, len(model.classes_)])


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if getattr(model, "outputs_2d_", False):
        raise ConversionError(
            "KNeighborsClassifier fitted on a 2-D target (multi-output) cannot be converted; "
            "fit one model per target column"
        )
    g = Graph(scope, operator, container)
    n_classes = len(model.classes_)
    rdist, indices = kneighbors(g, model, g.input, int(model.n_neighbors))
    weights = _weights(g, model, rdist)
    codes = g.node("Gather", [g.int64(np.asarray(model._y, dtype=np.int64)), indices], axis=0)
    hits = g.node(
        "Equal",
        [
            g.node("Unsqueeze", [codes, g.int64([2])]),
            g.int64(np.arange(n_classes).reshape(1, 1, -1)),
        ],
    )
    weighted = g.node(
        "Mul",
        [
            g.node("Cast", [hits], to=TensorProto.DOUBLE),
            g.node("Unsqueeze", [weights, g.int64([2])]),
        ],
    )
    votes = g.node("ReduceSum", [weighted, g.int64([1])], keepdims=0)  # [N, C]
    total = g.node("ReduceSum", [votes, g.int64([1])], keepdims=1)
    proba = g.node("Div", [votes, total])
    g.node("Cast", [proba], g.output(1), to=g.onnx_type)
    best = g.node("ArgMax", [proba], axis=1, keepdims=0, select_last_index=0)
    gather_labels(g, best, model.classes_, "KNeighborsClassifier", g.output(0))


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    y = np.asarray(model._y, dtype=np.float64)
    y = y.reshape(-1, 1) if y.ndim == 1 else y
    rdist, indices = kneighbors(g, model, g.input, int(model.n_neighbors))
    weights = g.node("Unsqueeze", [_weights(g, model, rdist), g.int64([2])])  # [N, k, 1]
    targets = g.node("Gather", [g.const(y, dtype=np.float64), indices], axis=0)  # [N, k, T]
    axis = g.int64([1])
    weighted = g.node("ReduceSum", [g.node("Mul", [targets, weights]), axis], keepdims=0)
    total = g.node("ReduceSum", [weights, axis], keepdims=0)  # [N, 1]
    g.node("Cast", [g.node("Div", [weighted, total])], g.output(0), to=g.onnx_type)


def _tied_table(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer features with many duplicate rows of different labels: many equal distances."""
    rng = np.random.RandomState(seed)
    X = rng.randint(0, 4, size=(160, 3)).astype(np.float64)
    y = rng.randint(0, 3, size=160)
    queries = rng.randint(0, 4, size=(60, 3)).astype(np.float64)
    return X, y, queries


def _classifier_example() -> tuple[Any, Any]:
    X, y, queries = _tied_table(0)
    return KNeighborsClassifier(n_neighbors=5, leaf_size=8).fit(X, y), queries


def _regressor_example() -> tuple[Any, Any]:
    X, y, queries = _tied_table(1)
    target = y * 1.5 + X[:, 0]
    return KNeighborsRegressor(n_neighbors=4, weights="distance").fit(X, target), queries


_WHY = (
    "skl2onnx's graph holds the full query x training distance matrix (gigabytes on large "
    "tables) and breaks distance ties by training index, not in the order scikit-learn's "
    "search keeps them"
)
register_converter(
    ConverterSpec(
        KNeighborsClassifier,
        _classifier_shape,
        _classifier_convert,
        _classifier_example,
        replaces=_WHY,
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
register_converter(
    ConverterSpec(
        KNeighborsRegressor,
        regressor_shape,
        _regressor_convert,
        _regressor_example,
        replaces=_WHY,
    )
)
