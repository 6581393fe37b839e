"""The own converters also build for older default-domain opsets a user may pin (the reference
workflow uses 15): axes move from inputs to attributes where the older operators want them."""

from __future__ import annotations

import numpy as np
import pytest

from onnxbridge import Predictor, convert_estimator
from onnxbridge.convert import expected_outputs, find_converter, registered_converters

# One estimator per family, covering every operator whose signature changed after opset 13.
FAMILIES = [
    "SplineTransformer",  # ReduceSum, Unsqueeze, Mod
    "Isomap",  # ReduceMin, ReduceSumSquare, TopK
    "NMF",  # Loop
    "MiniBatchNMF",  # ReduceMean
    "RandomTreesEmbedding",  # Shape(start, end), ScatterElements
    "BisectingKMeans",
    "LocallyLinearEmbedding",
    "KernelRidge",
    "LatentDirichletAllocation",  # Loop body with ReduceMean / ReduceMax
    "DictionaryLearning",  # ReduceMax
    "SimpleImputer",  # text: Equal takes strings from opset 19 only
    "KNNImputer",  # TopK, ReduceSum, ReduceMax
]


def _spec(name: str):
    return next(s for s in registered_converters() if s.name == name)


@pytest.mark.parametrize("opset", [13, 15])
@pytest.mark.parametrize("name", FAMILIES)
def test_older_opset(name: str, opset: int) -> None:
    spec = _spec(name)
    estimator, X = spec.example()
    assert find_converter(estimator) is spec
    result = convert_estimator(estimator, X[:20], opset=opset, precision="double")
    assert result.metadata.opsets[""] <= opset
    predictor = Predictor(result.model.SerializeToString())
    outputs = predictor.run(predictor.prepare(X))
    raw = dict(zip([o.name for o in predictor.outputs], outputs, strict=True))
    got = {role: np.asarray(raw[out]) for role, out in result.metadata.outputs.items()}
    expected = expected_outputs(estimator, X, result.metadata.outputs, like=got)
    for role, value in got.items():
        if value.dtype.kind == "O":  # text (SimpleImputer on text columns)
            np.testing.assert_array_equal(value, np.asarray(expected[role]), err_msg=role)
        else:
            np.testing.assert_allclose(value, expected[role], rtol=1e-7, atol=1e-7, err_msg=role)
