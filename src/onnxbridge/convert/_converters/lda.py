"""LatentDirichletAllocation: the topic distribution of each document (``transform``).

skl2onnx has no converter. ``[N, words] -> transformed [N, topics]``, in float64 whatever the
input precision (the output is cast back). As scikit-learn's variational E-step: every document
starts from ``doc_topic = 1``; each iteration sets
``doc_topic = exp_doc_topic * ((X / (exp_doc_topic @ exp_dirichlet_component_ + eps)) @
exp_dirichlet_component_.T) + doc_topic_prior`` and
``exp_doc_topic = exp(psi(doc_topic) - psi(sum(doc_topic)))``, and a document stops once the mean
absolute change of its ``doc_topic`` is below ``mean_change_tol`` (or after
``max_doc_update_iter``). The graph runs all documents in one ``Loop``, a document frozen once it
has converged, until none is left. ``psi`` is scikit-learn's own digamma (shift to ``x >= 6``, then
its four-term asymptotic series; ONNX has no digamma), so the values match it, not scipy's. The
result is normalised per document, as ``transform(normalize=True)`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from sklearn.decomposition import LatentDirichletAllocation

from onnxbridge.convert._converters._graph import Graph, LoopBody, add_loop, set_float_output
from onnxbridge.convert._registry import ConverterSpec, register_converter

_EULER = 0.577215664901532860606512090082402431


def _psi_numpy(x: float) -> float:
    """scikit-learn's digamma (``_online_lda_fast.psi``), for the constants."""
    if x <= 1e-6:
        return -_EULER - 1.0 / x
    result = 0.0
    while x < 6:
        result -= 1.0 / x
        x += 1
    r = 1.0 / x
    result += np.log(x) - 0.5 * r
    r = r * r
    result -= r * ((1.0 / 12.0) - r * ((1.0 / 120.0) - r * (1.0 / 252.0)))
    return float(result)


def _psi(body: LoopBody, x: str) -> str:
    """scikit-learn's digamma on a tensor: at most 6 shifts by one, then the series."""
    result = body.const(0.0)
    shifted = x
    for _ in range(6):
        small = body.node("Less", [shifted, body.const(6.0)])
        reciprocal = body.node("Div", [body.const(1.0), shifted])
        result = body.node("Where", [small, body.node("Sub", [result, reciprocal]), result])
        shifted = body.node("Where", [small, body.node("Add", [shifted, body.const(1.0)]), shifted])
    r = body.node("Div", [body.const(1.0), shifted])
    head = body.node("Sub", [body.node("Log", [shifted]), body.node("Mul", [r, body.const(0.5)])])
    result = body.node("Add", [result, head])
    r2 = body.node("Mul", [r, r])
    inner = body.node(
        "Sub", [body.const(1.0 / 120.0), body.node("Mul", [r2, body.const(1.0 / 252.0)])]
    )
    middle = body.node("Sub", [body.const(1.0 / 12.0), body.node("Mul", [r2, inner])])
    result = body.node("Sub", [result, body.node("Mul", [r2, middle])])
    tiny = body.node("LessOrEqual", [x, body.const(1e-6)])
    pole = body.node("Sub", [body.const(-_EULER), body.node("Div", [body.const(1.0), x])])
    return body.node("Where", [tiny, pole, result])


def _shape(operator: Any) -> None:
    set_float_output(operator, 0, [None, operator.raw_operator.components_.shape[0]])


def _convert(scope: Any, operator: Any, container: Any) -> None:
    model = operator.raw_operator
    g = Graph(scope, operator, container)
    output_type = g.onnx_type
    x = g.node("Cast", [g.input], to=TensorProto.DOUBLE)
    g.dtype, g.onnx_type = np.float64, TensorProto.DOUBLE  # float64 from here on
    topic_word = np.asarray(model.exp_dirichlet_component_, dtype=np.float64)  # [K, V]
    n_topics = topic_word.shape[0]
    prior = float(model.doc_topic_prior_)
    eps = float(np.finfo(np.float64).eps)
    # Start: doc_topic = 1, exp_doc_topic = exp(psi(1) - psi(K)) for every document.
    zeros = g.matmul_const(x, np.zeros((topic_word.shape[1], n_topics)))
    ones = g.node("Add", [zeros, g.const(1.0)])  # [N, K]
    start = float(np.exp(_psi_numpy(1.0) - _psi_numpy(float(n_topics))))
    exp_start = g.node("Mul", [ones, g.const(start)])
    # Which documents still iterate, carried as 1.0 / 0.0 (Loop carries the same type here).
    active0 = g.node("Slice", [ones, g.int64([0]), g.int64([1]), g.int64([1])])

    body = LoopBody(g.name("lda_e_step"), ["doc_topic", "exp_doc_topic", "active", "x"], g.opset)
    doc_topic, exp_doc, active_f, x_in = body.inputs
    norm_phi = body.node(
        "Add", [body.node("MatMul", [exp_doc, body.const(topic_word)]), body.const(eps)]
    )
    weighted = body.node("MatMul", [body.node("Div", [x_in, norm_phi]), body.const(topic_word.T)])
    new_doc = body.node("Add", [body.node("Mul", [exp_doc, weighted]), body.const(prior)])
    axis_1 = body.const(np.array([1]), dtype=np.int64)
    total = body.node("ReduceSum", [new_doc, axis_1], keepdims=1)
    new_exp = body.node("Exp", [body.node("Sub", [_psi(body, new_doc), _psi(body, total)])])
    change = body.node(
        "ReduceMean",
        [body.node("Abs", [body.node("Sub", [doc_topic, new_doc])]), axis_1],
        keepdims=1,
    )
    active = body.node("Greater", [active_f, body.const(0.5)])
    doc_out = body.node("Where", [active, new_doc, doc_topic])
    exp_out = body.node("Where", [active, new_exp, exp_doc])
    still = body.node(
        "And", [active, body.node("GreaterOrEqual", [change, body.const(model.mean_change_tol)])]
    )
    still_f = body.node("Cast", [still], to=TensorProto.DOUBLE)
    any_left = body.node(
        "Greater", [body.node("ReduceMax", [still_f], keepdims=0), body.const(0.5)]
    )
    outputs = [doc_out, exp_out, still_f, body.node("Identity", [x_in])]
    final, _, _, _ = add_loop(
        g, body, int(model.max_doc_update_iter), [ones, exp_start, active0, x], any_left, outputs
    )
    total_out = g.node("ReduceSum", [final, g.int64([1])], keepdims=1)
    g.node("Cast", [g.node("Div", [final, total_out])], g.output(), to=output_type)


def _example() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    topics = rng.dirichlet(np.full(12, 0.3), size=3)  # 3 topics over 12 words
    mix = rng.dirichlet(np.full(3, 0.5), size=80)
    counts = np.vstack([rng.multinomial(30, m @ topics) for m in mix]).astype(float)
    model = LatentDirichletAllocation(n_components=3, random_state=0, max_iter=20)
    return model.fit(counts), counts


register_converter(ConverterSpec(LatentDirichletAllocation, _shape, _convert, _example))
