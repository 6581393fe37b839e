"""Output of ``score``: the layout (one file, or a folder of part files), atomic part writers and
the rules that decide whether a part is complete (for ``--resume``).

Layout of a folder output::

    OUT/
      part-00000.parquet        predictions for the 1st input file, rows in input order
      part-00001.parquet        ...
      _bad_rows/part-00001.parquet   skipped rows of that input (--on-error skip), if any
      _manifest.json            written last: the job is complete

A part is written under a hidden temporary name (``.part-00001.parquet.XXXX.tmp``) and renamed
into place when it is complete, its side file of bad rows first. So a part file under its final
name is complete by construction; ``--resume`` also checks that the Parquet footer reads and
that the part's metadata (``onnxbridge.score`` in the Parquet key-value metadata) names the same
input file (path, size, modification time), the same model (sha256) and the same options.
Parquet readers (pandas, pyarrow, Spark, DuckDB) skip names starting with ``.`` or ``_``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from onnxbridge._files import atomic_write_path
from onnxbridge.errors import DataError, first_line

__all__ = [
    "BAD_ROWS_DIR",
    "MANIFEST_NAME",
    "METADATA_KEY",
    "OutputLayout",
    "PartSink",
    "open_part",
    "part_identity",
    "read_part",
]

MANIFEST_NAME = "_manifest.json"
BAD_ROWS_DIR = "_bad_rows"
METADATA_KEY = b"onnxbridge.score"
_PART = re.compile(r"^part-\d{5,}\.parquet$")
_TEMP = re.compile(r"^\.(part-\d{5,}\.parquet|_manifest\.json)\..+\.tmp$")
_FILE_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class OutputLayout:
    """Where a job's output goes.

    Attributes:
        path: the output file or folder.
        single_file: one Parquet file (``--output x.parquet``) rather than a folder of parts.
    """

    path: Path
    single_file: bool

    @classmethod
    def for_output(cls, output: str | Path) -> OutputLayout:
        """A path ending in ``.parquet`` / ``.pq`` is one file; anything else is a folder."""
        path = Path(output)
        return cls(path, path.suffix.lower() in _FILE_SUFFIXES)

    def part_path(self, index: int) -> Path:
        """The final name of part ``index`` (a folder output)."""
        return self.path / f"part-{index:05d}.parquet"

    def bad_rows_path(self, index: int | None = None) -> Path:
        """The side file of skipped rows: of part ``index``, or of the single output file."""
        if self.single_file:
            return self.path.with_name(self.path.stem + ".bad-rows.parquet")
        return self.path / BAD_ROWS_DIR / f"part-{index:05d}.parquet"

    def prepare(self, *, resume: bool, overwrite: bool) -> None:
        """Check that the output may be written, clear it for ``overwrite``, drop stale
        temporary files of an interrupted run.

        Raises:
            DataError: the output exists and neither ``resume`` nor ``overwrite`` is set, or
                it is not a score output (so it is never replaced).
        """
        path = self.path
        if self.single_file:
            if path.is_dir():
                raise DataError(
                    f"--output {str(path)!r} is a folder but its name ends in {path.suffix}; "
                    "choose a file name, or a folder name without .parquet"
                )
            if path.exists() and not (resume or overwrite):
                raise DataError(
                    f"--output {str(path)!r} exists; pass --overwrite to replace it or --resume "
                    "to keep it if it was made by this same job"
                )
            return
        if path.exists() and not path.is_dir():
            raise DataError(
                f"--output {str(path)!r} is a file; a folder output needs a folder name (or end "
                "the name in .parquet for a single file)"
            )
        if not path.is_dir() or not any(path.iterdir()):
            return
        foreign = [p.name for p in path.iterdir() if not _ours(p)]
        if foreign:
            raise DataError(
                f"--output {str(path)!r} holds files that score did not write "
                f"({', '.join(sorted(foreign)[:3])}); score only replaces or resumes its own "
                "output folders, so choose another --output"
            )
        if overwrite and not resume:
            for entry in path.iterdir():
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            return
        if not resume:
            raise DataError(
                f"--output {str(path)!r} already holds scores; pass --resume to finish an "
                "interrupted run (completed parts are kept) or --overwrite to replace them"
            )
        for folder in (path, path / BAD_ROWS_DIR):
            if folder.is_dir():
                for entry in folder.iterdir():
                    if _TEMP.match(entry.name):
                        entry.unlink()
        (path / MANIFEST_NAME).unlink(missing_ok=True)

    def write_manifest(self, payload: dict[str, Any]) -> Path:
        """Write ``_manifest.json`` (atomically): the job is complete."""
        target = self.path / MANIFEST_NAME
        with atomic_write_path(target) as tmp:
            tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
        return target


def _ours(entry: Path) -> bool:
    name = entry.name
    if entry.is_dir():
        return name == BAD_ROWS_DIR and all(
            _PART.match(p.name) or _TEMP.match(p.name) for p in entry.iterdir()
        )
    return bool(_PART.match(name) or _TEMP.match(name) or name == MANIFEST_NAME)


def part_identity(
    sources: Sequence[Any], model_sha256: str, options: dict[str, Any]
) -> dict[str, Any]:
    """What a part records about how it was made, and what ``--resume`` compares."""
    return {
        "format": 1,
        "sources": [
            {"path": str(s.path.resolve()), "size": s.size, "mtime_ns": s.mtime_ns} for s in sources
        ],
        "model_sha256": model_sha256,
        "options": options,
    }


def read_part(path: Path) -> tuple[dict[str, Any] | None, int]:
    """The identity and row count recorded in a finished part (identity None: unreadable or
    not written by score)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException):
        return None, 0
    raw = (meta.metadata or {}).get(METADATA_KEY)
    if raw is None:
        return None, meta.num_rows
    try:
        return json.loads(raw), meta.num_rows
    except ValueError:
        return None, meta.num_rows


