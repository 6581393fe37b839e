"""Input coercion: DataFrames, arrays, mappings and records into ONNX Runtime feeds.

Columns are matched to the model's inputs by name, using the schema that ``convert`` wrote into
the model's ``metadata_props``; float64 (and ints, bools) are cast to the input's element type,
so the float64 → float32 trap of hand-written glue is handled here once, and values the input
cannot take — or missing values the source model refused — are refused with a clear error.
Models without onnxbridge metadata still work when they have one tensor input: columns are then
taken in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._meta import ORT_TO_NUMPY, ModelMetadata, input_block
from onnxbridge._values import all_finite, cast_values, refuse_table_misfits
from onnxbridge.data import normalize_features, preview_names
from onnxbridge.errors import DataError, SchemaMismatchError, first_line
from onnxbridge.runtime._fastpath import has_nan

__all__ = ["InputSchema"]


class InputSchema:
    """What a model takes, and how data is turned into its feeds.

    Args:
        metadata: the model's onnxbridge metadata (None for a model from elsewhere).
        inputs: the session's inputs (``session.get_inputs()``).
    """

    def __init__(self, metadata: ModelMetadata | None, inputs: list[Any]) -> None:
        self.metadata = metadata
        self.inputs = inputs
        self.feature_names: list[str] | None = metadata.features.names if metadata else None
        self.multi_input = self._multi_input()
        self.refuses_missing = metadata is not None and metadata.refuses_missing()
        # The columns a single-tensor input takes (None when unknown); read on every call.
        self.width = len(self.feature_names) if self.feature_names else self.input_width()
        # (input name, dtype, width) of a single float tensor input: array_feeds' fields.
        dtype = self.input_dtype
        self._float_feed = (
            (inputs[0].name, dtype, self.width)
            if dtype is not None and dtype.kind == "f" and self.width is not None
            else None
        )

    @property
    def input_dtype(self) -> np.dtype | None:
        """The numpy element type of the model's one tensor input (None: several inputs, or
        one of a type numpy has no match for)."""
        if len(self.inputs) != 1 or self._multi_input():
            return None
        dtype = ORT_TO_NUMPY.get(self.inputs[0].type)
        return None if dtype is None else np.dtype(dtype)

    def input_width(self) -> int | None:
        """The width the graph's first input declares (None when not a fixed number)."""
        shape = self.inputs[0].shape
        if len(shape) == 2 and isinstance(shape[1], int):
            return shape[1]
        return None

    def array_feeds(self, data: np.ndarray, refuse_nan: bool) -> dict[str, np.ndarray] | None:
        """:meth:`prepare`'s feeds for a float array of the input's width, without its general
        coercion; None for anything else, which :meth:`prepare` takes. Checked as it checks:
        values the input cannot take, and NaN when ``refuse_nan``.
        """
        feed = self._float_feed
        if feed is None or data.ndim != 2 or data.dtype.kind != "f" or not len(data):
            return None
        name, dtype, width = feed
        if data.shape[1] != width:
            return None
        given = data
        if data.dtype is not dtype:
            # The model's input type, as prepare() gives it: float64 rows narrowed for a float
            # model.
            data = cast_values(data, dtype)
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        self._check_floats(given, data, refuse_nan=refuse_nan)
        return {name: data}

    def _frame_to_matrix(self, frame: pd.DataFrame, ignore_extra: bool) -> pd.DataFrame:
        frame = frame.rename(columns=str)
        names = self.feature_names
        if names is None:
            width = self.input_width()
            if width is not None and frame.shape[1] != width:
                raise SchemaMismatchError(
                    f"the model takes {width} columns but the data has {frame.shape[1]}; the model "
                    "has no onnxbridge schema, so columns are taken in order"
                )
            return frame
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise SchemaMismatchError(
                f"missing columns: {', '.join(map(repr, missing))}; the model expects "
                f"{len(names)} columns: {preview_names(names, limit=10)}"
            )
        target = self.metadata.target if self.metadata else None
        extra = [c for c in frame.columns if c not in names and c != target]
        if extra and not ignore_extra:
            raise SchemaMismatchError(
                f"unexpected columns: {', '.join(map(repr, extra))}; drop them or pass "
                "ignore_extra=True to leave them out",
                arguments=("ignore_extra",),
            )
        return frame[names]

    def _multi_input(self) -> bool:
        """Whether the model takes one input per column (tables with text columns)."""
        inputs = self.metadata.inputs if self.metadata else []
        return len(inputs) > 1 or any(spec.get("dtype") == "string" for spec in inputs)

    def prepare(
        self, data: Any, *, ignore_extra: bool = False, allow_missing: bool = False
    ) -> dict[str, np.ndarray]:
        """Turn a DataFrame, 2-D array, mapping of columns or list of records into ORT feeds.

        Raises:
            SchemaMismatchError: missing / unexpected columns, wrong width, non-numeric values,
                missing values (NaN) for a model whose source refuses them.
        """
        if isinstance(data, Mapping) and all(np.ndim(v) == 0 for v in data.values()):
            data = pd.DataFrame([data])  # one row given as {column: value}
        elif isinstance(data, Mapping) or (
            isinstance(data, list) and data and isinstance(data[0], Mapping)
        ):
            data = pd.DataFrame(data)
        if self.multi_input:
            return self._prepare_columns(data, ignore_extra, allow_missing)
        if len(self.inputs) != 1:
            raise SchemaMismatchError(
                f"the model has {len(self.inputs)} inputs but no onnxbridge schema saying which "
                "columns feed which; convert it with `onnxbridge convert` or feed the inputs "
                "yourself with Predictor.run"
            )
        spec = self.inputs[0]
        dtype = ORT_TO_NUMPY.get(spec.type)
        if dtype is None:
            raise SchemaMismatchError(f"input {spec.name!r} has unsupported type {spec.type}")
        if isinstance(data, pd.DataFrame):
            frame = self._frame_to_matrix(data, ignore_extra)
            if dtype is not np.object_:
                frame = _booleans_as_numbers(frame)
            bad = [
                c
                for c in frame.columns
                if not (
                    pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
                )
            ]
            if bad and dtype is not np.object_:
                raise SchemaMismatchError(
                    f"columns {', '.join(map(repr, bad))} are not numeric (dtype "
                    f"{frame[bad[0]].dtype}); the model's input {spec.name!r} takes numbers"
                )
            try:
                given = frame.to_numpy(dtype=np.float64, na_value=np.nan)
                array = cast_values(given, dtype)
            except (TypeError, ValueError) as exc:
                raise SchemaMismatchError(f"cannot cast the data to {spec.type}: {exc}") from exc
        else:
            given = self._matrix(data)
            try:
                # No copy when the array already has the input's type (a 10 000-row batch).
                array = cast_values(given, dtype)
            except (TypeError, ValueError) as exc:
                raise SchemaMismatchError(
                    f"cannot cast the data to {spec.type}: {first_line(exc)}"
                ) from exc
        if array.shape[0] == 0:
            raise SchemaMismatchError("the data has no rows; nothing to predict")
        if array.dtype.kind == "f":
            refuse_nan = not allow_missing and self.refuses_missing
            self._check_floats(given, array, refuse_nan=refuse_nan)
        elif array.dtype.kind in "iub":
            refuse_table_misfits(given, dtype, array, columns=self.feature_names)
        return {spec.name: np.ascontiguousarray(array)}

    def _matrix(self, data: Any) -> np.ndarray:
        """A 2-D array of the model's width from array-like data (columns in training order)."""
        array = np.asarray(data)
        if array.ndim == 1:
            array = array.reshape(1, -1)
        if array.ndim != 2:
            raise SchemaMismatchError(f"data must be 2-D [rows, features], got shape {array.shape}")
        width = self.width
        if width is not None and array.shape[1] != width:
            raise SchemaMismatchError(
                f"data has {array.shape[1]} columns but the model expects {width}"
                + (f": {preview_names(self.feature_names, limit=10)}" if self.feature_names else "")
            )
        return array

    def _prepare_columns(
        self, data: Any, ignore_extra: bool, allow_missing: bool
    ) -> dict[str, np.ndarray]:
        """Feeds for a model with one input per column: ``{input: [N, 1]}``."""
        metadata = self.metadata
        if metadata is None:  # _multi_input() is False without metadata
            raise SchemaMismatchError("the model has no onnxbridge schema for its inputs")
        if not isinstance(data, pd.DataFrame):
            data = pd.DataFrame(self._matrix(data), columns=self.feature_names)
        frame = self._frame_to_matrix(data, ignore_extra)
        if len(frame) == 0:
            raise SchemaMismatchError("the data has no rows; nothing to predict")
        numbers = {c for i in metadata.inputs if i["dtype"] != "string" for c in i["columns"]}
        frame = _booleans_as_numbers(frame, numbers)
        try:
            frame = normalize_features(frame)
        except DataError as exc:
            raise SchemaMismatchError(str(exc)) from exc
        if not allow_missing:
            self._check_missing(frame.isna().to_numpy())
        feeds = {}
        for spec in metadata.inputs:
            try:
                feeds[spec["name"]] = input_block(frame, spec["columns"], spec["dtype"], check=True)
            except SchemaMismatchError:
                raise  # a value that does not fit, already named by row and column
            except (TypeError, ValueError) as exc:
                column = spec["columns"][0]
                sample = frame[column].dropna().head(3).tolist()
                raise SchemaMismatchError(
                    f"column {column!r} must hold numbers for the model's input {spec['name']!r}, "
                    f"got values like {sample!r}; fix or drop those rows"
                ) from exc
        return feeds

    def _check_floats(self, given: np.ndarray, cast: np.ndarray, *, refuse_nan: bool) -> None:
        """Refuse values a float input cannot take and, when ``refuse_nan``, missing values:
        one check when every value is finite (the common case), the details only otherwise.

        Args:
            given: the rows as the caller gave them ``[N, F]`` (or one row ``[F]``).
            cast: the same rows in the input's element type.
        """
        if all_finite(cast):
            return
        if refuse_nan:
            self._refuse_nan(cast)
        refuse_table_misfits(given, cast.dtype, cast, columns=self.feature_names)

    def _refuse_nan(self, array: np.ndarray) -> None:
        """Raise the missing-values error if the float ``array`` holds NaN (the mask, and the
        message, only when there is something to report)."""
        if has_nan(array):
            self._check_missing(np.isnan(array))

    def _check_missing(self, nan_rows: np.ndarray) -> None:
        """Refuse rows with a missing value in a column where the source model refused one
        (``nan_rows [N, F]`` is the mask, columns in training order)."""
        if self.metadata is None or not nan_rows.any():
            return
        names = self.metadata.features.names
        refused = set(self.metadata.missing_refused_columns())
        if not refused:
            return
        nan_rows = np.atleast_2d(nan_rows)
        at = [j for j in range(nan_rows.shape[1]) if j < len(names) and names[j] in refused]
        counts = nan_rows[:, at].sum(axis=0)
        if not counts.any():
            return
        shown = preview_names(
            [f"{names[j]!r} ({int(n)})" for j, n in zip(at, counts, strict=True) if n],
            limit=5,
        )
        n_rows = int(nan_rows[:, at].any(axis=1).sum())
        raise SchemaMismatchError(
            f"missing values (NaN) in {n_rows} row{'s' if n_rows != 1 else ''}, columns: {shown}; "
            "the source model refuses missing values in these columns, so ONNX results for such "
            "rows are not validated: fill or drop them, or pass allow_missing=True",
            arguments=("allow_missing",),
        )


_NUMBER_TYPES = (bool, np.bool_, int, float, np.integer, np.floating)


def _booleans_as_numbers(frame: pd.DataFrame, names: set[Any] | None = None) -> pd.DataFrame:
    """``frame`` with each object column (of ``names``, if given) that holds booleans, numbers
    and missing values as numbers: true / false as 1.0 / 0.0, missing values as NaN, as a
    boolean column with nothing missing is cast. pandas reads a file's boolean column with a
    gap as objects (``True``, ``False``, NaN), and rows given as records may mix ``true`` and
    ``0`` in one column."""
    converted = {}
    for position, (name, column) in enumerate(frame.items()):
        if column.dtype != object or (names is not None and name not in names):
            continue
        present = column.dropna()
        kinds = present.map(type)
        if len(present) and kinds.isin([bool, np.bool_]).any():
            if all(issubclass(kind, _NUMBER_TYPES) for kind in kinds.unique()):
                converted[position] = pd.to_numeric(
                    column.map(lambda v: float(v) if isinstance(v, _NUMBER_TYPES) else v)
                ).astype(np.float64)
    if not converted:
        return frame
    frame = frame.copy()
    for position, values in converted.items():
        frame.isetitem(position, values)
    return frame
