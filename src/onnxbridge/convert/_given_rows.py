"""The rows a conversion was given, for converters that need more than the fitted model.

skl2onnx calls a converter with the fitted model only. A few models do not keep what their graph
needs: CatBoost keeps its categories only as 32-bit hashes of their text, so its graph can
recognise a category only when it is handed the category's value. :func:`convert_estimator
<onnxbridge.convert._core.convert_estimator>` sets the rows it was given (the sample, plus any
known categories) with :func:`conversion_rows` for the duration of one conversion, and such a
converter reads them with :func:`find_conversion_rows`. A ``ContextVar`` holds them, so
conversions running at the same time in other threads or tasks each see their own rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["ConversionRows", "conversion_rows", "find_conversion_rows"]


@dataclass(frozen=True)
class ConversionRows:
    """The sample rows of one conversion and the known values of its category columns.

    Attributes:
        frame: the sample rows, in the model's input columns (training order), as onnxbridge
            feeds them (text columns hold ``str`` values, missing values are NaN).
        categories: column -> more values it can hold (e.g. the training rows' categories,
            recorded by ``onnxbridge train`` when the sample is a few held-out rows).
    """

    frame: pd.DataFrame
    categories: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        """The input columns, in training order."""
        return [str(c) for c in self.frame.columns]

    def values(self, column: str) -> list[Any]:
        """The distinct values of ``column`` in the sample and in ``categories``, missing
        values left out, in order of first appearance."""
        found: dict[Any, None] = {}
        given = self.frame[column].tolist() if column in self.frame.columns else []
        for value in [*given, *self.categories.get(column, ())]:
            if value is None or (isinstance(value, float) and value != value):  # NaN
                continue
            found.setdefault(value, None)
        return list(found)


_ROWS: ContextVar[ConversionRows | None] = ContextVar("onnxbridge_conversion_rows", default=None)


@contextmanager
def conversion_rows(
    frame: pd.DataFrame, categories: Mapping[str, Sequence[Any]] | None = None
) -> Iterator[ConversionRows]:
    """Make ``frame`` (and ``categories``) the rows of the conversion run inside the block."""
    rows = ConversionRows(frame, dict(categories or {}))
    token = _ROWS.set(rows)
    try:
        yield rows
    finally:
        _ROWS.reset(token)


def find_conversion_rows() -> ConversionRows | None:
    """The rows of the conversion in progress, or None outside one."""
    return _ROWS.get()
