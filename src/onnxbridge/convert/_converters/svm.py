"""SVC, NuSVC, SVR, NuSVR and OneClassSVM, from standard ONNX operators in float64.

skl2onnx writes these as ``ai.onnx.ml`` ``SVMClassifier`` / ``SVMRegressor``, whose support
vectors and coefficients are float attributes: float32, whatever the input precision. On data
with large or unscaled features (the wine data's proline column) the kernel values and decision
functions then move, probabilities and even labels change, and double precision cannot help.
Its binary ``SVC`` / ``NuSVC`` scores also come out as ``[d, -d]`` where ``d`` is scikit-learn's
``decision_function``: the first column holds the second class's score.

Here everything after the input is float64, as LIBSVM computes it (outputs are cast back to the
input's precision):

- ``K = kernel(x, support_vectors_)`` ``[N, M]``, with ``gamma`` as fitted (``'scale'`` /
  ``'auto'`` resolved) and LIBSVM's ``linear`` / ``poly`` / ``rbf`` / ``sigmoid`` kernels; a
  ``precomputed`` or callable kernel is refused;
- regressors and OneClassSVM: ``K @ dual_coef_.T + intercept_``; OneClassSVM's label is ``1``
  where that is above 0, else ``-1``;
- classifiers: one LIBSVM decision value per pair of classes ``i < j`` (``K @ W + b``, ``W``
  laid out from ``dual_coef_`` as LIBSVM stores it), positive for class ``i``. The label is
  LIBSVM's one-vs-one vote (a pair's vote goes to ``i`` when its value is above 0, the first
  class wins a tie), or with ``break_ties=True`` the largest one-vs-rest score. Scores are
  ``decision_function``: ``[N, 2] = [-d, d]`` for two classes (the layout the other binary
  classifiers use: column ``c`` is class ``c``'s score), the ``[N, pairs]`` values for
  ``decision_function_shape='ovo'``, else scikit-learn's one-vs-rest transform (votes plus
  ``confidence / (3 (|confidence| + 1))``);
- probabilities (``probability=True``): each pair's Platt sigmoid of its decision value (from
  ``probA_`` / ``probB_``, clipped to ``[1e-7, 1 - 1e-7]``), coupled into class probabilities by
  LIBSVM's iterative method (``multiclass_probability``, also for two classes), replayed step by
  step in a ``Loop``: every row stops on its own once its error is below ``0.005 / k``, after at
  most ``max(100, k)`` rounds.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_classification, make_regression
from sklearn.svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM

from onnxbridge.convert._converters._graph import (
    Graph,
    LoopBody,
    add_loop,
    float_tensor_type,
    gather_labels,
    label_tensor_type,
)
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError

_KERNELS = ("linear", "poly", "rbf", "sigmoid")
_REPLACES = (
    "skl2onnx's SVMClassifier / SVMRegressor hold support vectors and coefficients as float32 "
    "attributes (results move on unscaled data, even in double precision), and its binary "
    "classifier scores are [d, -d] instead of [-d, d]"
)
# LIBSVM's bounds on a pairwise probability (svm_predict_probability's min_prob).
_MIN_PROB = 1e-7


def _support_vectors(model: Any) -> np.ndarray:
    vectors = model.support_vectors_
    if hasattr(vectors, "toarray"):  # fitted on sparse rows
        vectors = vectors.toarray()
    return np.asarray(vectors, dtype=np.float64)


def _gram(g: Graph, x: str, model: Any) -> str:
    """``[N, F] -> [N, M]``: LIBSVM's kernel between each row and each support vector."""
    kernel = model.kernel
    if callable(kernel) or kernel not in _KERNELS:
        shown = getattr(kernel, "__name__", kernel)
        raise ConversionError(
            f"{type(model).__name__}(kernel={shown!r}) cannot be converted: a graph holds the "
            f"support vectors, not the training rows a {shown!r} kernel needs; refit with one "
            f"of {', '.join(_KERNELS)}"
        )
    vectors = _support_vectors(model)
    # _gamma: the value fit resolved from 'scale' / 'auto' (the public gamma may be the word).
    return g.kernel(
        x,
        vectors,
        kernel,
        gamma=float(model._gamma),
        degree=float(model.degree),
        coef0=float(model.coef0),
        n_features=vectors.shape[1],
    )


def _start(g: Graph) -> tuple[str, int]:
    """The input as float64, with ``g`` switched to float64; the input's ONNX float type."""
    output_type = g.onnx_type
    x = g.node("Cast", [g.input], to=TensorProto.DOUBLE)
    g.dtype, g.onnx_type = np.float64, TensorProto.DOUBLE
    return x, output_type


