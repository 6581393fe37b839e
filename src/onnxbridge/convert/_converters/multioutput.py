"""MultiOutputClassifier and ClassifierChain: one label and one probability output per target.

scikit-learn's ``predict`` gives ``[N, T]`` labels, one column per target; ``predict_proba`` gives
a list of ``[N, C_t]`` (MultiOutputClassifier) or the positive class's ``[N, T]``
(ClassifierChain). The graph has, for each target ``t`` in target order, an output
``label_<t>`` ``[N]`` (the target's class labels, int64 or string) and an output
``probabilities_<t>`` ``[N, C_t]`` (in ``classes_[t]`` order), so each target reads like a
single classifier and targets may have different classes or label types. skl2onnx's own
converter of MultiOutputClassifier concatenates the labels into one tensor (all targets must share
one label type) and returns probabilities as a sequence, which a tensor protocol cannot send:
it is replaced.

ClassifierChain, as scikit-learn's ``_get_predictions``: link ``k`` predicts target
``order_[k]`` from ``[X, f_0, ..., f_{k-1}]`` where ``f_j`` is link ``j``'s ``chain_method_``
response: its label (``predict``), its positive-class probability (``predict_proba``), that
probability's log (``predict_log_proba``) or its decision function (``decision_function``: the
inner converter's raw scores, for the estimators whose converter has ``raw_scores``, such as
linear models). Inner estimators are converted by their own converters.

Estimators without ``predict_proba`` (every inner one must have it) get label outputs only.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import ClassifierChain, MultiOutputClassifier

from onnxbridge._meta import target_role
from onnxbridge.convert._converters._meta import Nodes, float_tensor_type, label_tensor_type
from onnxbridge.convert._registry import ConverterSpec, accepts_option, register_converter
from onnxbridge.errors import ConversionError

_CHAIN_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function")


def _has_proba(model: Any) -> bool:
    # available_if: the attribute exists only when every inner estimator has predict_proba.
    return hasattr(model, "predict_proba")


def _parser(scope: Any, model: Any, inputs: list[Any], custom_parsers: Any = None) -> list[Any]:
    """Declare ``label_<t>`` (and ``probabilities_<t>``) for every target, in target order."""
    from skl2onnx._supported_operators import get_model_alias
    from skl2onnx.common.data_types import guess_tensor_type

    operator = scope.declare_local_operator(get_model_alias(type(model)), model)
    operator.inputs = inputs
    for t, classes in enumerate(model.classes_):
        label = target_role("label", t)
        operator.outputs.append(scope.declare_local_variable(label, label_tensor_type(classes)()))
        if _has_proba(model):
            proba = target_role("probabilities", t)
            kind = guess_tensor_type(inputs[0].type)
            operator.outputs.append(scope.declare_local_variable(proba, kind))
    return operator.outputs


def _shape(operator: Any) -> None:
    model = operator.raw_operator
    step = 2 if _has_proba(model) else 1
    for t, classes in enumerate(model.classes_):
        operator.outputs[step * t].type = label_tensor_type(classes)([None])
        if step == 2:
            operator.outputs[step * t + 1].type = float_tensor_type(operator)([None, len(classes)])


def _write_target(g: Nodes, t: int, label: str, proba: str) -> None:
    """Name target ``t``'s label and probabilities as the graph's outputs."""
    operator = g.operator
    step = 2 if _has_proba(operator.raw_operator) else 1
    g.identity(label, operator.outputs[step * t].full_name)
    if step == 2:
        g.identity(proba, operator.outputs[step * t + 1].full_name)


def _convert_multi_output(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Nodes(scope, operator, container)
    x = operator.inputs[0]
    for t, estimator in enumerate(model.estimators_):
        label, proba = g.classifier_outputs(estimator, [x], hint=f"target{t}")
        _write_target(g, t, label, proba)


def _check_chain(model: Any) -> str:
    method = getattr(model, "chain_method_", "predict")
    if method == "decision_function":
        for estimator in model.estimators_:
            final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
            if hasattr(estimator, "predict_proba") and not accepts_option(final, "raw_scores"):
                raise ConversionError(
                    f"ClassifierChain(chain_method='decision_function'): the decision function "
                    f"of the inner {type(final).__name__} cannot be converted (its converter "
                    "gives probabilities only); fit the chain with chain_method='predict_proba' "
                    "or 'predict', or with a linear inner model"
                )
    for t, classes in enumerate(model.classes_):
        values = np.asarray(classes)
        if method not in ("predict", "decision_function") and len(values) != 2:
            raise ConversionError(
                f"ClassifierChain(chain_method={method!r}): target {t} has {len(values)} "
                "classes; a chain fed probabilities needs binary targets (scikit-learn feeds "
                "the positive class's probability)"
            )
    return method


def _convert_chain(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    method = _check_chain(model)
    g = Nodes(scope, operator, container)
    x = g.cast_float(operator.inputs[0].full_name)
    n_features = int(model.n_features_in_)
    fed: list[str] = []  # what each link adds to the next links' features, [N, 1]
    by_target: dict[int, tuple[str, str]] = {}
    for k, estimator in enumerate(model.estimators_):
        features = g.op("Concat", [x, *fed], axis=1) if fed else x
        variable = (features, g.float_type([None, n_features + k]))
        label, proba = g.classifier_outputs(estimator, [variable], hint=f"link{k}")
        by_target[int(model.order_[k])] = (label, proba)
        if method == "predict":
            response = g.op("Reshape", [g.cast_float(label), g.const(np.array([-1, 1]))])
        elif method == "decision_function":
            response = _decision(g, estimator, variable, k)
        else:
            response = g.column(proba, 1)  # the positive class, classes_[-1]
            if method == "predict_log_proba":
                response = g.op("Log", [response])
        fed.append(response)
    for t in range(len(model.estimators_)):
        _write_target(g, t, *by_target[t])


def _decision(g: Nodes, estimator: Any, variable: Any, k: int) -> str:
    """``[N, 1]`` decision function of a binary link (``[N, 1] = d`` or ``[N, 2] = [-d, d]``
    from the converter: ``d`` is the last column)."""
    options = {"raw_scores": True} if hasattr(estimator, "predict_proba") else None
    # skl2onnx keeps options per estimator object: a copy (with its own pipeline steps) gets
    # raw scores without turning the link's probabilities into scores too.
    scorer = copy.deepcopy(estimator) if options else estimator
    _, scores = g.sub_estimator(scorer, [variable], 2, f"link{k}_scores", options=options)
    column = g.op("Gather", [scores, g.const(np.array([-1]))], axis=1)
    return g.cast_float(column)


def _multilabel() -> tuple[np.ndarray, np.ndarray]:
    return make_multilabel_classification(n_samples=150, n_features=5, n_classes=3, random_state=0)


def _example_multi_output() -> tuple[Any, Any]:
    X, Y = _multilabel()
    # Targets with their own class names and counts: what one label tensor cannot hold.
    targets = np.column_stack(
        [
            np.where(Y[:, 0] == 1, "yes", "no"),
            np.array(["low", "mid", "high"])[Y[:, 1] + Y[:, 2]],
            np.where(Y[:, 2] == 1, "on", "off"),
        ]
    )
    model = MultiOutputClassifier(LogisticRegression(max_iter=500))
    return model.fit(X, targets), X


def _example_chain() -> tuple[Any, Any]:
    X, Y = _multilabel()
    model = ClassifierChain(LogisticRegression(max_iter=500), order=[2, 0, 1])
    return model.fit(X, Y), X


_REPLACES = (
    "skl2onnx's MultiOutputClassifier converter puts every target's labels in one tensor (one "
    "label type for all) and the probabilities in a sequence; onnxbridge gives one label and "
    "one probability tensor per target"
)
_OPTIONS = {"zipmap": [False]}  # probabilities are tensors, one per target

register_converter(
    ConverterSpec(
        MultiOutputClassifier,
        _shape,
        _convert_multi_output,
        _example_multi_output,
        replaces=_REPLACES,
        parser=_parser,
        options=_OPTIONS,
    )
)
register_converter(
    ConverterSpec(
        ClassifierChain,
        _shape,
        _convert_chain,
        _example_chain,
        parser=_parser,
        options=_OPTIONS,
    )
)
