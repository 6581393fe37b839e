"""The three runtimes a model is compared on: scikit-learn, ONNX Runtime, ``onnx.reference``.

Each runtime takes a DataFrame of rows as the source model takes them and returns its outputs by
*role* (``label``, ``probabilities``, ``scores``, ``value``, ``transformed``; see
:mod:`onnxbridge.convert._roles`), laid out the same way, so any two can be compared:

- :class:`SklearnRuntime` — the fitted estimator, through
  :func:`onnxbridge.convert._roles.expected_outputs`;
- :class:`OnnxRuntime` — ONNX Runtime through :class:`onnxbridge.runtime.Predictor` (the
  deployment path: the same input coercion as ``predict``);
- :class:`ReferenceRuntime` — ``onnx.reference.ReferenceEvaluator``, the ONNX specification's own
  Python implementation (``ai.onnx.ml`` included), fed exactly the tensors ONNX Runtime gets, with
  onnxbridge's kernels (:mod:`onnxbridge.validate._reference_ops`) for the operator forms it
  cannot run (float64 tree ensembles, two-class SVMs with text labels) or gets wrong (multiclass
  SVM probabilities).

Shapes: ``X [N, F] -> {role: [N] or [N, C]}``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._onnxfile import read_model_bytes, total_bytes
from onnxbridge.convert._roles import expected_outputs
from onnxbridge.data import normalize_features
from onnxbridge.errors import InferenceError, first_line
from onnxbridge.runtime import Predictor
from onnxbridge.runtime._predictor import check_output_rows

__all__ = [
    "ONNX_RUNTIMES",
    "REFERENCE_MAX_BYTES",
    "RUNTIME_NAMES",
    "OnnxRuntime",
    "ReferenceRuntime",
    "SklearnRuntime",
    "output_roles_of",
]

SKLEARN, ONNXRUNTIME, REFERENCE = "sklearn", "onnxruntime", "reference"
RUNTIME_NAMES = (SKLEARN, ONNXRUNTIME, REFERENCE)
ONNX_RUNTIMES = (ONNXRUNTIME, REFERENCE)
# onnx.reference is pure Python and reads a tree ensemble's node attributes into Python lists:
# a model past this size (its .onnx and external data together) is compared without it.
REFERENCE_MAX_BYTES = 2**31 - 1


def output_roles_of(predictor: Predictor) -> dict[str, str]:
    """Role → graph output name: from the onnxbridge metadata, else guessed as ``predict`` does.

    A model from elsewhere with two or more outputs is taken as label + probabilities, with one
    output as a value.
    """
    if predictor.metadata is not None and predictor.metadata.outputs:
        return dict(predictor.metadata.outputs)
    names = [o.name for o in predictor.outputs]
    if len(names) >= 2:
        return {"label": names[0], "probabilities": names[1]}
    return {"value": names[0]}


def _as_matrix(raw: Any, classes: list[Any] | None) -> np.ndarray:
    if isinstance(raw, list):
        # ZipMap: one {class: probability} dict per row.
        keys = classes if classes is not None else (list(raw[0].keys()) if raw else [])
        return np.array([[row[k] for k in keys] for row in raw], dtype=np.float64)
    return np.asarray(raw)


def _by_role(
    names: list[str],
    values: list[Any],
    roles: Mapping[str, str],
    classes: list[Any] | None,
    rows: int,
) -> dict[str, np.ndarray]:
    by_name = dict(zip(names, values, strict=True))
    out: dict[str, np.ndarray] = {}
    for role, name in roles.items():
        array = _as_matrix(by_name[name], classes)
        if role == "label":
            array = array.reshape(-1)
        elif role == "value" and array.ndim == 2 and array.shape[1] == 1:
            array = array.reshape(-1)
        out[role] = array
    # Outputs are compared row by row: a faulty graph must not reach the comparison.
    check_output_rows({roles[role]: len(array) for role, array in out.items()}, rows)
    return out


class OnnxRuntime:
    """ONNX Runtime, through :class:`~onnxbridge.runtime.Predictor`.

    Args:
        predictor: the session; its metadata gives the roles.
    """

    name = ONNXRUNTIME

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor
        self.roles = output_roles_of(predictor)

    def feeds(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """The input tensors for ``frame`` (missing values let through: probes inject them)."""
        return self.predictor.prepare(frame, allow_missing=True)

    def run(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """Outputs by role for ``frame`` ``[N, F]``.

        Raises:
            InferenceError: ONNX Runtime failed.
            SchemaMismatchError: the rows do not fit the model's inputs.
        """
        values = self.predictor.run(self.feeds(frame))
        names = [o.name for o in self.predictor.outputs]
        return _by_role(names, values, self.roles, self.predictor.classes, len(frame))


class ReferenceRuntime:
    """``onnx.reference.ReferenceEvaluator`` on the same model and the same input tensors.

    Operators in a form ``onnx.reference`` lacks run on onnxbridge's kernels
    (:func:`~onnxbridge.validate._reference_ops.reference_kernels`), written from the operator
    specification; every other node on ``onnx.reference``'s own.

    Args:
        model: the ``.onnx`` path or bytes.
        feeder: the ONNX Runtime side, whose input coercion makes the tensors (so both ONNX
            runtimes see identical inputs).

    Raises:
        InferenceError: the evaluator cannot load the model (an operator it does not implement),
            or the model is over :data:`REFERENCE_MAX_BYTES` with its external data.
    """

    name = REFERENCE

    def __init__(self, model: str | Path | bytes, feeder: OnnxRuntime) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator

        from onnxbridge.validate._reference_ops import reference_kernels

        self.feeder = feeder
        size = len(model) if isinstance(model, bytes) else total_bytes(model)
        if size > REFERENCE_MAX_BYTES:
            raise InferenceError(
                f"the model is {size} bytes with its external data, over the "
                f"{REFERENCE_MAX_BYTES} bytes onnx.reference (pure Python) is run on; compared "
                "with onnxruntime only",
                arguments=("runtimes",),
            )
        try:
            # (The model's external data read from its checked files: see read_model_bytes.)
            data = model if isinstance(model, bytes) else read_model_bytes(model)
            if data is None:  # past 2 GiB: cannot be one message (REFERENCE_MAX_BYTES is lower)
                raise InferenceError("the model is too big for onnx.reference")
            proto = onnx.load_from_string(data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.evaluator = ReferenceEvaluator(proto, new_ops=reference_kernels(proto))
        except Exception as exc:  # NotImplementedError for an operator, and kin
            raise InferenceError(
                f"onnx.reference cannot load the model: {first_line(exc)}; compare with "
                "onnxruntime only (runtimes=sklearn,onnxruntime)",
                arguments=("runtimes",),
            ) from exc
        self.output_names = [o.name for o in proto.graph.output]

    def run(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """Outputs by role for ``frame`` ``[N, F]``.

        Raises:
            InferenceError: the evaluator failed on these rows.
        """
        feeds = self.feeder.feeds(frame)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                values = self.evaluator.run(None, feeds)
        except Exception as exc:
            raise InferenceError(
                f"onnx.reference failed to run the model: {first_line(exc)}"
            ) from exc
        return _by_role(
            self.output_names,
            list(values),
            self.feeder.roles,
            self.feeder.predictor.classes,
            len(frame),
        )


class SklearnRuntime:
    """The fitted source estimator.

    Args:
        estimator: the fitted scikit-learn model (or pipeline).
        roles: the roles to compute, as the ONNX model has them.
    """

    name = SKLEARN

    def __init__(self, estimator: Any, roles: Mapping[str, str]) -> None:
        self.estimator = estimator
        self.roles = dict(roles)

    def run(
        self, frame: pd.DataFrame, *, like: dict[str, np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        """Outputs by role for ``frame`` ``[N, F]``, shaped like ``like`` (ONNX outputs).

        Raises:
            InferenceError: the estimator raised on these rows (e.g. it refuses NaN).
        """
        try:
            # The same normalisation training and prediction apply (text as str, NaN missing).
            frame = normalize_features(frame)
            with warnings.catch_warnings():
                # A probe row may be extreme on purpose: overflow warnings are expected.
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    return expected_outputs(self.estimator, frame, self.roles, like=like)
        except Exception as exc:  # scikit-learn's ValueError for NaN, unknown categories, ...
            raise InferenceError(f"scikit-learn refused the rows: {first_line(exc)}") from exc
