"""Row checks for ``score``: find the rows of a record batch that cannot be scored, and say why.

A row is bad when one of the model's numeric columns holds text that is not a number, or a
number its graph input cannot take (``inf``, ``-inf``, a value beyond float32's range for a
float32 input: the rule of :mod:`onnxbridge._values`, which ``predict`` and the server
apply too), when a required column is missing from its file, or when it has a missing value
(NaN) and the source model refuses missing values (recorded at conversion; ``--allow-missing``
lets them through, as in ``predict``). Everything else — column matching, the cast to the
graph's element type, class names — is left to :class:`onnxbridge.runtime.Predictor`, so
``score`` and ``predict`` agree.

Rows are numbered from 1 within their file, the CSV header not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from onnxbridge._meta import INPUT_DTYPES
from onnxbridge._values import misfit_reason, misfits
from onnxbridge.data import preview_names
from onnxbridge.errors import BadRowError
from onnxbridge.runtime import Predictor

__all__ = ["BAD_ROW_COLUMNS", "CheckedBatch", "RowPlan"]

# Columns of the side file that holds skipped rows (then the --keep columns).
BAD_ROW_COLUMNS = ("file", "row", "column", "value", "reason")
# What pyarrow's string -> float64 cast accepts (after trimming spaces); RE2 syntax.
_NUMBER = r"^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|(?i:inf|infinity|nan))$"
# 1 and 0 written as numbers (1.0, 0.00, 1e0, -0.0), which a boolean feature takes as well.
_ONE = r"^\+?0*1(\.0*)?([eE][+-]?0+)?$"
_ZERO = r"^[+-]?(0+\.?0*|\.0+)([eE][+-]?\d+)?$"
_MISSING_REASON = (
    "missing value: the source model refuses missing values in this column, so ONNX results for "
    "such rows are not validated (fill them, or pass allow_missing=True)"
)
_SKIP_HINT = "pass on_error='skip' to write such rows to a side file and score the rest"


@dataclass
class RowPlan:
    """What a scoring job reads and checks, taken from the model.

    Attributes:
        features: the model's feature columns in training order (None: a model without
            onnxbridge metadata, whose columns are the file's, in order, minus ``keep``).
        numeric: the features the model takes as numbers (see :meth:`is_numeric` for a model
            without onnxbridge metadata).
        booleans: the numeric features that were booleans in training (CSV text true/false).
        keep: the key columns copied to the output.
        refuse_missing: the features where a missing value makes a row bad (those the source
            model refuses missing values in).
        dtypes: the graph's element type of each numeric feature, whose values are checked
            against it.
        default_dtype: the element type of the columns of a model without onnxbridge
            metadata (its one tensor input's), None otherwise.
        all_numeric: a model without onnxbridge metadata whose one tensor input takes numbers:
            every feature column, whatever the file calls it, is numeric.
    """

    features: list[str] | None
    numeric: set[str]
    booleans: set[str]
    keep: list[str]
    refuse_missing: frozenset[str]
    dtypes: dict[str, np.dtype] = field(default_factory=dict)
    default_dtype: np.dtype | None = None
    all_numeric: bool = False

    @classmethod
    def for_model(
        cls, predictor: Predictor, keep: Sequence[str], *, allow_missing: bool
    ) -> RowPlan:
        """The plan for ``predictor``'s model."""
        meta = predictor.metadata
        if meta is None:
            dtype = predictor.input_dtype
            return cls(
                None,
                set(),
                set(),
                list(keep),
                refuse_missing=frozenset(),
                default_dtype=dtype,
                # Its columns are known only per file: each one feeds the tensor, so a value
                # that is not a number is a bad row of its own, as with metadata.
                all_numeric=dtype is not None and dtype.kind in "fiub",
            )
        numeric = {f.name for f in meta.features.features if f.is_numeric}
        booleans = {f.name for f in meta.features.features if f.dtype.lower().startswith("bool")}
        dtypes = {
            column: np.dtype(INPUT_DTYPES[spec["dtype"]])
            for spec in meta.inputs
            if spec.get("dtype") in INPUT_DTYPES and spec["dtype"] != "string"
            for column in spec.get("columns", [])
            if column in numeric
        }
        return cls(
            meta.features.names,
            numeric,
            booleans,
            list(keep),
            refuse_missing=frozenset(() if allow_missing else meta.missing_refused_columns()),
            dtypes=dtypes,
        )

    def is_numeric(self, name: str) -> bool:
        """Whether the model takes the feature ``name`` as numbers."""
        return self.all_numeric or name in self.numeric

    def features_of(self, columns: Sequence[str]) -> list[str]:
        """The feature columns of a file with ``columns``."""
        if self.features is not None:
            return self.features
        return [c for c in columns if c not in self.keep]

    def read_columns(self, columns: Sequence[str]) -> list[str]:
        """The columns to read from a file with ``columns``, in the file's order."""
        if self.features is None:
            return list(columns)  # a model without metadata takes them all
        wanted = set(self.features) | set(self.keep)
        return [c for c in columns if c in wanted]

    def text_columns(self) -> list[str]:
        """CSV columns read as text: every feature. Numeric ones are cast here (so a bad value
        names its row); text ones stay text even when they look like numbers (zip codes)."""
        return list(self.features or [])

    def check_columns(self, file: str, columns: Sequence[str]) -> tuple[str, str] | None:
        """The first missing required column of a file and why it matters, or None.

        Raises:
            DataError: a ``--keep`` column is not in the file (a usage error, never skipped), or
                a column the job reads is in it twice (no telling which holds the values).
        """
        from onnxbridge.errors import DataError

        wanted = set(self.features_of(columns)) | set(self.keep)
        seen: set[str] = set()
        for name in columns:
            if name in seen and name in wanted:
                raise DataError(
                    f"{file!r} has two columns named {name!r}, which the job reads; rename or "
                    "drop one of them in the file"
                )
            seen.add(name)
        for name in self.keep:
            if name not in columns:
                raise DataError(
                    f"keep= column {name!r} is not in {file!r}; its columns are: "
                    f"{preview_names(columns)}",
                    arguments=("keep",),
                )
        for name in self.features or []:
            if name not in columns:
                return name, (
                    f"missing required column {name!r}; the model expects "
                    f"{len(self.features or [])} columns: {preview_names(self.features, 10)}"
                )
        return None


@dataclass
class CheckedBatch:
    """A record batch split into the rows to score and the bad rows.

    Attributes:
        features: ``[n_good, F]`` the feature columns of the good rows, ready for Predictor.
        keep: the ``--keep`` columns of the good rows.
        bad: one row per bad row, columns :data:`BAD_ROW_COLUMNS` then the ``--keep`` columns
            (None when there are none).
    """

    features: pd.DataFrame
    keep: pa.Table
    bad: pa.Table | None = None
    n_bad: int = 0

    @classmethod
    def check(
        cls,
        batch: pa.RecordBatch,
        plan: RowPlan,
        *,
        file: str,
        first_row: int,
        on_error: str,
        missing: tuple[str, str] | None = None,
    ) -> CheckedBatch:
        """Check ``batch`` (rows ``first_row``.. of ``file``, 1-based).

        Args:
            missing: a missing required column of this file and its reason: every row is bad.
            on_error: ``"raise"`` (the first bad row raises) or ``"skip"``.

        Raises:
            BadRowError: a bad row, when ``on_error`` is ``"raise"``.
        """
        n = batch.num_rows
        keep = pa.Table.from_batches([batch.select(plan.keep)])  # no columns: still n rows
        if missing is not None:
            column, reason = missing
            if on_error == "raise":
                raise BadRowError(
                    f"cannot score {file!r}: {reason}; add the column, or {_SKIP_HINT}",
                    file=file,
                    row=None,
                    column=column,
                    arguments=("on_error",),
                )
            bad = _bad_table(
                file, np.arange(n), first_row, [column] * n, [None] * n, [reason] * n, keep
            )
            return cls(pd.DataFrame(), keep.slice(0, 0), bad, n)
        names = plan.features_of(batch.schema.names)
        columns: dict[str, pa.Array] = {}
        # Per row: the first feature at fault (-1: none) and whether its value is missing
        # (rather than not castable); per feature: why its values could not be cast.
        bad_column = np.full(n, -1, dtype=np.int64)
        bad_missing = np.zeros(n, dtype=bool)
        cast_reasons: dict[int, str] = {}
        # Per row: why its number does not fit the graph's input (the rule every path applies).
        value_reasons: dict[int, str] = {}
        for j, name in enumerate(names):
            array = batch.column(name)
            if plan.is_numeric(name):
                array, invalid, why = _to_number(array, bool_feature=name in plan.booleans)
                if invalid is not None:
                    bad_column[invalid & (bad_column < 0)] = j
                    cast_reasons[j] = why
                if pa.types.is_boolean(array.type) and array.null_count:
                    # Booleans with missing values (or values refused above) as 1.0 / 0.0 / NaN,
                    # as onnxbridge reads any table: pandas would make an object column of
                    # them, which a model's number input refuses.
                    array = pc.cast(array, pa.float64())
            dtype = plan.dtypes.get(name, plan.default_dtype)
            if dtype is not None and pa.types.is_floating(array.type):
                # Integers and booleans fit a float input; floats may not (±inf, beyond
                # float32). Missing values come out as NaN, which is no misfit.
                values = array.to_numpy(zero_copy_only=False)
                mask = misfits(values, dtype)
                if mask is not None:
                    fresh = np.flatnonzero(mask & (bad_column < 0))
                    bad_column[fresh] = j
                    for i in fresh.tolist():
                        value_reasons[i] = misfit_reason(values[i], dtype)
            if name in plan.refuse_missing and (
                array.null_count
                or pa.types.is_floating(array.type)
                or pa.types.is_string(array.type)
                or pa.types.is_large_string(array.type)
            ):
                newly_missing = _missing(array) & (bad_column < 0)
                bad_column[newly_missing] = j
                bad_missing[newly_missing] = True
            columns[name] = array
        bad_rows = np.flatnonzero(bad_column >= 0)

        def reason_of(i: int) -> str:
            if bad_missing[i]:
                return _MISSING_REASON
            return value_reasons.get(i) or cast_reasons[int(bad_column[i])]

        if bad_rows.size and on_error == "raise":
            i = int(bad_rows[0])
            name = names[int(bad_column[i])]
            what = reason_of(i) if bad_missing[i] else f"value {_shown(batch.column(name), i)} is "
            what += "" if bad_missing[i] else reason_of(i)
            raise BadRowError(
                f"bad row in {file!r}, row {first_row + i}, column {name!r}: {what}; "
                f"fix the file, or {_SKIP_HINT}",
                file=file,
                row=first_row + i,
                column=name,
                arguments=("on_error", "allow_missing"),
            )
        frame = pa.table(columns).to_pandas() if columns else pd.DataFrame(index=range(n))
        if not bad_rows.size:
            return cls(frame, keep)
        good = bad_column < 0
        row_columns = [names[int(bad_column[i])] for i in bad_rows]
        row_values = [
            _raw(batch.column(c), int(i)) for c, i in zip(row_columns, bad_rows, strict=True)
        ]
        row_reasons = [reason_of(int(i)) for i in bad_rows]
        bad = _bad_table(file, bad_rows, first_row, row_columns, row_values, row_reasons, keep)
        return cls(
            frame[good].reset_index(drop=True),
            keep.filter(pa.array(good)),
            bad,
            int(bad_rows.size),
        )


def _to_number(array: pa.Array, *, bool_feature: bool) -> tuple[pa.Array, np.ndarray | None, str]:
    """Cast a numeric feature to numbers; returns (array, rows that are not numbers, reason)."""
    kind = array.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return array, None, ""
    if pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
        kind = array.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        n = len(array)
        reason = f"of type {kind}, not a number: the model takes numbers in this column"
        return pa.nulls(n, pa.float64()), np.ones(n, dtype=bool), reason
    text = pc.utf8_trim_whitespace(array)
    target = pa.bool_() if bool_feature else pa.float64()
    what = "true/false/1/0" if bool_feature else "a number"
    reason = f"not {what}: the model takes {'booleans' if bool_feature else 'numbers'} here"
    try:
        return pc.cast(text, target), None, reason
    except pa.ArrowInvalid:
        pass
    if bool_feature:
        # pandas writes a boolean column that has missing values as 1.0 / 0.0 (and reads it
        # back as floats, which the model takes): numbers equal to 1 or 0 are booleans too.
        one = pc.fill_null(pc.match_substring_regex(text, _ONE), False)
        zero = pc.fill_null(pc.match_substring_regex(text, _ZERO), False)
        text = pc.if_else(one, "1", pc.if_else(zero, "0", text))
    else:
        # A boolean column read from text (True/False, as pandas reads it) holds 1/0.
        lower = pc.utf8_lower(text)
        text = pc.if_else(
            pc.equal(lower, "true"), "1", pc.if_else(pc.equal(lower, "false"), "0", text)
        )
    try:
        return pc.cast(text, target), None, reason
    except pa.ArrowInvalid:
        pass
    if bool_feature:
        ok = pc.is_in(pc.utf8_lower(text), pa.array(["true", "false", "1", "0"]))
        ok = pc.or_(ok, pc.is_null(text))  # is_in says false, not null, for a missing value
    else:
        ok = pc.match_substring_regex(text, _NUMBER)
    ok = pc.fill_null(ok, True)  # missing values are not cast errors
    invalid = ~np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    cleaned = pc.if_else(ok, text, pa.scalar(None, pa.string()))
    try:
        return pc.cast(cleaned, target), invalid, reason
    except pa.ArrowInvalid:
        # The pattern let through something the cast refuses: cast value by value.
        out: list[object] = []
        for k, value in enumerate(cleaned.to_pylist()):
            try:
                out.append(pc.cast(pa.array([value], pa.string()), target)[0].as_py())
            except pa.ArrowInvalid:
                invalid[k] = True
                out.append(None)
        return pa.array(out, target), invalid, reason


def _missing(array: pa.Array) -> np.ndarray:
    mask = pc.is_null(array, nan_is_null=pa.types.is_floating(array.type))
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        # An empty text is a missing value (onnxbridge.data.normalize_features).
        mask = pc.or_(mask, pc.fill_null(pc.equal(array, ""), False))
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)


def _raw(array: pa.Array, i: int) -> str | None:
    value = array[i].as_py()
    return None if value is None else str(value)


def _shown(array: pa.Array, i: int) -> str:
    value = _raw(array, i)
    if value is None:
        return "(missing)"
    return repr(value if len(value) <= 40 else value[:40] + "…")


def _bad_table(
    file: str,
    rows: np.ndarray,
    first_row: int,
    columns: Sequence[str],
    values: Sequence[str | None],
    reasons: Sequence[str],
    keep: pa.Table,
) -> pa.Table:
    data = {
        "file": pa.array([file] * len(rows), pa.string()),
        "row": pa.array(np.asarray(rows, dtype=np.int64) + first_row, pa.int64()),
        "column": pa.array(list(columns), pa.string()),
        "value": pa.array(list(values), pa.string()),
        "reason": pa.array(list(reasons), pa.string()),
    }
    table = pa.table(data)
    kept = keep.take(pa.array(rows, pa.int64())) if keep.num_columns else keep
    for name in kept.column_names:
        table = table.append_column(name, kept.column(name))
    return table
