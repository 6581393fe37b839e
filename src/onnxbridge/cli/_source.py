"""A model file and a data file named on the command line, loaded together (convert, validate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from onnxbridge.errors import DataError


def load_model_and_rows(
    model: Path,
    rows: Path,
    *,
    target: str | None,
    allow_pickle: bool,
    trust: list[str] | None,
) -> tuple[Any, pd.DataFrame]:
    """The estimator in ``model`` (skops; pickle only if allowed) and the rows of ``rows``
    without the ``target`` column.

    Raises:
        DataError: the target is not a column of the data file; and the errors of
            :func:`onnxbridge.bundle.load_estimator` and :func:`onnxbridge.data.read_table`.
    """
    from onnxbridge.bundle import load_estimator
    from onnxbridge.data import read_table

    estimator = load_estimator(model, allow_pickle=allow_pickle, trusted=tuple(trust or ()))
    frame = read_table(rows)
    if target is not None:
        if target not in frame.columns:
            raise DataError(f"--target {target!r} is not a column of {str(rows)!r}")
        frame = frame.drop(columns=[target])
    return estimator, frame
