"""TunedThresholdClassifierCV and FixedThresholdClassifier: a binary classifier with its own
decision threshold.

skl2onnx converts TunedThresholdClassifierCV as its inner estimator and ignores
``best_threshold_`` (on realistic data ~1-6 % of the labels differ); FixedThresholdClassifier has no
converter. As scikit-learn's ``predict``:

- ``score[N]`` = the inner estimator's ``predict_proba`` column of the positive class, or its
  ``decision_function`` (negated when the positive class is ``classes_[0]``), whichever
  ``response_method`` picks (``"auto"``: ``predict_proba`` first);
- ``label = classes_[pos]`` where ``score >= threshold`` else ``classes_[neg]`` (threshold:
  ``best_threshold_``; FixedThresholdClassifier's ``"auto"`` is 0.5 for probabilities, 0 for
  decision scores).

The second output is the inner estimator's ``predict_proba`` (or its decision scores when it has
none), as the wrapper's ``predict_proba`` / ``decision_function`` return.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter
from onnxbridge.errors import ConversionError


def _response_method(model: Any) -> str:
    """The inner method scikit-learn calls for the score."""
    inner = model.estimator_
    wanted = model.response_method
    candidates = ["predict_proba", "decision_function"] if wanted == "auto" else [wanted]
    if isinstance(wanted, list | tuple):
        candidates = list(wanted)
    for method in candidates:
        if hasattr(inner, method):
            return method
    raise ConversionError(
        f"{type(model).__name__}(response_method={wanted!r}): the inner "
        f"{type(inner).__name__} has none of {candidates}; use a classifier with "
        "predict_proba or decision_function"
    )


def _pos_label(model: Any) -> Any:
    """The positive label as scikit-learn's predict sees it (None: classes_[1])."""
    if isinstance(model, TunedThresholdClassifierCV):
        return model._curve_scorer._get_pos_label()
    return model.pos_label


def _threshold(model: Any, method: str) -> float:
    if isinstance(model, TunedThresholdClassifierCV):
        return float(model.best_threshold_)
    if model.threshold == "auto":
        return 0.5 if method == "predict_proba" else 0.0
    return float(model.threshold)


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    width = 2 if _response_method(model) == "predict_proba" else 1
    operator.outputs[1].type = float_tensor_type(operator)([None, width])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    classes = np.asarray(model.classes_)
    g = Nodes(scope, operator, container)
    method = _response_method(model)
    pos_label = _pos_label(model)
    scoring_pos = classes[-1] if pos_label is None else pos_label
    pos_index = int(np.flatnonzero(classes == scoring_pos)[0])
    _, second = g.classifier_outputs(model.estimator_, [operator.inputs[0]], hint="inner")
    if method == "predict_proba":
        score = g.column(second, pos_index)
        g.identity(second, operator.outputs[1].full_name)
    else:
        # Binary decision scores come as [N, 1] = d or [N, 2] = [-d, d]: d is the last column.
        last = g.op("Gather", [second, g.const(np.array([-1]))], axis=1)
        score = g.op("Neg", [last]) if pos_index == 0 else last
        g.identity(last, operator.outputs[1].full_name)
    above = g.op("GreaterOrEqual", [score, g.const(np.array(_threshold(model, method)))])
    above = g.op("Cast", [g.op("Squeeze", [above, g.const(np.array([1]))])], to=7)
    if pos_label is None:
        mapping = np.array([0, 1])
    else:
        mapping = np.array([int(np.flatnonzero(classes != pos_label)[0]), pos_index])
    index = g.op("Gather", [g.const(mapping), above], axis=0)
    g.labels(classes, index, output=operator.outputs[0].full_name)


def _data() -> tuple[np.ndarray, np.ndarray]:
    return make_classification(
        n_samples=300, n_features=6, n_informative=4, weights=[0.8, 0.2], random_state=0
    )


def _tuned_example() -> tuple[Any, Any]:
    X, y = _data()
    model = TunedThresholdClassifierCV(LogisticRegression(), random_state=0)
    return model.fit(X, y), X


def _fixed_example() -> tuple[Any, Any]:
    X, y = _data()
    return FixedThresholdClassifier(LogisticRegression(), threshold=0.3).fit(X, y), X


_OPTIONS: dict[str, list[Any]] = {"zipmap": [False, True, "columns"], "nocl": [False, True]}
register_converter(
    ConverterSpec(
        TunedThresholdClassifierCV,
        _shape,
        _convert,
        _tuned_example,
        replaces="skl2onnx converts the inner estimator and ignores best_threshold_, so "
        "labels differ wherever the tuned threshold is not the default one",
        options=_OPTIONS,
    )
)
register_converter(
    ConverterSpec(FixedThresholdClassifier, _shape, _convert, _fixed_example, options=_OPTIONS)
)
