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

Nothing is lost: :meth:`OutputLayout.check` decides, without touching the disk, whether a job may
write its output (never over one of its inputs, never over a file or folder score did not write:
parts and side files are recognised by their own Parquet metadata); :func:`output_lock` holds
one advisory lock per output (a hidden ``.NAME.lock`` file beside it) for the whole job, so only
then does :meth:`OutputLayout.clear` remove anything: the orphaned temporary files of a killed
run, the manifest a resumed job rewrites, or the old output ``--overwrite`` replaces.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from onnxbridge._files import atomic_write_path
from onnxbridge._score.rows import BAD_ROW_COLUMNS
from onnxbridge.errors import DataError, first_line

__all__ = [
    "BAD_ROWS_DIR",
    "MANIFEST_NAME",
    "METADATA_KEY",
    "OutputLayout",
    "PartSink",
    "open_part",
    "output_lock",
    "part_identity",
    "parts_folder",
    "read_part",
]

MANIFEST_NAME = "_manifest.json"
BAD_ROWS_DIR = "_bad_rows"
METADATA_KEY = b"onnxbridge.score"
_PART = re.compile(r"^part-(\d{5,})\.parquet$")
_TEMP = re.compile(r"^\.(part-\d{5,}\.parquet|_manifest\.json)\..+\.tmp$")
# The temporary name atomic_write_path gives a file NAME: ".NAME.<8 random characters>.tmp".
_SINGLE_TEMP = re.compile(r"^\.(.+)\.[a-z0-9_]{8}\.tmp$")
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
        """A path ending in ``.parquet`` / ``.pq`` is one file; anything else is a folder.

        Raises:
            DataError: ``output`` is a URL (outputs are local paths).
        """
        if "://" in os.fspath(output):
            raise DataError(
                f"the output {os.fspath(output)!r} is a URL; score writes to a local file or "
                "folder: write it locally, then copy it to the store"
            )
        path = Path(output)
        return cls(path, path.suffix.lower() in _FILE_SUFFIXES)

    def part_path(self, index: int) -> Path:
        """The final name of part ``index`` (a folder output)."""
        return self.path / f"part-{index:05d}.parquet"

    def bad_rows_path(self, index: int | None = None) -> Path:
        """The side file of skipped rows: of part ``index``, or of the single output file
        (``x.parquet``: ``x.bad-rows.parquet``, ``x.pq``: ``x.bad-rows.pq``; one name per
        output name, so that two outputs never share one)."""
        if self.single_file:
            return self.path.with_name(f"{self.path.stem}.bad-rows{self.path.suffix}")
        return self.path / BAD_ROWS_DIR / f"part-{index:05d}.parquet"

    @property
    def lock_path(self) -> Path:
        """The lock file of this output: hidden, beside it (so a refused run creates no folder),
        named after the output's real path: every spelling of one output (a link to it, a
        relative path) takes the same lock."""
        try:
            real = self.path.resolve()
        except (OSError, RuntimeError):  # a link loop: the path as given
            real = self.path.absolute()
        return real.parent / f".{real.name}.lock"

    def check(
        self, inputs: Sequence[Any], *, resume: bool, overwrite: bool, locked: bool = False
    ) -> None:
        """Refuse an output this job may not write; reads only, changes nothing on disk.

        Args:
            inputs: the job's input files (``InputFile``: ``.path``).
            resume: ``--resume`` was given.
            overwrite: ``--overwrite`` was given.
            locked: this process holds the output's lock (:func:`output_lock`).

        Raises:
            DataError: another run holds the output's lock; the output is (or holds, or
                links to) one of the inputs; it exists and is not a score output (never
                replaced); it exists and neither ``resume`` nor ``overwrite`` is set; it is a
                file where a folder is needed or the reverse.
        """
        path = self.path
        if not locked:
            self._check_not_locked()
        self._check_not_input(inputs)
        if self.single_file:
            if path.is_dir():
                raise DataError(
                    f"output={str(path)!r} is a folder but its name ends in {path.suffix}; "
                    "choose a file name, or a folder name without .parquet",
                    arguments=("output",),
                )
            bad_path = self.bad_rows_path()
            for target, ours in ((path, _is_part), (bad_path, _is_bad_rows_file)):
                if target.exists() and not ours(target):
                    raise DataError(
                        f"output={str(path)!r}: {str(target)!r} exists and score did not "
                        "write it; score only replaces or resumes its own output, so choose "
                        "another output= or move that file away",
                        arguments=("output",),
                    )
            if path.exists() and not (resume or overwrite):
                raise DataError(
                    f"output={str(path)!r} exists; pass overwrite=True to replace it or "
                    "resume=True to keep it if it was made by this same job",
                    arguments=("output", "overwrite", "resume"),
                )
            return
        if path.exists() and not path.is_dir():
            raise DataError(
                f"output={str(path)!r} is a file; a folder output needs a folder name (or end "
                "the name in .parquet for a single file)",
                arguments=("output",),
            )
        if not path.is_dir() or not any(path.iterdir()):
            return
        foreign = [p.name for p in path.iterdir() if not _ours(p)]
        if foreign:
            raise DataError(
                f"output={str(path)!r} holds files that score did not write "
                f"({', '.join(sorted(foreign)[:3])}); score only replaces or resumes its own "
                "output folders, so choose another output=",
                arguments=("output",),
            )
        if not (resume or overwrite):
            raise DataError(
                f"output={str(path)!r} already holds scores; pass resume=True to finish an "
                "interrupted run (completed parts are kept) or overwrite=True to replace them",
                arguments=("output", "overwrite", "resume"),
            )
        extra = self.extra_parts(len(inputs))
        if resume and not overwrite and extra:
            raise DataError(
                f"cannot resume: output={str(path)!r} holds {extra[0].name}, a part this job "
                f"does not write (it has {len(inputs)} input file"
                f"{'s' if len(inputs) != 1 else ''}): it comes from a job with other inputs; "
                "add overwrite=True to remove it",
                arguments=("output", "overwrite"),
            )

    def extra_parts(self, parts: int) -> list[Path]:
        """The part files (and side files) of a folder output beyond a job of ``parts`` parts."""
        found = []
        for folder in (self.path, self.path / BAD_ROWS_DIR):
            if not folder.is_dir():
                continue
            for entry in folder.iterdir():
                match = _PART.match(entry.name)
                if match and int(match.group(1)) >= parts:
                    found.append(entry)
        return sorted(found)

    def _check_not_locked(self) -> None:
        """Refuse an output another run is writing (a probe: takes and drops a shared lock, so a
        second run is told about the first before any other check about the output)."""
        try:
            fd = os.open(self.lock_path, os.O_RDONLY)
        except OSError:  # no lock file: nobody holds it (output_lock reports other problems)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise _held_error(self, fd) from exc
        finally:
            os.close(fd)

    def _check_not_input(self, inputs: Sequence[Any]) -> None:
        """Refuse an output that is, holds, or links (symlink, hard link) to an input file."""
        ids: dict[tuple[int, int], Path] = {}
        resolved: dict[Path, Path] = {}
        for source in inputs:
            if not isinstance(source.path, Path):  # a remote store's file: never an output
                continue
            stat = source.path.stat()
            ids[(stat.st_dev, stat.st_ino)] = source.path
            resolved[source.path.resolve()] = source.path
        if self.single_file:
            candidates = [self.path, self.bad_rows_path()]
        else:
            root = self.path.resolve()
            for real, given in resolved.items():
                if real == root or root in real.parents:
                    self._refuse_input(given)
            candidates = [*self._entries()]
        for candidate in candidates:
            if candidate.resolve() in resolved:
                self._refuse_input(resolved[candidate.resolve()])
            try:
                stat = candidate.stat()
            except OSError:  # not there (yet), or a dangling link: nothing of an input
                continue
            if (stat.st_dev, stat.st_ino) in ids:
                self._refuse_input(ids[(stat.st_dev, stat.st_ino)])

    def _refuse_input(self, source: Path) -> None:
        raise DataError(
            f"output={str(self.path)!r} would write over the input {str(source)!r} (the same "
            "file, a link to it, or the folder holding it); score never replaces its inputs: "
            "choose an output= outside the inputs",
            arguments=("output",),
        )

    def _entries(self) -> list[Path]:
        """The files of a folder output (and of its side-file folder)."""
        found: list[Path] = []
        for folder in (self.path, self.path / BAD_ROWS_DIR):
            if folder.is_dir():
                found.extend(p for p in folder.iterdir() if not p.is_dir())
        return found

    def clear(self, *, resume: bool, overwrite: bool, parts: int = 0) -> None:
        """Make the output ready to be written; call only with :func:`output_lock` held and
        after :meth:`check`.

        Removes the hidden temporary files an interrupted run left (the lock guarantees that no
        live run owns them), the manifest of a folder that ``resume`` rewrites, and, for
        ``overwrite`` without ``resume``, the parts of a folder output; with both, the parts
        beyond this job's ``parts`` (an earlier job's, with more inputs). A single output file
        is not removed: the new one replaces it by a rename when it is complete.
        """
        if self.single_file:
            names = {self.path.name, self.bad_rows_path().name}
            if self.path.parent.is_dir():
                for entry in self.path.parent.iterdir():
                    match = _SINGLE_TEMP.match(entry.name)
                    if match and match.group(1) in names:
                        _remove(entry)
            return
        if not self.path.is_dir():
            return
        if overwrite and not resume:
            for entry in self.path.iterdir():
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            return
        for folder in (self.path, self.path / BAD_ROWS_DIR):
            if folder.is_dir():
                for entry in folder.iterdir():
                    if _TEMP.match(entry.name):
                        entry.unlink(missing_ok=True)
        if overwrite:
            for entry in self.extra_parts(parts):
                entry.unlink(missing_ok=True)
        (self.path / MANIFEST_NAME).unlink(missing_ok=True)

    def write_manifest(self, payload: dict[str, Any]) -> Path:
        """Write ``_manifest.json`` (atomically): the job is complete."""
        target = self.path / MANIFEST_NAME
        with atomic_write_path(target) as tmp:
            tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
        return target