def _single_decision(g: Graph, model: Any) -> tuple[str, int]:
    """``K @ dual_coef_.T + intercept_`` (``[N, 1]``, float64) and the output float type."""
    x, output_type = _start(g)
    gram = _gram(g, x, model)
    dual = np.asarray(model.dual_coef_, dtype=np.float64).reshape(1, -1).T
    return g.affine(gram, dual, np.asarray(model.intercept_, dtype=np.float64)), output_type


# -- regressors and OneClassSVM -------------------------------------------------------------


def _regressor_shape(operator: Any) -> None:
    operator.outputs[0].type = float_tensor_type(operator)([None, 1])


def _regressor_convert(scope: Any, operator: Any, container: Any) -> None:
    g = Graph(scope, operator, container)
    value, output_type = _single_decision(g, operator.raw_operator)
    g.node("Cast", [value], g.output(), to=output_type)


def _outlier_shape(operator: Any) -> None:
    from skl2onnx.common.data_types import Int64TensorType

    operator.outputs[0].type = Int64TensorType([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, 1])


def _outlier_convert(scope: Any, operator: Any, container: Any) -> None:
    g = Graph(scope, operator, container)
    decision, output_type = _single_decision(g, operator.raw_operator)
    inlier = g.node("Greater", [decision, g.const(0.0)])
    flat = g.node("Squeeze", [inlier, g.int64([1])])
    g.node("Where", [flat, g.int64(1), g.int64(-1)], g.output(0))
    g.node("Cast", [decision], g.output(1), to=output_type)


# -- classifiers ----------------------------------------------------------------------------