class PartSink:
    """Streams tables into one output Parquet file (and its side file of bad rows)."""

    def __init__(
        self, tmp: Path, bad_path: Path, stack: contextlib.ExitStack, identity: dict[str, Any]
    ) -> None:
        self._tmp = tmp
        self._bad_path = bad_path
        self._stack = stack
        self._metadata = {METADATA_KEY: json.dumps(identity).encode()}
        self._writer: Any = None
        self._bad_writer: Any = None
        self.rows = 0
        self.bad_rows = 0

    def write(self, table: pa.Table | None, bad: pa.Table | None = None) -> None:
        """Append scored rows (and bad rows)."""
        import pyarrow.parquet as pq

        if table is not None and table.num_rows:
            if self._writer is None:
                schema = table.schema.with_metadata(self._metadata)
                self._writer = pq.ParquetWriter(self._tmp, schema)
            self._writer.write_table(_conform(table, self._writer.schema, self._tmp))
            self.rows += table.num_rows
        if bad is not None and bad.num_rows:
            if self._bad_writer is None:
                tmp = self._stack.enter_context(atomic_write_path(self._bad_path))
                self._bad_writer = pq.ParquetWriter(tmp, bad.schema)
            self._bad_writer.write_table(_conform(bad, self._bad_writer.schema, self._bad_path))
            self.bad_rows += bad.num_rows

    def finish(self, empty: pa.Table) -> None:
        """Close the writers; a part without scored rows gets ``empty``'s schema."""
        if self._writer is None:
            self.write(empty)
            if self._writer is None:
                import pyarrow.parquet as pq

                schema = empty.schema.with_metadata(self._metadata)
                self._writer = pq.ParquetWriter(self._tmp, schema)
        self.close()

    def close(self) -> None:
        """Close the writers (without committing: that is the rename on leaving the block)."""
        for writer in (self._writer, self._bad_writer):
            if writer is not None:
                writer.close()
        self._writer = self._bad_writer = None


def _conform(table: pa.Table, schema: pa.Schema, where: Path) -> pa.Table:
    """Cast ``table`` to the schema of the file it is appended to (inputs may differ in the type
    they give a key column)."""
    if table.schema.equals(schema, check_metadata=False):
        return table
    try:
        return table.select(schema.names).cast(schema.remove_metadata())
    except (pa.ArrowException, KeyError, ValueError) as exc:
        raise DataError(
            f"cannot append to {str(where)!r}: the columns' types differ between inputs "
            f"({first_line(exc)}); write a folder output (one part per input) instead"
        ) from exc


@contextlib.contextmanager
def open_part(
    path: Path, bad_path: Path, identity: dict[str, Any], empty: pa.Table
) -> Iterator[PartSink]:
    """A :class:`PartSink` whose file is renamed to ``path`` (side file first) only when the
    block succeeds; on error or interruption nothing appears under the final names.

    A stale side file of an earlier, interrupted attempt at the same part is removed first;
    ``empty`` gives the schema of a part in which no row could be scored.
    """
    bad_path.unlink(missing_ok=True)
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(atomic_write_path(path))
        sink = PartSink(tmp, bad_path, stack, identity)
        try:
            yield sink
        except BaseException:
            sink.close()
            raise
        sink.finish(empty)
