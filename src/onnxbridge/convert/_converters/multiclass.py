"""OutputCodeClassifier: error-correcting output codes.

skl2onnx has no converter for it. As scikit-learn's ``predict``: every binary estimator gives a
score (``decision_function``, else ``predict_proba[:, 1]``),
``Y[N, E]``; the label is the class whose row of ``code_book_`` is nearest (euclidean, first on
ties): ``classes_[argmin_c ||Y - code_book_[c]||]``. Scores and distances are compared in
float64.

OutputCodeClassifier has only ``predict``, so the graph's one role is ``label``; its second
output holds ``Y`` (for inspection, nothing in scikit-learn returns it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OutputCodeClassifier, _ConstantPredictor

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, accepts_option, register_converter
from onnxbridge.errors import ConversionError


def _final(estimator: Any) -> Any:
    while hasattr(estimator, "steps"):
        estimator = estimator.steps[-1][1]
    return estimator


def _score(g: Nodes, estimator: Any, x: Any, hint: str) -> str:
    """``[N, 1]`` float64 score of one binary estimator, as ``_predict_binary``."""
    if isinstance(estimator, _ConstantPredictor):
        column = g.op(
            "ReduceSum",
            [
                g.op("Mul", [g.cast_float(x.full_name), g.const(np.array(0.0))]),
                g.const(np.array([1])),
            ],
            keepdims=1,
        )
        column = g.op("Add", [column, g.const(np.array(float(np.ravel(estimator.y_)[0])))])
        return g.op("Cast", [column], to=TensorProto.DOUBLE)
    final = _final(estimator)
    if hasattr(estimator, "decision_function"):
        if hasattr(estimator, "predict_proba"):
            if not accepts_option(final, "raw_scores"):
                raise ConversionError(
                    f"OutputCodeClassifier: the decision_function of the inner "
                    f"{type(final).__name__} cannot be converted (its converter gives only "
                    "probabilities); use an estimator whose converter has raw_scores "
                    "(linear models) or one without predict_proba"
                )
            _, second = g.sub_estimator(estimator, [x], 2, hint, options={"raw_scores": True})
        else:
            _, second = g.sub_estimator(estimator, [x], 2, hint)
        # Binary decision scores come as [N, 1] = d or [N, 2] = [-d, d]: d is the last column.
        column = g.op("Gather", [second, g.const(np.array([-1]))], axis=1)
    else:
        _, second = g.sub_estimator(estimator, [x], 2, hint)
        column = g.column(second, 1)
    return g.op("Cast", [column], to=TensorProto.DOUBLE)


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    operator.outputs[1].type = float_tensor_type(operator)([None, len(model.estimators_)])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    x = operator.inputs[0]
    scores = [_score(g, e, x, f"code{i}") for i, e in enumerate(model.estimators_)]
    codes = scores[0] if len(scores) == 1 else g.op("Concat", scores, axis=1)  # [N, E]
    book = np.asarray(model.code_book_, dtype=np.float64)
    diff = g.op(
        "Sub",
        [
            g.op("Unsqueeze", [codes, g.const(np.array([1]))]),
            g.const(book[np.newaxis], dtype=np.float64),
        ],
    )
    squared = g.op("ReduceSumSquare", [diff, g.const(np.array([2]))], keepdims=0)  # [N, C]
    nearest = g.op("ArgMin", [squared], axis=1, keepdims=0, select_last_index=0)
    g.labels(model.classes_, nearest, output=operator.outputs[0].full_name)
    g.op("Cast", [codes], output=operator.outputs[1].full_name, to=g.onnx_float)


def _example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=150, n_features=5, n_informative=4, n_redundant=0, n_classes=4, random_state=0
    )
    model = OutputCodeClassifier(LogisticRegression(), code_size=2.0, random_state=0)
    return model.fit(X, y), X


register_converter(
    ConverterSpec(
        OutputCodeClassifier,
        _shape,
        _convert,
        _example,
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
