"""The one rule for the values a graph input can take, and the table of limits behind it.

A value fits an input's element type when the graph gets what the user wrote:

- float16 / float32 / float64: a finite number within the type's range. A float64 value beyond
  float32's range becomes ``inf`` when cast, and an explicit ``inf`` / ``-inf`` is not a number
  a model can score: both are refused. NaN is a missing value: it is not judged here (the
  missing-value rule, recorded at conversion, decides where it is refused);
- integers: an integral number within the type's range (NaN, ``1.5`` and ``2**63`` do not fit
  int64);
- bool: 0 or 1 (``false`` / ``true``); a raw byte of 2 or 255 does not fit.

Every path that feeds a graph — ``Predictor`` (all its entry paths), ``score``, the server's
``/infer`` (JSON and binary) and ``/predict`` — calls :func:`misfits` or :func:`first_misfit`
and words the error for its own user (row and column, or input and index). The common case,
every value fits, costs one vectorised check (:func:`all_finite` on a float input); the details
are worked out only when it fails.

This module imports neither scikit-learn nor skl2onnx: the runtime and serve layers call it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxbridge.errors import BadRowError

__all__ = [
    "VALUE_LIMITS",
    "Misfit",
    "ValueLimits",
    "all_finite",
    "cast_values",
    "first_misfit",
    "misfit_reason",
    "misfits",
    "refuse_table_misfits",
    "within_range",
]

# Up to this many float32 values, summing a Python list is the fastest finiteness check (the sum
# of 64 float32 values as Python floats cannot overflow); up to _DOT_CHECK values the dot product
# of the values with themselves; above that (where BLAS may start threads of its own) a min and a
# max, which allocate nothing.
_TINY_CHECK = 64
_DOT_CHECK = 8192
_DOT_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class ValueLimits:
    """What one element type takes.

    Attributes:
        kind: numpy's kind letter: ``"f"`` float, ``"i"`` / ``"u"`` integer, ``"b"`` bool.
        low: the smallest value (the most negative finite float, for floats).
        high: the largest value.
    """

    kind: str
    low: float | int
    high: float | int

    def allowed(self) -> str:
        """What the type takes, in words: ``"finite numbers from -65504 to 65504"``."""
        if self.kind == "f":
            return f"finite numbers from {self.low:g} to {self.high:g}"
        if self.kind == "b":
            return "0 or 1 (false or true)"
        return f"integers from {self.low} to {self.high}"


def _limits(dtype: Any) -> ValueLimits:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return ValueLimits("f", float(info.min), float(info.max))
    if dtype.kind == "b":
        return ValueLimits("b", 0, 1)
    iinfo = np.iinfo(dtype)
    return ValueLimits(dtype.kind, int(iinfo.min), int(iinfo.max))


# The one table: numpy element type -> the values it takes. Strings take any text.
VALUE_LIMITS: dict[np.dtype, ValueLimits] = {
    np.dtype(t): _limits(t)
    for t in (
        np.float16,
        np.float32,
        np.float64,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.bool_,
    )
}


@dataclass(frozen=True)
class Misfit:
    """The first value of an array that its input's element type cannot take.

    Attributes:
        index: its position in the array (``(row, column)`` for a table).
        value: the value as the user gave it, as text (``"1e+300"``, ``"inf"``, ``"2"``).
        reason: why it does not fit and what is allowed; reads after "<value> is ".
    """

    index: tuple[int, ...]
    value: str
    reason: str

    def __str__(self) -> str:
        return f"{self.value} is {self.reason}"


def all_finite(array: np.ndarray) -> bool:
    """Whether every value of a float array is finite (no NaN, no ±inf): one pass, no mask.

    A ``False`` may be a false alarm for huge finite values (a sum or a square that overflows);
    :func:`misfits` then tells exactly.
    """
    size = array.size
    if size <= _TINY_CHECK and array.dtype.itemsize <= 4:
        # float32 values as Python floats: their sum is finite exactly when they all are.
        return math.isfinite(sum(array.ravel().tolist()))
    if size <= _DOT_CHECK and array.dtype in _DOT_TYPES and array.flags.c_contiguous:
        # Squares are >= 0 or +inf; the sum of them is finite only when every value is.
        values = array.reshape(-1)
        return math.isfinite(np.vdot(values, values))
    return bool(np.isfinite(array.min()) and np.isfinite(array.max()))


def misfits(given: np.ndarray, dtype: Any, cast: np.ndarray | None = None) -> np.ndarray | None:
    """The mask of the values of ``given`` that element type ``dtype`` cannot take, or None
    when they all fit (the common case, decided by one vectorised check).

    Args:
        given: the values as the user gave them (any numeric dtype, any shape).
        dtype: the graph input's numpy element type.
        cast: ``given`` already cast to ``dtype`` (saves a cast on the float path), if at hand.

    Returns:
        A bool array of ``given``'s shape, True where a value does not fit; or None. NaN is not
        a misfit for a float input (it is a missing value). Object and string arrays are judged
        by their numbers (``"1e300"`` too); one holding text that is not a number is not judged
        here (its cast to the input's type fails and says so).
    """
    target = np.dtype(dtype)
    limits = VALUE_LIMITS.get(target)
    if limits is None or given.size == 0:
        return None
    if given.dtype.kind not in "biuf":
        try:
            given = given.astype(np.float64)
        except (TypeError, ValueError):
            return None
        cast = None
    kind = given.dtype.kind
    if limits.kind == "f":
        if cast is None:
            cast = cast_values(given, target)
        if all_finite(cast):
            return None
        mask = np.isinf(cast)  # out of range (inf after the cast) or ±inf given
        return mask if mask.any() else None
    if limits.kind == "b":
        if kind == "b":
            raw = given.view(np.uint8)  # a bool array built from raw bytes may hold 2 or 255
            return raw > 1 if raw.max() > 1 else None
        mask = (given != 0) & (given != 1)
        return mask if mask.any() else None
    # An integer input.
    if kind == "b" or np.can_cast(given.dtype, target, "safe"):
        return None
    if kind in "iu":
        low, high = given.min(), given.max()
        if int(low) >= limits.low and int(high) <= limits.high:
            return None
        return (given < limits.low) | (given > limits.high)
    # Floats: integral and within range. float(high) + 1 is a power of two, exact in float64,
    # where float(high) itself rounds up past the range (2**63 - 1 -> 2**63).
    with np.errstate(invalid="ignore"):
        fits = (given >= limits.low) & (given < float(limits.high) + 1) & (np.floor(given) == given)
    return None if fits.all() else ~fits


def misfit_reason(value: Any, dtype: Any, type_name: str | None = None) -> str:
    """Why the single ``value`` does not fit element type ``dtype``; reads after "<value> is ".

    Args:
        value: a value :func:`misfits` flagged.
        dtype: the graph input's numpy element type.
        type_name: the type's name for the user (``"FP32"`` in the server); numpy's name
            otherwise.
    """
    target = np.dtype(dtype)
    limits = VALUE_LIMITS[target]
    name = type_name or target.name
    takes = f"{name} takes {limits.allowed()}"
    if limits.kind == "b":
        return f"not a boolean: {takes}"
    number = float(value)
    if limits.kind == "f":
        if math.isinf(number):
            return f"not a finite number the model can score: {takes}"
        return f"out of range for {name}, which takes {limits.allowed()}"
    if math.isnan(number):
        return f"a missing value (NaN), which an integer input cannot hold: {takes}"
    if isinstance(value, float | np.floating) and not number.is_integer():
        return f"not an integer: {takes}"
    return f"out of range for {name}, which takes {limits.allowed()}"


def first_misfit(
    given: np.ndarray,
    dtype: Any,
    cast: np.ndarray | None = None,
    *,
    type_name: str | None = None,
) -> Misfit | None:
    """The first value (in row-major order) of ``given`` that ``dtype`` cannot take, or None.

    Args:
        given: the values as the user gave them.
        dtype: the graph input's numpy element type.
        cast: ``given`` already cast to ``dtype``, if at hand.
        type_name: the type's name for the user (``"FP32"`` in the server).
    """
    mask = misfits(given, dtype, cast)
    if mask is None:
        return None
    if given.dtype.kind not in "biuf":
        given = given.astype(np.float64)  # numbers held as objects or text, as misfits read them
    flat = int(np.flatnonzero(mask.reshape(-1))[0])
    index = tuple(int(i) for i in np.unravel_index(flat, given.shape))
    value = given[index] if given.ndim else given[()]
    if given.dtype.kind == "b" and np.dtype(dtype).kind == "b":
        value = int(given.view(np.uint8)[index] if given.ndim else given.view(np.uint8)[()])
    return Misfit(index, _shown(value), misfit_reason(value, dtype, type_name))


def _shown(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return str(bool(value)).lower()
    if isinstance(value, float | np.floating):
        number = float(value)
        return repr(int(number)) if number.is_integer() and abs(number) < 1e16 else repr(number)
    return str(value)


def within_range(given: np.ndarray, dtype: Any) -> bool:
    """Whether casting the float array ``given`` to the narrower float type ``dtype`` keeps
    every value in range, so that the cast cannot overflow (NaN stays NaN: it is in range)."""
    limit = VALUE_LIMITS[np.dtype(dtype)].high
    if given.size <= _TINY_CHECK:
        values = given.ravel().tolist()  # Python's min and max beat numpy's on a row
        if not values or (-limit <= min(values) and max(values) <= limit):
            return True
    elif -limit <= given.min() and given.max() <= limit:
        return True
    # Out of range, or a NaN that min / max could not see past: tell exactly.
    return not bool((np.abs(given) > limit).any())


def cast_values(given: np.ndarray, dtype: Any) -> np.ndarray:
    """``given`` as element type ``dtype`` (a copy unless it already is), without numpy's
    overflow warning for the values that do not fit: :func:`misfits` finds and names them."""
    target = np.dtype(dtype)
    source = given.dtype
    if source == target:
        return given
    if np.can_cast(source, target, "safe") or (source.kind in "iu" and target.itemsize >= 4):
        return given.astype(target)  # cannot overflow (integers to float32 lose digits only)
    # float64 rows of a float32 model, the usual narrowing: a range check on a short row is
    # cheaper than silencing numpy's warnings around the cast.
    if source.kind == target.kind == "f" and given.size <= _TINY_CHECK:
        if within_range(given, target):
            return given.astype(target)
    with np.errstate(over="ignore", invalid="ignore"):
        return given.astype(target)


def refuse_table_misfits(
    given: np.ndarray,
    dtype: Any,
    cast: np.ndarray | None = None,
    *,
    columns: Sequence[str] | None = None,
) -> None:
    """Refuse a table ``[N, F]`` holding a value that ``dtype`` cannot take.

    Args:
        given: the rows as the user gave them.
        dtype: the graph input's numpy element type.
        cast: ``given`` already cast to ``dtype``, if at hand.
        columns: the names of the ``F`` columns (positions are shown without them).

    Raises:
        BadRowError: (a SchemaMismatchError) naming the row (counted from 1), the column, the
            value and what the input takes.
    """
    misfit = first_misfit(given, dtype, cast)
    if misfit is None:
        return
    if given.ndim == 2:
        row, column = misfit.index
    else:  # one row given flat
        row, column = 0, (misfit.index[-1] if misfit.index else 0)
    name = columns[column] if columns is not None and column < len(columns) else str(column)
    raise BadRowError(
        f"bad value in row {row + 1}, column {name!r}: {misfit}; fix or drop that row "
        "(rows count from 1)",
        row=row + 1,
        column=name,
    )
