"""Engines: what runs a model's rows once :class:`~onnxbridge.runtime.Predictor` has checked them.

ONNX Runtime is the engine of every model (:class:`OrtEngine`). A compiled copy of a model's
trees (tl2cgen, lleaves: :mod:`onnxbridge.engines._compiled`) is an optional second engine that
``onnxbridge tune --engines all`` records only when it is equivalent to the ONNX model and
faster, and that runs only on request: ``onnxbridge score --accelerator --trust-native``, or
:class:`AcceleratedPredictor` in Python. Its library is native code, loaded only when you trust
the bundle (``trust_native=True``) and only when its hash matches the bundle's card.

Every engine has the same shape (:class:`Engine`): ``predict(X)`` takes rows ``X [N, F]``
already checked and cast to the model's input type (what
:meth:`~onnxbridge.runtime.Predictor.prepare` gives) and returns a
:class:`~onnxbridge.runtime.PredictionResult` — labels ``[N]`` and probabilities ``[N, C]`` of
a classifier, values ``[N]`` of a regressor.

Example:
    >>> from onnxbridge import Predictor
    >>> from onnxbridge.engines import AcceleratedPredictor
    >>> fast = AcceleratedPredictor.load(Predictor("runs/lgbm/model.onnx"), trust_native=True)
    >>> fast.predict(frame).to_frame()  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from onnxbridge.engines._compiled import (
    CompiledEngine,
    CompiledTrees,
    LeavesTrees,
    check_native_trust,
    load_compiled_engine,
)
from onnxbridge.errors import AcceleratorError
from onnxbridge.runtime import PredictionResult, Predictor

__all__ = [
    "AcceleratedPredictor",
    "CompiledEngine",
    "CompiledTrees",
    "Engine",
    "LeavesTrees",
    "OrtEngine",
    "check_native_trust",
    "load_compiled_engine",
]


@runtime_checkable
class Engine(Protocol):
    """What runs a model's checked rows.

    Attributes:
        name: ``"onnxruntime"``, ``"tl2cgen"`` or ``"lleaves"``.
        min_rows: the smallest call it serves.
    """

    name: str
    min_rows: int

    def predict(self, X: np.ndarray) -> PredictionResult:
        """The model's result for rows ``X [N, F]`` of the model's input type."""
        ...


class OrtEngine:
    """ONNX Runtime, the default engine: the :class:`~onnxbridge.runtime.Predictor`'s own run.

    Args:
        predictor: the model's Predictor.
    """

    name = "onnxruntime"
    min_rows = 1

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor

    def predict(self, X: np.ndarray) -> PredictionResult:
        """The model's result for checked rows ``X`` (their missing values were already
        accepted or refused by whoever checked them)."""
        return self.predictor.predict(X, allow_missing=True)


class AcceleratedPredictor:
    """A :class:`~onnxbridge.runtime.Predictor` whose calls of at least the compiled engine's
    ``min_rows`` rows run on it; smaller calls run on ONNX Runtime, as the Predictor alone.

    Input is checked as :meth:`Predictor.predict <onnxbridge.runtime.Predictor.predict>` checks
    it, whichever engine runs it. Labels are the Predictor's; probabilities (or values) agree
    with ONNX Runtime's within the tolerance ``tune`` checked the engine with.

    Args:
        predictor: the model's Predictor.
        compiled: a compiled engine built for this model (its classes are set to the model's).

    Raises:
        AcceleratorError: a model a compiled engine cannot serve (not a classifier with labels
            and probabilities nor a regressor, or not one numeric input), or an engine of
            another number of classes.
    """

    def __init__(self, predictor: Predictor, compiled: CompiledEngine) -> None:
        classes = _compiled_classes(predictor)
        self.predictor = predictor
        self.default = OrtEngine(predictor)
        self.compiled = compiled.with_classes(classes)

    @classmethod
    def load(cls, predictor: Predictor, *, trust_native: bool = False) -> AcceleratedPredictor:
        """``predictor`` with the compiled engine ``tune --engines all`` recorded in its bundle.

        Args:
            predictor: a Predictor of a bundle's ``model.onnx``.
            trust_native: you trust the bundle's native code (you made it with ``tune
                --engines all``); without it nothing is opened.

        Raises:
            UnsafeModelFileError: without ``trust_native`` (nothing was opened).
            AcceleratorError: a model an engine cannot serve, nothing recorded, the engine not
                installed, or its files missing or changed since ``tune``
                (:func:`~onnxbridge.engines._compiled.load_compiled_engine`).
        """
        classes = _compiled_classes(predictor)
        record = predictor.tuning.accelerator if predictor.tuning is not None else None
        compiled = load_compiled_engine(predictor.path, record, classes, trust_native=trust_native)
        return cls(predictor, compiled)

    def engine_for(self, rows: int) -> Engine:
        """The engine a call of ``rows`` rows runs on."""
        return self.compiled if rows >= self.compiled.min_rows else self.default

    def predict(
        self, data: Any, *, ignore_extra: bool = False, allow_missing: bool = False
    ) -> PredictionResult:
        """Predict for every row of ``data``, as :meth:`Predictor.predict
        <onnxbridge.runtime.Predictor.predict>` does (same arguments, same checks)."""
        rows = _rows_of(data)
        engine = self.default if rows is None else self.engine_for(rows)
        if engine is self.default:
            return self.predictor.predict(
                data, ignore_extra=ignore_extra, allow_missing=allow_missing
            )
        feeds = self.predictor.prepare(data, ignore_extra=ignore_extra, allow_missing=allow_missing)
        (X,) = feeds.values()
        # Compiled trees compare floats with their thresholds: other rows stay on ONNX Runtime.
        return (engine if X.dtype.kind == "f" else self.default).predict(X)


def _rows_of(data: Any) -> int | None:
    """The rows of a DataFrame or 2-D array; None for anything else (which stays on ONNX
    Runtime: records and mappings are small calls)."""
    shape = getattr(data, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) == 2 else None


def _compiled_classes(predictor: Predictor) -> list[Any] | None:
    """The classes of a model a compiled engine can serve (None: a regressor).

    Raises:
        AcceleratorError: the model is neither a classifier with labels and probabilities nor
            a regressor with one value output, or it does not take one numeric input.
    """
    roles = set(predictor.metadata.outputs) if predictor.metadata else set()
    if not roles:
        # A model from elsewhere: label + probabilities, or one value output (as Predictor).
        roles = {"label", "probabilities"} if len(predictor.outputs) >= 2 else {"value"}
    classifier = roles == {"label", "probabilities"}
    if not classifier and roles != {"value"}:
        raise AcceleratorError(
            f"an accelerator serves classifiers (label + probabilities) and regressors; "
            f"this model's outputs are {', '.join(sorted(roles)) or 'unknown'}"
        )
    if predictor.input_dtype is None:
        raise AcceleratorError("an accelerator takes one numeric input; this model has more")
    return predictor.classes if classifier else None
