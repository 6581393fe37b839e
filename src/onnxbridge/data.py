"""Datasets: built-in names, CSV / Parquet / JSON-lines files, splits and the feature schema.

A dataset is a feature table ``X`` (a pandas DataFrame, ``[N, F]``) and a target ``y`` (``[N]``).
The :class:`FeatureSchema` describes the columns of ``X``; it travels in ``card.json`` and in the
ONNX file's ``metadata_props`` so that a model can match columns by name later.

This module must stay importable without scikit-learn (the runtime layer reads schemas):
scikit-learn is imported inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from onnxbridge._files import atomic_write_path, file_sha256
from onnxbridge.errors import DataError, first_line

__all__ = [
    "BUILTIN_DATASETS",
    "Dataset",
    "FeatureSchema",
    "FeatureSpec",
    "blank_column",
    "blank_values",
    "check_test_size",
    "data_format",
    "hash_frame",
    "load_dataset",
    "normalize_features",
    "preview_names",
    "read_table",
    "split_dataset",
    "write_jsonl",
    "write_table",
]

BUILTIN_DATASETS: tuple[str, ...] = ("breast_cancer", "diabetes", "digits", "iris", "wine")
_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}


@dataclass(frozen=True)
class FeatureSpec:
    """One input column: its name and the dtype it had in the training data."""

    name: str
    dtype: str

    @property
    def is_numeric(self) -> bool:
        """Whether the column holds numbers or booleans."""
        return _is_numeric_dtype_name(self.dtype)

    @property
    def kind(self) -> str:
        """``"numeric"`` (numbers, booleans) or ``"string"`` (text and categories)."""
        return "numeric" if self.is_numeric else "string"


@dataclass(frozen=True)
class FeatureSchema:
    """The ordered feature columns a model was trained on."""

    features: tuple[FeatureSpec, ...]

    @property
    def names(self) -> list[str]:
        """Column names in training order."""
        return [f.name for f in self.features]

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return len(self.features)

    @property
    def all_numeric(self) -> bool:
        """Whether every column is numeric (then the model takes one float tensor)."""
        return all(f.is_numeric for f in self.features)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> FeatureSchema:
        """Infer the schema from a DataFrame's columns and dtypes."""
        return cls(tuple(FeatureSpec(str(c), str(frame[c].dtype)) for c in frame.columns))

    def to_list(self) -> list[dict[str, str]]:
        """JSON form: ``[{"name": ..., "dtype": ...}, ...]``."""
        return [{"name": f.name, "dtype": f.dtype} for f in self.features]

    @classmethod
    def from_list(cls, items: Sequence[Mapping[str, Any]]) -> FeatureSchema:
        """Inverse of :meth:`to_list`."""
        try:
            return cls(tuple(FeatureSpec(str(i["name"]), str(i["dtype"])) for i in items))
        except (KeyError, TypeError) as exc:
            raise DataError(
                f"feature schema is malformed ({exc!r}); expected a list of "
                '{"name": ..., "dtype": ...} objects'
            ) from exc


@dataclass
class Dataset:
    """Features, target and where they came from."""

    X: pd.DataFrame
    y: pd.Series
    source: dict[str, Any]
    target_names: list[str] | None = None
    schema: FeatureSchema = field(init=False)

    def __post_init__(self) -> None:
        self.schema = FeatureSchema.from_frame(self.X)


def _is_numeric_dtype_name(dtype: str) -> bool:
    try:
        kind = np.dtype(dtype).kind
    except TypeError:
        # pandas extension dtypes (Int64, Float32, boolean, ...).
        lowered = dtype.lower()
        return lowered.startswith(("int", "uint", "float", "bool"))
    return kind in "biuf"


_UNSUPPORTED_HINT = (
    "drop them, or turn them into numbers or strings first (e.g. a date into its year, month "
    "and day; a list into one column per item)"
)


def _object_kind(values: pd.Series) -> str:
    """What an object column holds: ``boolean``, ``string`` or ``unsupported``."""
    present = values.dropna()
    if present.empty:
        return "string"
    types = {type(v) for v in present.head(1000)}
    if types <= {bool, np.bool_}:
        return "boolean"
    if all(issubclass(t, (str, int, float, np.integer, np.floating)) for t in types):
        return "string"  # text, or text mixed with numbers (codes): one category per value
    return "unsupported"


