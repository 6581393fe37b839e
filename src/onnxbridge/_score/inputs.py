"""Input discovery and streaming for ``score``: files, folders and globs of CSV / TSV / Parquet,
read as pyarrow record batches of a fixed number of rows so memory stays bounded.

An input may also be a URL of a remote store that fsspec reads (``s3://bucket/day-1.parquet``,
``s3://bucket/days/``, ``s3://bucket/days/*.csv``; the store's fsspec package installed, e.g.
``s3fs``, and its credentials set as that package reads them).

Only the columns the job needs are read (the model's features and the ``--keep`` columns). In
CSV files the model's numeric columns are read as text and cast by :mod:`onnxbridge._score.rows`,
so one bad value is reported with its row instead of stopping the reader.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa

from onnxbridge.errors import DataError, first_line

__all__ = [
    "SUPPORTED_SUFFIXES",
    "InputFile",
    "RemotePath",
    "iter_batches",
    "list_inputs",
    "rechunk",
]

SUPPORTED_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
_GLOB_CHARS = set("*?[")
# One list of missing-value spellings for CSV, used by both engines (pyarrow and pandas readers),
# so that the same text becomes a missing value whichever engine reads it.
CSV_NULL_VALUES = ["", "NA", "N/A", "n/a", "NaN", "nan", "-nan", "NULL", "null", "#N/A", "None"]


@dataclass(frozen=True, eq=False)
class RemotePath:
    """A file of a remote store, read through its fsspec file system.

    Attributes:
        url: the file's URL (``s3://bucket/key.parquet``): how messages and part metadata name it.
        fs: the fsspec file system (it travels to Dask workers with its options).
        key: the file's path within ``fs``.
    """

    url: str
    fs: Any
    key: str

    def __str__(self) -> str:
        return self.url

    def resolve(self) -> RemotePath:
        """Itself: a URL is already absolute."""
        return self

    @property
    def suffix(self) -> str:
        """The file name's extension, as :attr:`pathlib.Path.suffix`."""
        return Path(self.key).suffix


@dataclass(frozen=True)
class InputFile:
    """One input file of a scoring job.

    Attributes:
        path: the file (a local path, or a file of a remote store).
        fmt: ``"csv"``, ``"tsv"`` or ``"parquet"``.
        size: its size in bytes when the job started (resume checks it).
        mtime_ns: its modification time when the job started (resume checks it).
    """

    path: Path | RemotePath
    fmt: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path | RemotePath) -> InputFile:
        """Describe ``path`` (which must be a supported file)."""
        fmt = SUPPORTED_SUFFIXES[path.suffix.lower()]
        if isinstance(path, Path):
            stat = path.stat()
            return cls(path, fmt, stat.st_size, stat.st_mtime_ns)
        info = path.fs.info(path.key)
        try:
            mtime_ns = int(path.fs.modified(path.key).timestamp() * 1e9)
        except (NotImplementedError, OSError, AttributeError):  # a store without times
            mtime_ns = 0
        return cls(path, fmt, int(info.get("size") or 0), mtime_ns)

    @contextlib.contextmanager
    def open(self) -> Iterator[Path | IO[bytes]]:
        """What pyarrow reads the file from: its path, or an open remote file."""
        if isinstance(self.path, Path):
            yield self.path
            return
        with self.path.fs.open(self.path.key, "rb") as fh:
            yield fh

    def parquet_schema(self) -> pa.Schema:
        """The Arrow schema of a Parquet file."""
        import pyarrow.parquet as pq

        with self.open() as where:
            return pq.read_schema(where)

    def column_names(self) -> list[str]:
        """The file's column names (the CSV header, or the Parquet schema).

        Raises:
            DataError: the file cannot be read as its format.
        """
        try:
            if self.fmt == "parquet":
                return [str(n) for n in self.parquet_schema().names]
            with self.open() as where:
                fh = where.open("rb") if isinstance(where, Path) else contextlib.nullcontext(where)
                # utf-8-sig: a byte order mark (Excel's "CSV UTF-8") is not part of the first
                # name; pyarrow's reader drops it too, so both see the same columns.
                with fh as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
                    delimiter = "\t" if self.fmt == "tsv" else ","
                    header = next(csv.reader(text, delimiter=delimiter), None)
        except (OSError, UnicodeDecodeError, csv.Error, pa.ArrowException) as exc:
            raise DataError(
                f"cannot read {str(self.path)!r} as {self.fmt}: {first_line(exc)}; check that "
                f"the file is a valid {self.fmt} file (the format is taken from the extension)"
            ) from exc
        if not header:
            raise DataError(f"{str(self.path)!r} is empty: a CSV file needs a header line")
        return header

    def num_rows(self) -> int | None:
        """Rows in the file when cheap to know (Parquet footers), else None (CSV)."""
        if self.fmt != "parquet":
            return None
        import pyarrow.parquet as pq

        try:
            with self.open() as where:
                return int(pq.read_metadata(where).num_rows)
        except (OSError, pa.ArrowException) as exc:
            raise DataError(
                f"cannot read {str(self.path)!r} as parquet: {first_line(exc)}; check that the "
                "file is a valid Parquet file"
            ) from exc


