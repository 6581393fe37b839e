"""Shared check for the converter-family tests: convert, run in ONNX Runtime, compare."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from onnxbridge import Predictor, convert_estimator
from onnxbridge._meta import role_parts
from onnxbridge.convert import expected_outputs

# The common test's tolerances: float32 keeps about 7 digits, float64 far more.
TOLERANCE = {"float": 1e-4, "double": 1e-7}


def _check(estimator: Any, X: Any, precision: str = "double") -> dict[str, np.ndarray]:
    # The family tests judge with their own tolerances on X (float32: 1e-4); convert's own
    # check (validate's 1e-5, probe rows) is tested in tests/convert/test_convert.py.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = convert_estimator(estimator, X[:20], precision=precision, allow_divergent=True)
    predictor = Predictor(result.model.SerializeToString())
    raw = predictor.run(predictor.prepare(X))
    by_name = dict(zip([o.name for o in predictor.outputs], raw, strict=True))
    got = {role: np.asarray(by_name[name]) for role, name in result.metadata.outputs.items()}
    expected = expected_outputs(estimator, X, result.metadata.outputs, like=got)
    tol = TOLERANCE[precision]
    for role, value in got.items():
        if role_parts(role)[0] == "label":  # label, or label_<t> of a multi-output model
            np.testing.assert_array_equal(value, expected[role], err_msg=role)
        else:
            np.testing.assert_allclose(value, expected[role], atol=tol, rtol=tol, err_msg=role)
    return got


@pytest.fixture
def assert_converts() -> Callable[..., dict[str, np.ndarray]]:
    """``f(estimator, X, precision="double")``: the ONNX outputs, after checking them
    against scikit-learn (labels equal, floats within the common test's tolerance)."""
    return _check
