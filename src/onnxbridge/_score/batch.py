"""Score one record batch: check its rows, run :class:`~onnxbridge.runtime.Predictor` on the good
ones and build the output table (``--keep`` columns, then ``label`` and ``proba_<class>`` or
``prediction``, exactly the columns ``predict`` writes).

Both engines call :func:`score_batch`, so the local and the Dask engine give identical rows.
Shapes: ``batch [N, *] -> table [N - bad, K + outputs]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from onnxbridge._meta import ORT_TO_NUMPY, role_parts
from onnxbridge._score.rows import CheckedBatch, RowPlan
from onnxbridge.errors import InferenceError, SchemaMismatchError
from onnxbridge.runtime import PredictionResult, Predictor

__all__ = ["Predicts", "ScoredBatch", "empty_table", "score_batch"]


class Predicts(Protocol):
    """What scores a batch: a :class:`~onnxbridge.runtime.Predictor`, or one with a compiled
    engine for large batches (:class:`~onnxbridge.engines.AcceleratedPredictor`)."""

    def predict(
        self, data: Any, *, ignore_extra: bool = False, allow_missing: bool = False
    ) -> PredictionResult:
        """Labels and probabilities, or values, of every row of ``data``."""
        ...


@dataclass
class ScoredBatch:
    """The output of one batch: scored rows and skipped rows (None when none)."""

    table: pa.Table
    bad: pa.Table | None
    n_bad: int


def score_batch(
    predictor: Predicts,
    batch: pa.RecordBatch,
    plan: RowPlan,
    *,
    file: str,
    first_row: int,
    on_error: str,
    allow_missing: bool,
    missing: tuple[str, str] | None = None,
) -> ScoredBatch:
    """Check and score ``batch``, rows ``first_row``.. (1-based) of ``file``.

    Raises:
        BadRowError: a bad row and ``on_error == "raise"``.
        SchemaMismatchError, InferenceError: Predictor refused the batch or ONNX Runtime failed
            (the message names the file and the rows).
    """
    checked = CheckedBatch.check(
        batch, plan, file=file, first_row=first_row, on_error=on_error, missing=missing
    )
    if len(checked.features) == 0:
        return ScoredBatch(checked.keep.slice(0, 0), checked.bad, checked.n_bad)
    try:
        result = predictor.predict(checked.features, ignore_extra=True, allow_missing=allow_missing)
    except (SchemaMismatchError, InferenceError) as exc:
        last = first_row + batch.num_rows - 1
        raise type(exc)(f"{file!r}, rows {first_row}-{last}: {exc}") from exc
    predictions = pa.Table.from_pandas(result.to_frame(), preserve_index=False)
    return ScoredBatch(_join(checked.keep, predictions), checked.bad, checked.n_bad)


def _join(keep: pa.Table, predictions: pa.Table) -> pa.Table:
    if not keep.num_columns:
        return predictions
    table = keep
    for name in predictions.column_names:
        table = table.append_column(name, predictions.column(name))
    return table


def empty_table(predictor: Predictor, plan: RowPlan, keep_schema: pa.Schema) -> pa.Table:
    """A zero-row output table with the columns a scored batch would have (for a part in which
    no row could be scored), built from the model's output roles, shapes and classes."""
    outputs = predictor.outputs
    by_name = {o.name: o for o in outputs}
    roles = dict(predictor.metadata.outputs) if predictor.metadata else {}
    if not roles:  # as Predictor reads a model from elsewhere
        roles = (
            {"label": outputs[0].name, "probabilities": outputs[1].name}
            if len(outputs) >= 2
            else {"value": outputs[0].name}
        )
    classes = predictor.classes
    result = PredictionResult()
    targets: dict[int, PredictionResult] = {}
    for role, name in roles.items():
        out = by_name.get(name)
        if out is None:
            continue
        dtype = ORT_TO_NUMPY.get(out.type, np.float32)
        shape = out.shape
        width = shape[1] if len(shape) == 2 and isinstance(shape[1], int) else None
        base, target = role_parts(role)
        if target is not None:
            # One target of a multi-output classifier: its own labels, classes and width.
            own = classes[target] if classes and target < len(classes) else None
            part = targets.setdefault(target, PredictionResult(classes=own))
            if base == "label":
                part.labels = np.asarray(own)[:0] if own else np.zeros(0, dtype=dtype)
            else:
                part.probabilities = np.zeros((0, width or len(own or [0])), dtype=dtype)
        elif role == "label":
            # Predictor gives labels the training classes' type.
            result.labels = np.asarray(classes)[:0] if classes else np.zeros(0, dtype=dtype)
        elif role in ("probabilities", "scores"):
            n = width or (len(classes) if classes else 1)
            setattr(result, role, np.zeros((0, n), dtype=dtype))
            result.classes = classes
        elif role == "value":
            result.values = np.zeros((0, width) if width and width > 1 else 0, dtype=dtype)
        elif role == "transformed":
            result.transformed = np.zeros((0, width or 1), dtype=dtype)
    if targets:
        result.targets = [targets[t] for t in sorted(targets)]
    predictions = pa.Table.from_pandas(result.to_frame(), preserve_index=False)
    return _join(keep_schema.empty_table(), predictions)