def _supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES and not path.name.startswith((".", "_"))


def list_inputs(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
) -> list[InputFile]:
    """Expand INPUT arguments into files, in order.

    Each argument is a file, a folder (its ``.csv``, ``.tsv``, ``.parquet`` and ``.pq`` files,
    not recursive, names starting with ``.`` or ``_`` left out, sorted by name) or a glob
    (``data/*.parquet``, ``data/**/*.csv``; matches sorted). A file named twice is scored once.

    Raises:
        DataError: an argument that matches nothing, or a file of an unsupported type.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    allowed = ", ".join(sorted(SUPPORTED_SUFFIXES))
    found: list[Path | RemotePath] = []
    for item in inputs:
        text = os.fspath(item)
        if text.lower().startswith("file://"):
            # A local file by URL is a local file: checked as one (never also the output).
            text = url2pathname(urlparse(text).path)
        elif "://" in text:
            text = _local_path(text) or text
        path = Path(text)
        if "://" in text:
            found.extend(_remote_files(text, allowed))
            continue
        if path.is_dir():
            matches = sorted(p for p in path.iterdir() if p.is_file() and _supported(p))
            if not matches:
                raise DataError(
                    f"the folder {text!r} holds no {allowed} files; pass files, a folder of "
                    "them or a glob"
                )
        elif path.is_file():
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                raise DataError(
                    f"cannot score {text!r}: unknown file type {path.suffix or '(none)'!r}; "
                    f"use one of {allowed}"
                )
            matches = [path]
        elif _GLOB_CHARS & set(text):
            matches = sorted(
                Path(p)
                for p in glob.glob(text, recursive=True)
                if _supported(Path(p)) and Path(p).is_file()  # not a folder named x.parquet
            )
            if not matches:
                raise DataError(f"the pattern {text!r} matches no {allowed} files; check it")
        else:
            raise DataError(
                f"input {text!r} does not exist; pass CSV / Parquet files, a folder of them "
                "or a glob such as 'data/*.parquet'"
            )
        found.extend(matches)
    seen: set[str] = set()
    files = []
    for found_path in found:
        key = str(found_path.resolve())
        if key not in seen:
            seen.add(key)
            files.append(_described(found_path))
    if not files:
        raise DataError("no input files given; pass CSV / Parquet files, a folder or a glob")
    return files


def _local_path(url: str) -> str | None:
    """The local path an fsspec URL of this machine's file system names (``local://``), or
    None for another store. Local files are always read as local paths, so that they are
    checked as such (never also the output); a store layered over local files (a cache) is
    refused: its files are local files under another name.

    Raises:
        DataError: a store layered over the local file system.
    """
    try:
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        fs, key = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError):
        return None  # _remote_files says what is wrong
    if isinstance(fs, LocalFileSystem):
        return str(key)
    layer = getattr(fs, "fs", None)
    while isinstance(layer, fsspec.AbstractFileSystem):
        if isinstance(layer, LocalFileSystem):
            raise DataError(
                f"{url!r} reads local files through {type(fs).__name__}; pass their local "
                "path (or a file:// URL) instead"
            )
        layer = getattr(layer, "fs", None)
    return None


def _remote_files(url: str, allowed: str) -> list[RemotePath]:
    """The files a remote URL names: a file, a folder's supported files or a glob's matches."""
    try:
        import fsspec

        fs, key = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise DataError(
            f"cannot read {url!r}: {first_line(exc)}; install the fsspec package of that store "
            "(s3fs for s3://, gcsfs for gs://, adlfs for az://)"
        ) from exc
    try:
        if _GLOB_CHARS & set(key):
            found = fs.glob(key, detail=True)
            keys = sorted(str(k) for k, info in found.items() if info.get("type") != "directory")
        elif fs.isdir(key):
            listed = fs.ls(key, detail=True)
            keys = sorted(str(i["name"]) for i in listed if i.get("type") != "directory")
        elif fs.isfile(key):
            keys = [key]
        else:
            raise DataError(
                f"input {url!r} does not exist; check the URL (a file, a folder or a glob)"
            )
    except DataError:
        raise
    except Exception as exc:  # each store raises its own errors (credentials, network...)
        raise DataError(
            f"cannot list {url!r}: {type(exc).__name__}: {first_line(exc)}; check the URL and "
            "the store's credentials"
        ) from exc
    names = [k for k in keys if _supported(Path(k))]
    if not names:
        raise DataError(f"{url!r} holds no {allowed} files; pass files, a folder of them or a glob")
    return [RemotePath(fs.unstrip_protocol(k), fs, k) for k in names]


def _described(path: Path | RemotePath) -> InputFile:
    try:
        return InputFile.of(path)
    except DataError:
        raise
    except Exception as exc:  # a remote store's own errors
        raise DataError(f"cannot read {str(path)!r}: {first_line(exc)}") from exc


def rechunk(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Re-cut a stream of record batches into batches of exactly ``size`` rows (the last may be
    shorter), keeping row order."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        count += batch.num_rows
        while count >= size:
            table = pa.Table.from_batches(pending)
            head, rest = table.slice(0, size), table.slice(size)
            yield head.combine_chunks().to_batches()[0]
            pending = rest.combine_chunks().to_batches() if rest.num_rows else []
            count = rest.num_rows
    if count:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def iter_batches(
    source: InputFile,
    *,
    batch_size: int,
    columns: Sequence[str] | None,
    text_columns: Sequence[str] = (),
) -> Iterator[pa.RecordBatch]:
    """Stream ``source`` as record batches of ``batch_size`` rows.

    Args:
        source: the file.
        batch_size: rows per batch.
        columns: the columns to read (None: all), in the file's order.
        text_columns: CSV columns to read as text whatever they look like (the model's numeric
            features: cast later, row by row, so a bad value names its row).

    Raises:
        DataError: the file cannot be read or parsed.
    """
    try:
        with source.open() as where:
            yield from rechunk(_read(source, where, batch_size, columns, text_columns), batch_size)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(
            f"cannot read {str(source.path)!r} as {source.fmt}: {first_line(exc)}; check that "
            f"the file is a valid {source.fmt} file"
        ) from exc


def _read(
    source: InputFile,
    where: Path | IO[bytes],
    batch_size: int,
    columns: Sequence[str] | None,
    text_columns: Sequence[str],
) -> Iterable[pa.RecordBatch]:
    if source.fmt == "parquet":
        import pyarrow.parquet as pq

        reader = pq.ParquetFile(where)
        return reader.iter_batches(
            batch_size=batch_size, columns=list(columns) if columns is not None else None
        )
    import pyarrow.csv as pcsv

    # Every column read from a CSV file is text (``text_columns`` among them): the model's
    # features are cast row by row by onnxbridge._score.rows, so a bad value names its row,
    # and key columns stay exactly as written. pyarrow would type a column from the first block
    # it reads: a key of digits would lose its leading zeros (00007 -> 7), and a value that
    # does not fit that guess further down (an id 'X-1' after 4 MB of numbers) would stop the
    # reader, whatever on_error says.
    names = list(columns) if columns is not None else source.column_names()
    text = {*names, *text_columns}
    return pcsv.open_csv(
        where,
        read_options=pcsv.ReadOptions(block_size=1 << 22),
        parse_options=pcsv.ParseOptions(delimiter="\t" if source.fmt == "tsv" else ","),
        convert_options=pcsv.ConvertOptions(
            include_columns=list(columns) if columns is not None else None,
            column_types={c: pa.string() for c in text},
            null_values=CSV_NULL_VALUES,
            strings_can_be_null=True,
        ),
    )