@contextlib.contextmanager
def parts_folder(layout: OutputLayout) -> Iterator[Path]:
    """A hidden temporary folder beside a single output file, for the parts it is assembled
    from (the Dask engine); removed on leaving the block, and by :meth:`OutputLayout.clear`
    if a killed run left it."""
    import tempfile

    parent = layout.path.parent
    try:
        folder = Path(tempfile.mkdtemp(prefix=f".{layout.path.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise DataError(
            f"cannot write output={str(layout.path)!r}: {exc.strerror or first_line(exc)}; "
            "choose an output= in a folder you can write to",
            arguments=("output",),
        ) from exc
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def _ours(entry: Path) -> bool:
    """Whether score wrote ``entry`` of a folder output: by its name, and for Parquet files by
    what score writes in them (the identity metadata of a part, the columns of a side file)."""
    name = entry.name
    if entry.is_dir():
        return name == BAD_ROWS_DIR and all(
            _TEMP.match(p.name) or (_PART.match(p.name) and _is_bad_rows_file(p))
            for p in entry.iterdir()
        )
    if _TEMP.match(name):
        return True
    if name == MANIFEST_NAME:
        return _is_manifest(entry)
    return bool(_PART.match(name)) and _is_part(entry)


def _is_part(path: Path) -> bool:
    """A Parquet file with score's identity metadata (a part, or a single output file)."""
    return read_part(path)[0] is not None


def _is_manifest(path: Path) -> bool:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(payload, dict) and "parts" in payload and "model_sha256" in payload


def _is_bad_rows_file(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return False
    return schema.names[: len(BAD_ROW_COLUMNS)] == list(BAD_ROW_COLUMNS)


def part_identity(
    sources: Sequence[Any], model_sha256: str, options: dict[str, Any]
) -> dict[str, Any]:
    """What a part records about how it was made, and what ``--resume`` compares."""
    return {
        # 2: CSV key columns are text (format 1 typed them as pyarrow guessed); parts of
        # another format are never resumed into one output with these.
        "format": 2,
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
    """Streams tables into one output Parquet file (and its side file of bad rows).

    A write the file system refuses (disk full, file size limit) raises :class:`DataError`
    naming the final file, not the temporary one.
    """

    def __init__(
        self,
        path: Path,
        tmp: Path,
        bad_path: Path,
        stack: contextlib.ExitStack,
        identity: dict[str, Any],
    ) -> None:
        self._path = path
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

        with _writing(self._path):
            if table is not None and table.num_rows:
                if self._writer is None:
                    schema = table.schema.with_metadata(self._metadata)
                    self._writer = pq.ParquetWriter(self._tmp, schema)
                self._writer.write_table(_conform(table, self._writer.schema, self._path))
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
                with _writing(self._path):
                    self._writer = pq.ParquetWriter(self._tmp, schema)
        with _writing(self._path):
            self.close()

    def close(self) -> None:
        """Close the writers (without committing: that is the rename on leaving the block)."""
        writers = (self._writer, self._bad_writer)
        self._writer = self._bad_writer = None
        for writer in writers:
            if writer is not None:
                writer.close()


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Turn the file system's refusal of a write into a one-line error naming ``path``."""
    try:
        yield
    except OSError as exc:
        raise DataError(
            f"cannot write {str(path)!r}: {exc.strerror or first_line(exc)}; nothing "
            "half-written was kept: free disk space (or raise the file size limit) or choose "
            "another output=, then run again (resume=True keeps the parts already finished)",
            arguments=("output", "resume"),
        ) from exc


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
    block succeeds; on error or interruption nothing appears under the final names, and what
    was there before (a part of an earlier run, its side file) is left as it was.

    A side file of an earlier attempt at the same part is replaced by this one's, or removed
    when this attempt skipped no row, just before the part is renamed into place; ``empty``
    gives the schema of a part in which no row could be scored.

    Raises:
        DataError: the file system refused a write (disk full, file size limit), naming
            ``path``.
    """
    with _writing(path), contextlib.ExitStack() as stack:
        tmp = stack.enter_context(atomic_write_path(path))
        sink = PartSink(path, tmp, bad_path, stack, identity)
        try:
            yield sink
        except BaseException:
            # The part is abandoned: a writer that cannot flush its buffer changes nothing.
            with contextlib.suppress(OSError):
                sink.close()
            raise
        sink.finish(empty)
        if not sink.bad_rows:
            bad_path.unlink(missing_ok=True)


@dataclass(frozen=True)
class _Held:
    fd: int
    path: Path


@contextlib.contextmanager
def output_lock(layout: OutputLayout) -> Iterator[None]:
    """Hold the output's advisory lock (``fcntl.flock`` on ``layout.lock_path``) for a block.

    One job per output, whatever the engine: a second run is refused before it changes
    anything. The lock file records the holder's pid; the kernel releases the lock when the
    holder exits (even by ``kill -9``), so a lock file left behind is free and simply taken
    over. The lock file, and folders created only to hold it, are removed on leaving.

    Raises:
        DataError: another run holds the lock (naming the output and its pid), or the lock
            file cannot be created (naming the output and why).
    """
    created = _missing_parents(layout.lock_path.parent)
    new_folder = not layout.single_file and not layout.path.exists()
    try:
        for folder in reversed(created):
            folder.mkdir()
        held = _acquire(layout)
    except OSError as exc:
        _remove_empty(created)
        raise DataError(
            f"cannot write output={str(layout.path)!r}: {exc.strerror or first_line(exc)} "
            f"({exc.filename or layout.lock_path}); choose an output= in a folder you can "
            "write to",
            arguments=("output",),
        ) from exc
    except DataError:
        _remove_empty(created)
        raise
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(held.path).st_ino == os.fstat(held.fd).st_ino:
                held.path.unlink()
        os.close(held.fd)
        if new_folder:
            created.insert(0, layout.path)  # the output folder, left empty by a failed job
        _remove_empty(created)


def _acquire(layout: OutputLayout) -> _Held:
    path = layout.lock_path
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise _held_error(layout, fd) from exc
            finally:
                os.close(fd)
        # The holder removes the lock file as it releases it: a lock taken on a file no longer
        # under that name guards nothing, so take the new one.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return _Held(fd, path)
        os.close(fd)


def _held_error(layout: OutputLayout, fd: int) -> DataError:
    """The refusal of a run whose output another run holds (``fd``: its lock file, open)."""
    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
    return DataError(
        f"output={str(layout.path)!r} is being written by another score run (pid {holder}); "
        "wait for it to finish, or stop it and run again with resume=True",
        arguments=("output", "resume"),
    )


def _missing_parents(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders (deepest first) that are empty; leave the others."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()
