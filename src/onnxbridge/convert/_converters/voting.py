"""VotingClassifier, soft and hard, whatever ``flatten_transform`` says.

skl2onnx refuses soft voting with ``flatten_transform=True``, scikit-learn's default, although
that parameter only shapes ``transform()``, never ``predict`` or ``predict_proba``. Here:

- soft: ``probabilities[N, C] = sum_i w_i * p_i / sum_i w_i`` (``np.average`` over the fitted
  estimators, dropped ones excluded), ``label = classes_[argmax]``;
- hard: every inner estimator votes for its label (the inner models were fitted on class
  indices ``0..C-1``), ``label = classes_[argmax(sum_i w_i * onehot(label_i))]`` (ties go to the
  lowest index, as ``np.argmax(np.bincount(...))``), and the second output is ``transform()``:
  the per-estimator class indices ``[N, E]`` as floats.

Every inner estimator is converted by its own converter (``OnnxSubEstimator``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import VotingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, register_converter


def _weights(model: Any) -> np.ndarray:
    weights = model._weights_not_none
    if weights is None:
        return np.ones(len(model.estimators_))
    return np.asarray(weights, dtype=np.float64)


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    operator.outputs[0].type = label_tensor_type(model.classes_)([None])
    width = len(model.classes_) if model.voting == "soft" else len(model.estimators_)
    operator.outputs[1].type = float_tensor_type(operator)([None, width])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    x = operator.inputs[0]
    weights = _weights(model)
    n_classes = len(model.classes_)
    terms: list[str] = []
    labels: list[str] = []
    for i, (estimator, weight) in enumerate(zip(model.estimators_, weights, strict=True)):
        label, proba = g.classifier_outputs(estimator, [x], hint=f"voter{i}")
        if model.voting == "soft":
            terms.append(g.op("Mul", [proba, g.const(np.array(weight / weights.sum()))]))
        else:
            index = g.op("Cast", [label], to=7)  # the inner labels are 0..C-1 already
            labels.append(g.op("Unsqueeze", [index, g.const(np.array([1]))]))
            onehot = g.onehot(index, n_classes)
            terms.append(g.op("Mul", [onehot, g.const(np.array(weight))]))
    total = terms[0] if len(terms) == 1 else g.op("Sum", terms)
    g.labels(model.classes_, g.argmax(total), output=operator.outputs[0].full_name)
    if model.voting == "soft":
        g.identity(total, operator.outputs[1].full_name)
    else:
        joined = labels[0] if len(labels) == 1 else g.op("Concat", labels, axis=1)
        g.op("Cast", [joined], output=operator.outputs[1].full_name, to=g.onnx_float)


def _example() -> tuple[Any, Any]:
    X, y = make_classification(
        n_samples=150, n_features=5, n_informative=4, n_redundant=0, n_classes=3, random_state=0
    )
    model = VotingClassifier(
        [
            ("lr", LogisticRegression()),
            ("nb", GaussianNB()),
            ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
        ],
        voting="soft",
        weights=[2, 1, 1],
    )
    return model.fit(X, y), X


register_converter(
    ConverterSpec(
        VotingClassifier,
        _shape,
        _convert,
        _example,
        replaces="skl2onnx refuses soft voting with flatten_transform=True (scikit-learn's "
        "default), a parameter that only shapes transform(), not predictions",
        options={"zipmap": [False, True, "columns"], "nocl": [False, True]},
    )
)