def _pairs(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """``W`` ``[M, pairs]`` and ``b`` ``[pairs]``: LIBSVM's decision value of each pair of
    classes ``i < j`` is ``K @ W + b``, positive for class ``i``.

    LIBSVM keeps pair ``(i, j)``'s coefficients of class ``i``'s support vectors in row
    ``j - 1`` of ``dual_coef_`` and those of class ``j``'s in row ``i``. For two classes
    scikit-learn shows ``dual_coef_`` and ``intercept_`` negated (so that its decision function
    is positive for the second class): LIBSVM's own are their negatives.
    """
    dual = np.asarray(model.dual_coef_, dtype=np.float64)
    intercept = np.asarray(model.intercept_, dtype=np.float64)
    counts = np.asarray(model.n_support_, dtype=np.int64)
    n_classes = len(counts)
    if n_classes == 2:
        return -dual.T, -intercept
    starts = np.concatenate([[0], np.cumsum(counts)])
    weights = np.zeros((dual.shape[1], n_classes * (n_classes - 1) // 2))
    pair = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            rows_i, rows_j = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            weights[rows_i, pair] = dual[j - 1, rows_i]
            weights[rows_j, pair] = dual[i, rows_j]
            pair += 1
    return weights, intercept


def _pair_members(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``[pairs, k]`` one-hot tables of each pair's first class ``i`` and second class ``j``."""
    pairs = [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]
    first = np.zeros((len(pairs), n_classes))
    second = np.zeros((len(pairs), n_classes))
    for p, (i, j) in enumerate(pairs):
        first[p, i] = 1.0
        second[p, j] = 1.0
    return first, second


def _votes(g: Graph, for_first: str, n_classes: int) -> str:
    """``[N, k]`` one-vs-one votes: a pair's vote goes to ``i`` where ``for_first``, else ``j``."""
    first, second = _pair_members(n_classes)
    to_first = g.node("Cast", [for_first], to=TensorProto.DOUBLE)
    to_second = g.node("Cast", [g.node("Not", [for_first])], to=TensorProto.DOUBLE)
    return g.node("Add", [g.matmul_const(to_first, first), g.matmul_const(to_second, second)])


def _ovr_scores(g: Graph, dec: str, n_classes: int) -> str:
    """scikit-learn's ``_ovr_decision_function(dec < 0, -dec, k)``: votes (``i`` wins where
    ``dec >= 0``) plus ``confidence / (3 (|confidence| + 1))``, a class's confidence being the
    sum of its pairs' values (taken positive for ``i``, negative for ``j``)."""
    first, second = _pair_members(n_classes)
    votes = _votes(g, g.node("Not", [g.node("Less", [dec, g.const(0.0)])]), n_classes)
    confidence = g.matmul_const(dec, first - second)
    scale = g.node(
        "Mul", [g.node("Add", [g.node("Abs", [confidence]), g.const(1.0)]), g.const(3.0)]
    )
    return g.node("Add", [votes, g.node("Div", [confidence, scale])])


def _column(body: Any, tensor: str, index: int) -> str:
    """``tensor[:, index:index + 1]`` inside a loop body (Gather: every opset has it)."""
    return body.node("Gather", [tensor, body.const(np.array([index]), dtype=np.int64)], axis=1)


def _pairwise_probabilities(g: Graph, dec: str, model: Any) -> str:
    """``[N, pairs]``: LIBSVM's ``sigmoid_predict`` of each pair's value, clipped.

    ``1 / (1 + exp(f))`` with ``f = dec * A + B``, written as ``exp(-f) / (1 + exp(-f))`` for
    ``f >= 0`` as LIBSVM does (no overflow, no cancellation).
    """
    with warnings.catch_warnings():
        # scikit-learn 1.9 deprecates probA_ / probB_ with probability=True; they are its model.
        warnings.simplefilter("ignore", FutureWarning)
        prob_a = np.asarray(model.probA_, dtype=np.float64).reshape(1, -1)
        prob_b = np.asarray(model.probB_, dtype=np.float64).reshape(1, -1)
    f = g.node("Add", [g.node("Mul", [dec, g.const(prob_a)]), g.const(prob_b)])
    one = g.const(1.0)
    non_negative = g.node("Not", [g.node("Less", [f, g.const(0.0)])])  # opsets < 12
    exp_neg = g.node("Exp", [g.node("Neg", [f])])
    high = g.node("Div", [exp_neg, g.node("Add", [one, exp_neg])])
    # Where evaluates both sides: exp(f) may overflow to inf on the rows it is not used for.
    low = g.node("Div", [one, g.node("Add", [one, g.node("Exp", [f])])])
    sigmoid = g.node("Where", [non_negative, high, low])
    return g.node("Min", [g.node("Max", [sigmoid, g.const(_MIN_PROB)]), g.const(1 - _MIN_PROB)])


def _coupled(g: Graph, pairwise: str, n_classes: int) -> str:
    """``[N, k]`` class probabilities from the pairwise ones: LIBSVM's
    ``multiclass_probability``, operation for operation, every row on its own."""
    k = n_classes
    # r[i][j] for i != j as [N, 1] columns: r[i][j] = pairwise, r[j][i] = 1 - pairwise.
    r: dict[tuple[int, int], str] = {}
    pair = 0
    for i in range(k):
        for j in range(i + 1, k):
            r[i, j] = g.node("Gather", [pairwise, g.int64([pair])], axis=1)
            r[j, i] = g.node("Sub", [g.const(1.0), r[i, j]])
            pair += 1
    # Q[t][t] = sum of r[j][t]^2 over j != t (in j order); Q[t][j] = -r[j][t] r[t][j].
    q_columns = []
    for t in range(k):
        for j in range(k):
            if j == t:
                total = g.const(np.zeros((1, 1)))
                for other in range(k):
                    if other != t:
                        total = g.node("Add", [total, g.node("Mul", [r[other, t], r[other, t]])])
                q_columns.append(total)
            else:
                q_columns.append(g.node("Neg", [g.node("Mul", [r[j, t], r[t, j]])]))
    # Broadcast the [1, 1] zeros of Q[t][t]'s start to [N, 1] before concatenating.
    rows = g.node("Mul", [r[0, 1], g.const(0.0)])
    q_flat = g.node("Concat", [g.node("Add", [c, rows]) for c in q_columns], axis=1)
    start = g.node("Add", [g.matmul_const(rows, np.zeros((1, k))), g.const(1.0 / k)])
    active = g.node("Add", [rows, g.const(1.0)])

    body = LoopBody(g.name("svm_coupling"), ["p", "active", "q"], g.opset)
    p_in, active_in, q_in = body.inputs
    p = [_column(body, p_in, t) for t in range(k)]
    q = [[_column(body, q_in, t * k + j) for j in range(k)] for t in range(k)]
    zero, one, two = body.const(0.0), body.const(1.0), body.const(2.0)
    qp = []
    for t in range(k):
        total = zero
        for j in range(k):
            total = body.node("Add", [total, body.node("Mul", [q[t][j], p[j]])])
        qp.append(total)
    pqp = zero
    for t in range(k):
        pqp = body.node("Add", [pqp, body.node("Mul", [p[t], qp[t]])])
    max_error = zero
    for t in range(k):
        max_error = body.node(
            "Max", [max_error, body.node("Abs", [body.node("Sub", [qp[t], pqp])])]
        )
    converged = body.node("Less", [max_error, body.const(0.005 / k)])
    still = body.node(
        "And", [body.node("Greater", [active_in, body.const(0.5)]), body.node("Not", [converged])]
    )
    for t in range(k):
        diff = body.node("Div", [body.node("Sub", [pqp, qp[t]]), q[t][t]])
        p[t] = body.node("Add", [p[t], diff])
        grow = body.node("Add", [one, diff])
        step = body.node(
            "Mul",
            [
                diff,
                body.node(
                    "Add", [body.node("Mul", [diff, q[t][t]]), body.node("Mul", [two, qp[t]])]
                ),
            ],
        )
        pqp = body.node("Div", [body.node("Div", [body.node("Add", [pqp, step]), grow]), grow])
        for j in range(k):
            qp[j] = body.node(
                "Div", [body.node("Add", [qp[j], body.node("Mul", [diff, q[t][j]])]), grow]
            )
            p[j] = body.node("Div", [p[j], grow])
    p_out = body.node("Where", [still, body.node("Concat", p, axis=1), p_in])
    still_f = body.node("Cast", [still], to=TensorProto.DOUBLE)
    any_left = body.node(
        "Greater", [body.node("ReduceMax", [still_f], keepdims=0), body.const(0.5)]
    )
    final, _, _ = add_loop(
        g,
        body,
        max(100, k),
        [start, active, q_flat],
        any_left,
        [p_out, still_f, body.node("Identity", [q_in])],
    )
    return final


def _has_probabilities(model: Any) -> bool:
    # scikit-learn 1.9 writes probability="deprecated" by default: ask predict_proba instead.
    return hasattr(model, "predict_proba")


def _classifier_shape(operator: Any) -> None:
    model = operator.raw_operator
    n_classes = len(model.classes_)
    if _has_probabilities(model) or n_classes == 2 or model.decision_function_shape != "ovo":
        width = n_classes
    else:
        width = n_classes * (n_classes - 1) // 2
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, width])


def _classifier_convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    if scope.get_options(model, {"nocl": False})["nocl"]:
        # Declared only because skl2onnx asks every classifier for it; labels are the classes.
        raise ConversionError(
            f"{type(model).__name__}'s converter writes the class labels; the option nocl=True "
            "(class indices) is not supported: drop it"
        )
    classes = np.asarray(model.classes_)
    n_classes = len(classes)
    g = Graph(scope, operator, container)
    x, output_type = _start(g)
    weights, intercept = _pairs(model)
    dec = g.affine(_gram(g, x, model), weights, intercept)  # [N, pairs], LIBSVM's sign
    ovr = n_classes > 2 and model.decision_function_shape == "ovr"
    if model.break_ties and ovr:
        index = g.node("ArgMax", [_ovr_scores(g, dec, n_classes)], axis=1, keepdims=0)
    else:
        votes = _votes(g, g.node("Greater", [dec, g.const(0.0)]), n_classes)
        index = g.node("ArgMax", [votes], axis=1, keepdims=0)  # first class on a tie
    gather_labels(g, index, classes, type(model).__name__, g.output(0))
    if _has_probabilities(model):
        second = _coupled(g, _pairwise_probabilities(g, dec, model), n_classes)
    elif n_classes == 2:
        second = g.node("Concat", [dec, g.node("Neg", [dec])], axis=1)  # [-d, d]
    elif ovr:
        second = _ovr_scores(g, dec, n_classes)
    else:
        second = dec
    g.node("Cast", [second], g.output(1), to=output_type)


# -- examples and registration --------------------------------------------------------------


def _classifier_data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=120, n_features=5, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    return X * 40.0 + 100.0, y  # unscaled, as users' data often is


def _svc_example() -> tuple[Any, Any]:
    X, y = _classifier_data()
    return SVC(kernel="linear").fit(X, y), X


def _nusvc_example() -> tuple[Any, Any]:
    X, y = _classifier_data()
    return NuSVC(nu=0.3, gamma="scale").fit(X, y), X


def _regression_data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(n_samples=80, n_features=4, noise=5.0, random_state=0)
    return X, y / 50.0


def _svr_example() -> tuple[Any, Any]:
    X, y = _regression_data()
    return SVR(kernel="rbf", C=5.0).fit(X, y), X


def _nusvr_example() -> tuple[Any, Any]:
    X, y = _regression_data()
    return NuSVR(kernel="poly", degree=2).fit(X, y), X


def _one_class_example() -> tuple[Any, Any]:
    X, _ = _regression_data()
    return OneClassSVM(nu=0.2).fit(X), X


_CLASSIFIER_OPTIONS: dict[str, list[Any]] = {
    "zipmap": [False, True, "columns"],
    "nocl": [False, True],
}

for _estimator, _example in ((SVC, _svc_example), (NuSVC, _nusvc_example)):
    register_converter(
        ConverterSpec(
            _estimator,
            _classifier_shape,
            _classifier_convert,
            _example,
            replaces=_REPLACES,
            options=_CLASSIFIER_OPTIONS,
        )
    )
for _estimator, _example in ((SVR, _svr_example), (NuSVR, _nusvr_example)):
    register_converter(
        ConverterSpec(
            _estimator, _regressor_shape, _regressor_convert, _example, replaces=_REPLACES
        )
    )
register_converter(
    ConverterSpec(
        OneClassSVM, _outlier_shape, _outlier_convert, _one_class_example, replaces=_REPLACES
    )
)