def category_spellings(value: Any) -> list[str]:
    """Every text under which a category value may reach a graph's text input.

    onnxbridge feeds a category column as ``str(value)`` of however pandas holds the value: a
    text category is itself; a number is ``"3"`` from an integer column and ``"3.0"`` from a
    float one (a column of integers with a missing value is float), so an integral number
    answers to both spellings.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, float) and not (value.is_integer() and abs(value) < 2**63):
        return [str(value)]
    whole = int(value)
    return [str(whole), str(float(whole))]


def normalize_features(X: pd.DataFrame) -> pd.DataFrame:
    """Give every feature column one of the two kinds models take, the same way everywhere.

    Numbers and booleans stay as they are (a column of True/False with missing values, which
    pandas keeps as objects, becomes float 1/0/NaN); text and categories become ``object``
    columns of ``str`` with ``NaN`` for missing values (an empty string counts as missing).
    Training, the held-out rows, validation and prediction all go through this function, so
    scikit-learn and ONNX see the same values.

    Raises:
        DataError: columns of dates, durations, nested values or other types no model takes,
            named with what to do.
    """
    columns: dict[str, pd.Series] = {}
    unsupported: list[str] = []
    for name in X.columns:
        column = X[name]
        dtype = column.dtype
        if pd.api.types.is_bool_dtype(dtype) or (
            pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype)
        ):
            columns[name] = column
            continue
        if isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(dtype):
            kind = "string" if not pd.api.types.is_object_dtype(dtype) else _object_kind(column)
        else:
            kind = "unsupported"
        if kind == "boolean":
            columns[name] = column.map(lambda v: np.nan if pd.isna(v) else float(v)).astype(
                np.float64
            )
        elif kind == "string":
            text = column.astype(object)
            # ONNX string tensors have no missing value, so "" stands for one there: read it as
            # missing here too, so that scikit-learn and ONNX see the same row.
            missing = (
                text.isna() | (text.map(lambda v: isinstance(v, str) and v == ""))
            ).to_numpy()
            values = np.where(missing, np.nan, text.map(str).to_numpy(dtype=object))
            columns[name] = pd.Series(values, index=X.index, dtype=object, name=name)
        else:
            unsupported.append(f"{name!r} ({dtype})")
    if unsupported:
        raise DataError(
            f"columns {', '.join(unsupported)} hold values no model can take; {_UNSUPPORTED_HINT}"
        )
    return pd.DataFrame(columns, index=X.index)


def blank_values(column: pd.Series, rows: Any = None) -> pd.Series:
    """``column`` with a missing value on ``rows`` (positions) or on every row, as a new Series.

    The one rule for "this value is missing" wherever onnxbridge makes probe rows: a number or
    boolean column becomes float64 holding NaN; a text or category column keeps its dtype and
    holds that dtype's missing value (None in an ``object`` column), so a model fitted on text
    still sees text with one value missing.
    """
    dtype = column.dtype
    missing: Any
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        column = column.astype(np.float64)
        missing = np.nan
    elif isinstance(dtype, pd.CategoricalDtype):
        column = column.copy()
        missing = np.nan
    elif pd.api.types.is_object_dtype(dtype):
        column = column.copy()
        missing = None
    else:  # pandas' string dtype
        column = column.copy()
        missing = pd.NA
    if rows is None:
        return pd.Series(
            [missing] * len(column), index=column.index, dtype=column.dtype, name=column.name
        )
    column.iloc[rows] = missing
    return column


def blank_column(frame: pd.DataFrame, name: str, rows: Any = None) -> None:
    """Make ``frame[name]`` missing in place, on ``rows`` (positions) or on every row
    (:func:`blank_values`)."""
    frame[name] = blank_values(frame[name], rows)


def data_format(path: Path, *, action: str = "read") -> str:
    """The table format of ``path`` from its extension.

    Args:
        path: the file.
        action: ``"read"`` or ``"write"``, for the error message.

    Raises:
        DataError: if the extension is not one of the supported formats.
    """
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        allowed = ", ".join(sorted(_FORMATS))
        raise DataError(
            f"cannot {action} {str(path)!r}: unknown file type {path.suffix or '(none)'!r}; "
            f"use one of {allowed}"
        )
    return fmt


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV, TSV, Parquet or JSON-lines file into a DataFrame.

    Raises:
        DataError: if the file is missing, of an unknown type, or cannot be parsed as its type.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(
            f"{str(path)!r} is a folder, not a data file; pass one CSV, TSV, Parquet or JSON "
            "file, or use `onnxbridge score` for a folder of files"
        )
    fmt = data_format(path)
    if not path.is_file():
        raise DataError(f"data file {str(path)!r} does not exist; check the path")
    try:
        if fmt in ("csv", "tsv"):
            frame = _read_delimited(path, "\t" if fmt == "tsv" else ",")
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = _read_json(path)
    except DataError:
        raise
    except Exception as exc:  # pandas / pyarrow raise many unrelated types for bad files
        raise DataError(
            f"cannot read {str(path)!r} as {fmt}: {first_line(exc)}; check that the file is a "
            f"valid {fmt} file (the format is taken from the extension)"
        ) from exc
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise DataError(f"data file {str(path)!r} has no rows or no columns; nothing to use")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def _read_delimited(path: Path, sep: str) -> pd.DataFrame:
    """A CSV / TSV file whose columns are the header's names.

    A delimiter at the end of every row (as some exporters write) is an empty last field, left
    out; a row with more values than the header has names is refused. (pandas would otherwise
    take the first column as the index and shift every value one column to the left.)
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            frame = pd.read_csv(path, sep=sep, index_col=False)
        except pd.errors.ParserWarning as exc:  # index_col=False would drop the extra values
            raise DataError(
                f"rows of {str(path)!r} have more values than its header has names; fix the "
                "header (a name for every column) or remove the extra values"
            ) from exc
    _refuse_repeated_names(path, sep, len(frame.columns))
    return frame


