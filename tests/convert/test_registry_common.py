"""One battery of checks over every converter onnxbridge registers (as scikit-learn's
``parametrize_with_checks`` does over estimators): batch sizes 1 and N, float32 and float64 input,
output roles and dtypes, equivalence with scikit-learn."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from onnxbridge import Predictor, convert_estimator
from onnxbridge._meta import role_parts
from onnxbridge.convert import expected_outputs, registered_converters

# Float32 graphs that differ from scikit-learn on purpose: convert returns them only with
# allow_divergent, and warns.
pytestmark = pytest.mark.filterwarnings("ignore:NOT CHECKED:UserWarning")


SPECS = registered_converters()
# float32 arithmetic keeps about 7 digits; float64 graphs should agree to far more.
TOLERANCE = {"float": (1e-4, 1e-4), "double": (1e-7, 1e-7)}
ROLE_KINDS = {
    "label": "iuO",
    "probabilities": "f",
    "scores": "f",
    "value": "f",
    "transformed": "fO",
    "indices": "i",
    "distances": "f",
}


def test_registry_is_not_empty() -> None:
    assert len(SPECS) > 0


def _rows(X, n: int):
    return X.iloc[:n] if isinstance(X, pd.DataFrame) else np.asarray(X)[:n]


@pytest.mark.parametrize("precision", ["float", "double"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_converter(spec, precision: str) -> None:
    estimator, X = spec.example()
    # This test judges with its own tolerances (float32: 1e-4), on the example's rows only.
    result = convert_estimator(estimator, _rows(X, 20), precision=precision, allow_divergent=True)
    assert result.precision == precision
    predictor = Predictor(result.model.SerializeToString())
    expected_dtype = np.float64 if precision == "double" else np.float32
    feeds = predictor.prepare(_rows(X, 3))
    for spec_input in result.metadata.inputs:
        want = np.object_ if spec_input["dtype"] == "string" else expected_dtype
        assert feeds[spec_input["name"]].dtype == want, f"{spec.name}: input {spec_input}"
    roles = result.metadata.outputs
    atol, rtol = TOLERANCE[precision]
    for n in (1, len(X)):
        rows = _rows(X, n)
        feeds = predictor.prepare(rows)
        raw = dict(zip([o.name for o in predictor.outputs], predictor.run(feeds), strict=True))
        onnx_by_role = {role: np.asarray(raw[name]) for role, name in roles.items()}
        for role, value in onnx_by_role.items():
            assert value.shape[0] == n, f"{spec.name}: {role} has {value.shape[0]} rows, not {n}"
            kinds = ROLE_KINDS[role_parts(role)[0]]  # label_<t> of a multi-output classifier
            assert value.dtype.kind in kinds, f"{spec.name}: {role} is {value.dtype}"
        expected = expected_outputs(estimator, rows, roles, like=onnx_by_role)
        for role, value in onnx_by_role.items():
            if role_parts(role)[0] == "label" or value.dtype.kind == "O":
                np.testing.assert_array_equal(
                    value.astype(str),
                    np.asarray(expected[role]).astype(str),
                    err_msg=f"{spec.name}: labels differ ({precision}, {n} rows)",
                )
            else:
                np.testing.assert_allclose(
                    value,
                    expected[role],
                    atol=atol,
                    rtol=rtol,
                    err_msg=f"{spec.name}: {role} differs ({precision}, {n} rows)",
                )