def _refuse_repeated_names(path: Path, sep: str, width: int) -> None:
    """Refuse a header naming a column twice (pandas renames the second ``a`` to ``a.1``, so a
    model would silently take another column than the file's ``a``), as a Parquet file's is."""
    import csv

    with path.open(newline="", encoding="utf-8-sig", errors="replace") as handle:
        # The header is the first line that is not blank, as pandas reads it.
        header = next((row for row in csv.reader(handle, delimiter=sep) if row), [])[:width]
    seen: set[str] = set()
    for name in header:
        if name and name in seen:  # unnamed columns are pandas' "Unnamed: k", each its own
            raise DataError(
                f"{str(path)!r} names the column {name!r} more than once; give every column a "
                "name of its own"
            )
        seen.add(name)


def _read_json(path: Path) -> pd.DataFrame:
    """JSON lines (one object per line), or a JSON array of row objects."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"["):
        return pd.read_json(path, orient="records")
    return pd.read_json(path, lines=True)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _json_value(value.item())
    return value


def write_jsonl(frame: pd.DataFrame, stream: Any) -> None:
    """Write one JSON object per row, numbers at full precision (NaN becomes null)."""
    columns = [str(c) for c in frame.columns]
    values = []
    for c in frame.columns:
        col = frame[c].to_numpy()
        if col.dtype == np.float32:
            # Shortest text that reads back as the same float32, not float64's 17 digits.
            col = np.where(np.isfinite(col), col.astype(str), "nan").astype(np.float64)
        values.append(col.tolist())
    for row in zip(*values, strict=True):
        record = {c: _json_value(v) for c, v in zip(columns, row, strict=True)}
        stream.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_table(frame: pd.DataFrame, path: str | Path, fmt: str | None = None) -> None:
    """Write ``frame`` as CSV / Parquet / JSON lines, atomically (temp file, then rename)."""
    path = Path(path)
    fmt = fmt or data_format(path, action="write")
    with atomic_write_path(path) as tmp:
        if fmt == "csv":
            frame.to_csv(tmp, index=False)
        elif fmt == "tsv":
            frame.to_csv(tmp, index=False, sep="\t")
        elif fmt == "parquet":
            frame.to_parquet(tmp, index=False)
        elif fmt == "jsonl":
            with tmp.open("w", encoding="utf-8") as fh:
                write_jsonl(frame, fh)
        else:
            raise DataError(f"unknown output format {fmt!r}; use csv, tsv, parquet or jsonl")


def hash_frame(frame: pd.DataFrame | pd.Series) -> str:
    """A stable sha256 of a table's content (values, column names and dtypes)."""
    digest = hashlib.sha256()
    if isinstance(frame, pd.Series):
        frame = frame.to_frame()
    meta = [[str(c), str(frame[c].dtype)] for c in frame.columns]
    digest.update(json.dumps(meta).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def _load_builtin(name: str) -> Dataset:
    from sklearn import datasets

    loader = getattr(datasets, f"load_{name}")
    bunch = loader(as_frame=True)
    X = bunch.data.copy()
    X.columns = [str(c) for c in X.columns]
    y = bunch.target.rename("target")
    target_names = None
    if getattr(bunch, "target_names", None) is not None and name != "diabetes":
        target_names = [str(t) for t in bunch.target_names]
    source = {"kind": "builtin", "name": name, "sha256": hash_frame(pd.concat([X, y], axis=1))}
    return Dataset(X=X, y=y, source=source, target_names=target_names)


def load_dataset(data: str, target: str | None = None) -> Dataset:
    """Load a built-in dataset by name, or a CSV / Parquet / JSON-lines file with a target column.

    Args:
        data: one of :data:`BUILTIN_DATASETS`, or a path to a ``.csv``, ``.tsv``, ``.parquet`` or
            ``.jsonl`` file.
        target: the target column of a file (required for files; must be omitted or ``"target"``
            for built-in datasets).

    Raises:
        DataError: unknown name, unreadable file, missing or unknown target column, a target with
            missing values, or no feature columns left.
    """
    if data in BUILTIN_DATASETS:
        if target not in (None, "target"):
            raise DataError(
                f"target={target!r} does not apply to the built-in dataset {data!r}: its "
                "target column is fixed, so leave out target=",
                arguments=("target",),
            )
        return _load_builtin(data)
    path = Path(data)
    looks_like_file = path.suffix != "" or "/" in data or path.exists()
    if not looks_like_file:
        raise DataError(
            f"data={data!r} is not a built-in dataset ({', '.join(BUILTIN_DATASETS)}) nor a "
            "path to a .csv, .tsv, .parquet or .jsonl file",
            arguments=("data",),
        )
    frame = read_table(path)
    if target is None:
        raise DataError(
            f"{str(path)!r} is a file, so name its target column: target=COLUMN; "
            f"columns are: {preview_names(frame.columns)}",
            arguments=("target",),
        )
    if target not in frame.columns:
        raise DataError(
            f"target={target!r} is not a column of {str(path)!r}; columns are: "
            f"{preview_names(frame.columns)}",
            arguments=("target",),
        )
    y = frame[target]
    if y.isna().any():
        raise DataError(
            f"target column {target!r} has {int(y.isna().sum())} missing values; "
            "drop or fill those rows first"
        )
    X = normalize_features(frame.drop(columns=[target]))
    if X.shape[1] == 0:
        raise DataError(f"{str(path)!r} has no feature columns besides the target {target!r}")
    source = {
        "kind": "file",
        # Absolute so that a retrain (bench --sweep) finds it from any folder; not resolved, so
        # a symlink stays the name the user gave, in the card and in messages that quote it.
        "path": str(path.absolute()),
        "format": data_format(path),
        "sha256": file_sha256(path),
    }
    return Dataset(X=X, y=y, source=source)


def preview_names(columns: Sequence[Any] | None, limit: int = 12) -> str:
    """Column names for an error message: the first ``limit``, then how many more."""
    names = [] if columns is None else [str(c) for c in columns]
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def check_test_size(test_size: float) -> None:
    """Refuse a held-out fraction outside (0, 1).

    Raises:
        DataError: naming ``test_size=``.
    """
    if not 0.0 < test_size < 1.0:
        raise DataError(
            f"test_size={test_size} is not allowed; it must be between 0 and 1 (exclusive)",
            arguments=("test_size",),
        )


def check_split(n_rows: int, test_size: float) -> None:
    """Check that ``test_size`` of ``n_rows`` rows leaves at least one row on each side.

    Raises:
        DataError: ``test_size`` outside (0, 1), or an empty train or test set.
    """
    check_test_size(test_size)
    n_test = int(np.ceil(test_size * n_rows))
    if n_test < 1 or n_rows - n_test < 1:
        raise DataError(
            f"test_size={test_size} leaves an empty train or test set for {n_rows} rows; "
            "choose a value that keeps at least one row on each side",
            arguments=("test_size",),
        )


def split_dataset(
    dataset: Dataset, *, test_size: float = 0.3, seed: int = 42, stratify: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series, pd.Series]:
    """Train/test split as scikit-learn's ``train_test_split`` does it.

    Raises:
        DataError: if ``test_size`` is outside (0, 1) or leaves an empty side.
    """
    from sklearn.model_selection import train_test_split

    check_split(len(dataset.X), test_size)
    try:
        return train_test_split(
            dataset.X,
            dataset.y,
            test_size=test_size,
            random_state=seed,
            stratify=dataset.y if stratify else None,
        )
    except ValueError as exc:
        raise DataError(f"cannot split the data: {exc}") from exc
